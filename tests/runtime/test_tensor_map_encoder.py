"""The CUDA runtime's tensor map encoder: a launch over the same arrays and scalars reuses the bytes without
re-checking or re-encoding; any input the map depends on (address, size, a named scalar) encodes again, and a
launch that breaks TMA's rules is a LaunchError naming the kernel, also after a good launch of the same map.
The driver is a recorder here; tests/gpu encode through the real one."""

import types

import pytest

from iron.core import dtypes as D
from iron.core.errors import LaunchError
from iron.codegen.tensor_maps import TensorMap
from iron.runtime.cuda.tensor_maps import TensorMapEncoder


class RecordingDriver:
    """What TensorMapEncoder calls of cuda.bindings.driver, recording each encoding."""

    def __init__(self):
        self.calls = []
        self.cuuint64_t = self.cuuint32_t = int
        self.CUtensorMapDataType = types.SimpleNamespace(CU_TENSOR_MAP_DATA_TYPE_BFLOAT16=9)
        self.CUtensorMapSwizzle = types.SimpleNamespace(CU_TENSOR_MAP_SWIZZLE_128B=3, CU_TENSOR_MAP_SWIZZLE_NONE=0)
        self.CUtensorMapInterleave = types.SimpleNamespace(CU_TENSOR_MAP_INTERLEAVE_NONE=0)
        self.CUtensorMapL2promotion = types.SimpleNamespace(CU_TENSOR_MAP_L2_PROMOTION_L2_256B=2)
        self.CUtensorMapFloatOOBfill = types.SimpleNamespace(CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE=0)

    def cuTensorMapEncodeTiled(self, kind, rank, address, dims, strides, box, elem, *rest):
        self.calls.append((rank, address, tuple(dims), tuple(strides), tuple(box)))
        return 0, types.SimpleNamespace(opaque=[len(self.calls)] * 16)


MAP = TensorMap("iron_map_0", 64, "x", D.bf16, "w", "c", "c", (8, 64), "sw128", ("n", "h"), (1, 8))


def test_a_launch_over_the_same_arrays_reuses_its_encoding(monkeypatch):
    from iron.runtime.cuda import tensor_maps

    checked = []
    real = tensor_maps.encoding
    monkeypatch.setattr(tensor_maps, "encoding", lambda *a: checked.append(a) or real(*a))
    drv = RecordingDriver()
    enc = TensorMapEncoder(drv)
    scalars = {"n": 2, "h": 6, "w": 5, "c": 128, "unrelated": 1}
    first = enc.encode("k", MAP, 0x10000, scalars, 2 * 6 * 5 * 128)
    assert enc.encode("k", MAP, 0x10000, {**scalars, "unrelated": 7}, 2 * 6 * 5 * 128) == first
    assert drv.calls == [(4, 0x10000, (128, 5, 6, 2), (256, 1280, 7680), (64, 8, 8, 1))]
    assert len(checked) == 1  # the second launch neither checked nor built an encoding
    assert enc.encode("k", MAP, 0x20000, scalars, 2 * 6 * 5 * 128) != first  # another address
    assert enc.encode("k", MAP, 0x10000, {**scalars, "h": 3}, 2 * 6 * 5 * 128) != first  # another extent
    assert len(drv.calls) == 3


def test_a_launch_that_breaks_the_rules_is_an_error_after_good_ones():
    enc = TensorMapEncoder(RecordingDriver())
    scalars = {"n": 2, "h": 6, "w": 5, "c": 128}
    enc.encode("k", MAP, 0x10000, scalars, 2 * 6 * 5 * 128)
    with pytest.raises(LaunchError, match="kernel 'k': .*the tensor ends past the tensor's 1535 elements"):
        enc.encode("k", MAP, 0x10000, scalars, 2 * 6 * 5 * 128 // 5 - 1)
    with pytest.raises(LaunchError, match="16-byte aligned"):
        enc.encode("k", MAP, 0x10008, scalars, 2 * 6 * 5 * 128)
