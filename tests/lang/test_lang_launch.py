"""Launching through the public surface on the interpreter: binding from arguments, variants, constexprs,
grid and group forms, backend selection, and the launch errors users can cause."""

from __future__ import annotations

import numpy as np
import pytest

import iron
from iron import Constexpr, In, T, Tensor, bf16, config, f16, f32, i32, kernel, variants
from iron.core.dtypes import numpy_dtype
from iron.core.errors import LaunchError
from iron.lang import barrier, exp, group_id, group_size, load, program_id, shared, store, thread_id
from iron.runtime import BackendUnavailable


@kernel(variants(T=[f32, f16, bf16]))
def iron_exp(a: Tensor[T], out: Tensor[T]):
    idx = program_id(0)
    store(out[idx], exp(load(a[idx])))


@pytest.mark.parametrize("dtype, mantissa_bits", [(f32, 23), (f16, 10), (bf16, 7)])
def test_seed_kernel_matches_numpy(dtype, mantissa_bits: int) -> None:
    rng = np.random.default_rng(7)
    a = rng.uniform(-4, 4, 1000).astype(numpy_dtype(dtype))
    out = np.zeros_like(a)
    iron_exp[a.size](a, out)
    expected = np.exp(a.astype(np.float64))
    np.testing.assert_allclose(out.astype(np.float64), expected, rtol=2.0 ** -mantissa_bits, atol=0)


@kernel(variants(T=[f32, f16], BLOCK=[64, 128]))
def block_sums(a: In[T], out: Tensor[f32], n: int):
    s = shared(f32, BLOCK)  # noqa: F821 - BLOCK is a variant parameter
    t = thread_id(0)
    i = program_id(0)
    v = 0.0
    if i < n:
        v = f32(a[i])
    s[t] = v
    barrier()
    step = BLOCK // 2  # noqa: F821
    while step > 0:
        if t < step:
            s[t] += s[t + step]
        barrier()
        step //= 2
    if t == 0:
        out[group_id(0)] = s[0]


def _block_reference(a: np.ndarray, block: int) -> np.ndarray:
    padded = np.zeros(-(-a.size // block) * block)
    padded[: a.size] = a
    return padded.reshape(-1, block).sum(axis=1)


@pytest.mark.parametrize("block", [64, 128])
def test_variant_parameter_from_keyword_and_from_variant(block: int) -> None:
    a = np.arange(300, dtype=np.float32)
    groups = -(-a.size // block)
    by_keyword = np.zeros(groups, np.float32)
    # A kernel with barrier() runs over whole groups (the tail guarded by `if i < n`), as on every GPU.
    block_sums[groups * block, block](a, by_keyword, a.size, BLOCK=block)
    by_variant = np.zeros(groups, np.float32)
    block_sums.variant(BLOCK=block)[groups * block, block](a, by_variant, a.size)
    np.testing.assert_array_equal(by_keyword, _block_reference(a, block))
    np.testing.assert_array_equal(by_variant, by_keyword)


def test_unlisted_variant_parameters_take_their_first_value() -> None:
    a = np.ones(200, np.float16)
    out = np.zeros(4, np.float32)
    block_sums[4 * 64, 64](a, out, a.size)  # BLOCK defaults to 64, T = f16 from the array
    np.testing.assert_array_equal(out, [64, 64, 64, 8])
    assert block_sums.lower(a, out, a.size).meta["variant"] == {"T": f16, "BLOCK": 64}
    assert block_sums.ir(T=f16).meta["variant"] == {"T": f16, "BLOCK": 64}
    assert block_sums.variants == [{"T": f32, "BLOCK": 64}, {"T": f32, "BLOCK": 128},
                                   {"T": f16, "BLOCK": 64}, {"T": f16, "BLOCK": 128}]


def test_variant_selection_errors_list_the_variants() -> None:
    a = np.ones(8, np.int32)
    with pytest.raises(LaunchError) as info:
        block_sums[8](a, np.zeros(1, np.float32), 8)
    msg = str(info.value)
    assert "no variant with T=i32 (from the dtype of argument 'a')" in msg
    assert "available variants: T=f32, BLOCK=64 | T=f32, BLOCK=128 | T=f16, BLOCK=64 | T=f16, BLOCK=128" in msg
    with pytest.raises(LaunchError, match="no variant with BLOCK=100 .from k.variant"):
        block_sums.variant(BLOCK=100)
    with pytest.raises(LaunchError, match="no variant with BLOCK=256 .from keyword BLOCK="):
        block_sums[8](np.ones(8, np.float32), np.zeros(1, np.float32), 8, BLOCK=256)
    with pytest.raises(LaunchError, match="conflicting values for T: f32 from the dtype of argument 'a' but f16"):
        iron_exp[8](np.ones(8, np.float32), np.ones(8, np.float16))
    with pytest.raises(LaunchError, match="has no parameter or variant 'BLOK'"):
        block_sums[8](np.ones(8, np.float32), np.zeros(1, np.float32), 8, BLOK=64)
    with pytest.raises(LaunchError, match=r"takes 3 argument\(s\) \(a, out, n\), got 4"):
        block_sums[8](np.ones(8, np.float32), np.zeros(1, np.float32), 8, 9)
    with pytest.raises(LaunchError, match=r"missing the argument 'n'; it takes \(a, out, n\)"):
        block_sums[8](np.ones(8, np.float32), np.zeros(1, np.float32))



@kernel(variants(T=[f32, f16], BLOCK=[32, 64, 128], MODE=["a", "b", "c"]))
def many_variants(out: Tensor[T]):
    out[program_id(0)] = T(BLOCK)


def test_a_large_variant_product_is_listed_by_parameter() -> None:
    with pytest.raises(LaunchError) as info:
        many_variants.variant(MODE="d")
    msg = str(info.value)
    assert "no variant with MODE='d'" in msg
    assert "its variants (18 combinations): T in {f32, f16}; BLOCK in {32, 64, 128}; MODE in {'a', 'b', 'c'}" in msg
    assert " | " not in msg

@kernel
def fill(out: Tensor[T], value: T, COUNT: Constexpr[int] = 2):  # noqa: N803
    i = program_id(0)
    for k in range(COUNT):
        out[i * COUNT + k] = value + k


def test_constexpr_arguments_specialise_and_leave_the_ir() -> None:
    out = np.zeros(6, np.float32)
    fill[3](out, np.float32(1.5))  # COUNT defaults to 2; T from the numpy scalar
    assert out.tolist() == [1.5, 2.5, 1.5, 2.5, 1.5, 2.5]
    out = np.zeros(6, np.float32)
    fill[2](out, np.float32(1.0), 3)
    assert out.tolist() == [1.0, 2.0, 3.0, 1.0, 2.0, 3.0]
    fill[2](out, np.float32(5.0), COUNT=3)
    assert out.tolist() == [5.0, 6.0, 7.0, 5.0, 6.0, 7.0]
    ir3 = fill.ir(T=f32, COUNT=3)
    assert [p.name for p in ir3.params] == ["out", "value"] and ir3.meta["variant"] == {"T": f32, "COUNT": 3}
    assert fill.ir(T=f32, COUNT=3) is ir3 and fill.ir(T=f32, COUNT=4) is not ir3
    with pytest.raises(LaunchError, match=r"'COUNT' is Constexpr\[int\], got 2.5"):
        fill[2](out, np.float32(1.0), 2.5)


@kernel
def scaled_store(out: Tensor[f32], value: T):
    out[0] = f32(value * 2)


def test_python_scalars_bind_no_type_variable() -> None:
    out = np.zeros(1, np.float32)
    with pytest.raises(LaunchError, match="cannot tell the dtype T; pass a numpy array or numpy scalar"):
        scaled_store[1](out, 1.5)
    scaled_store[1](out, np.float16(1.5))
    assert out[0] == 3.0
    with pytest.raises(LaunchError, match="argument 'out': expects an array .*got list"):
        fill[2]([0.0] * 4, 1.0)
    out = np.zeros(4, np.float16)
    fill[2](out, 0.5)  # T comes from the array; the Python float binds nothing
    assert out.tolist() == [0.5, 1.5, 0.5, 1.5]


@kernel
def coordinates(out: Tensor[i32], width: int):
    x = program_id(0)
    y = program_id(1)
    out[y * width + x] = x + 100 * y + 10000 * group_size(0)


@pytest.mark.parametrize("launch, group_x", [
    (lambda out: coordinates[(4, 3),](out, 4), 16),
    (lambda out: coordinates[(4, 3), (2, 3)](out, 4), 2),
    (lambda out: coordinates.launch(out, 4, grid=(4, 3), group=(4, 1)), 4),
    (lambda out: coordinates.variant()[(4, 3), (1, 1)](out, 4), 1),
], ids=["grid-only", "grid-and-group", "launch", "variant"])
def test_grid_and_group_forms(launch, group_x: int) -> None:
    out = np.full(12, -1, np.int32)
    launch(out)
    expected = [x + 100 * y + 10000 * group_x for y in range(3) for x in range(4)]
    assert out.tolist() == expected


def test_one_dimensional_grid_and_group() -> None:
    out = np.zeros(10, np.int32)
    coordinates[10, 4](out, 10)
    assert out.tolist() == [x + 40000 for x in range(10)]
    coordinates[10](out, 10)
    assert out.tolist() == [x + 2560000 for x in range(10)]  # the interpreter's default group: 256


def test_bad_grids_are_launch_errors() -> None:
    out = np.zeros(4, np.int32)
    for bad in (lambda: coordinates[0](out, 4), lambda: coordinates[1, 2, 3](out, 4),
                lambda: coordinates[(1, 2, 3, 4),](out, 4), lambda: coordinates.launch(out, 4, grid=2.5)):
        with pytest.raises(LaunchError):
            bad()
    with pytest.raises(LaunchError, match=r"coordinates\[grid\]"):
        coordinates(out, 4)


def test_backend_selection() -> None:
    from iron import config

    a = np.zeros(4, np.float32)
    iron.use("interp")
    assert config.get("backend") == "interp"
    iron_exp[4](a, a)
    iron.use("metal")  # never present on Linux (cuda may be, on a GPU machine)
    with pytest.raises(BackendUnavailable, match="backend 'metal'"):
        iron_exp[4](a, a)
    iron_exp.launch(a, a, grid=4, backend="interp")  # an explicit backend wins


def test_lower_and_compiled_are_cached_per_binding() -> None:
    a = np.zeros(4, np.float16)
    assert iron_exp.lower(a, a) is iron_exp.ir(T=f16) is iron_exp.variant(T=f16).ir
    spec = iron_exp.variant(T=f16)
    compiled = spec.compiled("interp")
    assert spec.compiled("interp") is compiled and compiled is not spec.ir
    assert [op.opcode for op in compiled.walk()] == ["program_id", "load", "exp", "store"]
    assert repr(spec) == "<iron.kernel iron_exp [T=f16]>" and spec.name == "iron_exp"
    assert iron_exp.fn.__name__ == "iron_exp"


@kernel(name="renamed", fp_contract=False)
def options_kernel(a: Tensor[f32]):
    """Documented."""
    a[0] = a[0] * a[1] + a[2]


def test_kernel_options_reach_the_ir() -> None:
    k = options_kernel.ir()
    assert k.name == "renamed" and k.meta["fp_contract"] is False and k.meta["doc"] == "Documented."
    assert "fma" not in [op.opcode for op in options_kernel.variant().compiled("cuda").walk()]


@kernel
def guarded_positive(a: In[f32], out: Tensor[i32], n: int):
    i = program_id(0)
    if i < n and a[i] > 0.0:
        out[i] = 1


def test_and_really_short_circuits_at_run_time() -> None:
    """With 64 threads and 10 elements, evaluating a[i] for i >= n would be an out-of-bounds read."""
    a = np.linspace(-1, 1, 10).astype(np.float32)
    out = np.zeros(64, np.int32)
    guarded_positive[64, 64](a, out, a.size)
    assert out[:10].tolist() == (a > 0).astype(int).tolist() and not out[10:].any()


@kernel
def spin(out: Tensor[i32], n: int):
    k = 0
    while True:
        k += 3
        if k > n:
            break
    while False:
        k = -1
    out[0] = k


def test_while_true_and_while_false() -> None:
    ops = [op.opcode for op in spin.ir().walk()]
    assert ops.count("loop") == 1 and ops.count("lnot") == 0
    out = np.zeros(1, np.int32)
    spin[1](out, 10)
    assert out[0] == 12


def test_repeated_launches_reuse_what_they_resolved_until_an_option_changes(monkeypatch) -> None:
    """The launch fast path: one resolution per (argument types, geometry, backend, options), no stale reuse."""
    from iron import config

    resolutions = []
    original = type(iron_exp)._compiled_for
    monkeypatch.setattr(type(iron_exp), "_compiled_for",
                        lambda self, *a: resolutions.append(a[-1]) or original(self, *a))
    a32 = np.linspace(-1, 1, 64, dtype=np.float32)
    a16 = a32.astype(np.float16)
    out32, out16 = np.zeros_like(a32), np.zeros_like(a16)
    for _ in range(3):
        iron_exp[64, 32](a32, out32)
    assert len(resolutions) == 1
    iron_exp[64, 32](a16, out16)  # another dtype: another variant, resolved once
    iron_exp[64, 32](a16, out16)
    assert len(resolutions) == 2
    assert np.array_equal(out16, np.exp(a16.astype(np.float32)).astype(np.float16))
    iron_exp[64, 16](a32, out32)  # another group
    assert len(resolutions) == 3
    try:
        config.set_option("opt_level", 1)  # options feed the pipeline: the next launch resolves again
        iron_exp[64, 32](a32, out32)
        assert len(resolutions) == 4
    finally:
        config.clear_overrides()
    np.testing.assert_allclose(out32, np.exp(a32), rtol=2e-7)


def test_variant_launches_reuse_their_binding_and_never_another_variants(monkeypatch) -> None:
    """``k.variant(...).launch`` takes the fast path too: its key is the fixed binding plus the argument
    types (_call_signature's summary, computed faster), so each variant resolves once and keeps its own."""
    from iron.lang.annotations import binding_key
    from iron.jit.kernel import _call_signature
    from iron.lang.numpy_compat import element_signature

    resolutions = []
    original = type(block_sums)._compiled_for
    monkeypatch.setattr(type(block_sums), "_compiled_for",
                        lambda self, *a: resolutions.append(a[-1]) or original(self, *a))
    a = np.arange(300, dtype=np.float32)
    sums = {}
    for block in (64, 128, 64, 128):
        out = np.zeros(-(-a.size // block), np.float32)
        block_sums.variant(BLOCK=block).launch(a, out, a.size, grid=(out.size * block,), group=(block,))
        np.testing.assert_array_equal(out, _block_reference(a, block))
        sums[block] = out
    assert len(resolutions) == 2
    fixed = {"BLOCK": 64}
    args = (a, sums[64], 300)
    mask = block_sums._runtime_mask()
    assert _call_signature(fixed, args, {}, mask) == (binding_key(fixed),) + element_signature(args)


class _DeviceArray:
    """What a CUDA array library hands over: no numpy, a __cuda_array_interface__ with its typestr."""

    def __init__(self, typestr: str, n: int):
        self.__cuda_array_interface__ = {"shape": (n,), "typestr": typestr, "data": (0, False), "version": 3}


def test_device_arrays_bind_by_their_element_type_and_reach_the_device(monkeypatch) -> None:
    """torch / CuPy / __cuda_array_interface__ arrays pick the variant by dtype (the cuda device takes them);
    the interpreter then refuses them with its own clear message."""
    seen = []

    class Recording:
        name, target = "recording", "interp"

        def default_group(self, grid):
            return (32,)

        def launch(self, kernel, args, grid, group):
            seen.append((kernel.name, [type(a).__name__ for a in args]))

    import iron.runtime as rt

    monkeypatch.setitem(rt._devices, "recording", Recording())
    monkeypatch.setattr(rt, "resolve_backend", lambda explicit=None, data=None: "recording")
    before = len(iron_exp._fast)
    iron_exp[64](_DeviceArray("<f2", 64), _DeviceArray("<f2", 64))
    iron_exp[64](_DeviceArray("<f4", 64), _DeviceArray("<f4", 64))
    assert [name for name, _ in seen] == ["iron_exp", "iron_exp"]
    assert len(iron_exp._fast) == before + 2  # one resolution per dtype: f16 and f32 are two variants
    with pytest.raises(LaunchError, match="conflicting values for T"):
        iron_exp[64](_DeviceArray("<f4", 64), _DeviceArray("<f2", 64))
    with pytest.raises(LaunchError, match="expects an array"):
        iron_exp[64](object(), _DeviceArray("<f2", 64))


class _OnGpu(_DeviceArray):
    """A device array on GPU ``ordinal`` (as Iron's CudaArray says it)."""

    def __init__(self, typestr: str, n: int, ordinal: int = 0):
        super().__init__(typestr, n)
        self.ordinal = ordinal


def test_auto_runs_where_the_data_lives(monkeypatch) -> None:
    """backend auto (the default) follows the arrays: device arrays run on their GPU, ordinal included; numpy
    arrays on the interpreter; arrays on two GPUs are an error naming them; an explicit cuda with the data on
    GPU 1 runs on GPU 1."""
    import iron.runtime as rt

    seen = []

    class Recording:
        target = "interp"

        def __init__(self, name):
            self.name = name

        def default_group(self, grid):
            return (32,)

        def launch(self, kernel, args, grid, group):
            seen.append(self.name)

    for name in ("cuda", "cuda:1"):
        monkeypatch.setitem(rt._devices, name, Recording(name))
    monkeypatch.delenv("IRON_BACKEND", raising=False)
    config.reload()
    iron_exp[64](_OnGpu("<f4", 64), _OnGpu("<f4", 64))
    iron_exp[64](_OnGpu("<f4", 64, 1), _OnGpu("<f4", 64, 1))
    iron_exp[64](_OnGpu("<f4", 64, 1), _OnGpu("<f4", 64, 1), backend="cuda")
    x = np.ones(64, np.float32)
    iron_exp[64](x, np.zeros_like(x))
    assert seen == ["cuda", "cuda:1", "cuda:1"], "numpy arrays ran on the interpreter, not a recording device"
    with pytest.raises(LaunchError, match=r"kernel 'iron_exp': the arrays live on different devices "
                                          r"\(a on cuda, out on cuda:1\)"):
        iron_exp[64](_OnGpu("<f4", 64), _OnGpu("<f4", 64, 1))
    with pytest.raises(LaunchError, match="it lives on cuda: leave the backend at auto"):
        iron_exp[64](_OnGpu("<f4", 64), _OnGpu("<f4", 64), backend="interp")
