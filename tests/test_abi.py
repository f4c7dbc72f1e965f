"""The kernel ABI: buffer numbering, parameter-block layout and packing, entry names."""

import numpy as np

from iron import In, T, Tensor, f16, f32, i64, kernel, variants
from iron.codegen.abi import kernel_abi, pack_params
from iron.core import dtypes as D
from iron.lang import program_id


@kernel(variants(T=[f32, f16]))
def mixed(a: In[T], out: Tensor[T], scale: T, n: int, big: i64, flag: bool):
    i = program_id(0)
    if i < a.size and flag and big > 0:
        out[i] = a[i] * scale + T(n)


def test_buffers_in_parameter_order_and_fields_widened_and_aligned():
    abi = kernel_abi(mixed.ir(T=f16))
    assert abi.entry == "mixed__T_f16"
    assert [(t.name, t.binding, t.access) for t in abi.tensors] == [("a", 0, "read"), ("out", 1, "write")]
    layout = [(f.name, f.storage.name, f.offset) for f in abi.fields]
    assert layout == [("scale", "f32", 0), ("n", "i32", 4), ("big", "i64", 8), ("flag", "u32", 16),
                      ("iron_grid_x", "u32", 20), ("iron_grid_y", "u32", 24), ("iron_grid_z", "u32", 28),
                      ("iron_size_a", "u32", 32)]
    assert abi.params_size == 40 and abi.params_binding == 2


def test_pack_params_writes_every_field_at_its_offset():
    abi = kernel_abi(mixed.ir(T=f16))
    block = pack_params(abi, {"scale": np.float16(0.1), "n": -3, "big": 2**40, "flag": True}, (100,), {"a": 7})
    assert len(block) == abi.params_size
    assert np.frombuffer(block[0:4], np.float32)[0] == np.float32(np.float16(0.1))
    assert np.frombuffer(block[4:8], np.int32)[0] == -3
    assert np.frombuffer(block[8:16], np.int64)[0] == 2**40
    assert np.frombuffer(block[16:32], np.uint32).tolist() == [1, 100, 1, 1]
    assert np.frombuffer(block[32:36], np.uint32)[0] == 7


def test_entry_names_differ_per_variant_and_are_identifiers():
    names = {kernel_abi(mixed.ir(T=t)).entry for t in (f32, f16)}
    assert names == {"mixed__T_f32", "mixed__T_f16"}
    assert D.by_name("f16") is f16
