"""The registries: what @test_kernel / @bench record, the matrix they expand to, and the case helpers."""

import numpy as np
import pytest

from iron import Case, In, Setup, T, Tensor, bench, f16, f32, i32, kernel, test_kernel, variants
from iron.harness import registry
from iron.harness.cases import compact, shape_label
from iron.harness.registry import RegistryError
from iron.lang import program_id


@kernel(variants(T=[f32, f16], BLOCK=[64, 128]))
def copy(a: In[T], out: Tensor[T], n: int):
    i = program_id(0)
    if i < n:
        out[i] = a[i]


@kernel
def fixed(a: In[i32], out: Tensor[i32]):
    out[program_id(0)] = a[program_id(0)]


@pytest.fixture(autouse=True)
def _empty_registries():
    registry.clear()
    yield
    registry.clear()


def _setup(case: Case) -> Setup:
    return Setup(args=[case.randn(case.n), case.empty(case.n), case.n], grid=case.n)


def test_decorators_register_and_return_the_function_unchanged():
    decorated = bench(copy, shapes=[1 << 20])(test_kernel(copy, shapes=[7])(_setup))
    assert decorated is _setup
    (t,) = registry.registered("test")
    (b,) = registry.registered("bench")
    assert (t.name, t.kind, t.kernel_name) == ("_setup", "test", "copy")
    assert b.kind == "bench" and b.shapes == [1 << 20]
    assert t.origin.endswith(f"test_registry.py:{_setup.__code__.co_firstlineno}")


def test_the_matrix_is_bindings_by_dtypes_by_shapes_with_stable_ids():
    test_kernel(copy, shapes=[1, 4099], bindings=[{"BLOCK": 64}, {"BLOCK": 128}], name="copy/t")(_setup)
    items = registry.select("test", "interp")
    assert [i.id for i in items] == [
        "copy/t[N=1,BLOCK=64,f32]", "copy/t[N=4099,BLOCK=64,f32]", "copy/t[N=1,BLOCK=64,f16]",
        "copy/t[N=4099,BLOCK=64,f16]", "copy/t[N=1,BLOCK=128,f32]", "copy/t[N=4099,BLOCK=128,f32]",
        "copy/t[N=1,BLOCK=128,f16]", "copy/t[N=4099,BLOCK=128,f16]"]
    assert items[2].binding == {"BLOCK": 64, "T": f16} and items[2].dtype == f16


def test_dtypes_default_to_the_kernels_dtype_variants_or_its_fixed_dtype():
    test_kernel(copy, shapes=[8])(_setup)
    test_kernel(fixed, shapes=[8], name="fixed")(_setup)
    labels = [(i.entry.name, i.dtype_label) for i in registry.select("test", "interp")]
    assert labels == [("_setup", "f32"), ("_setup", "f16"), ("fixed", "i32")]


def test_bindings_may_name_their_own_dtype():
    test_kernel(copy, shapes=[8], bindings=[{"T": f16, "BLOCK": 64}, {"T": f32, "BLOCK": 128}])(_setup)
    assert [i.id for i in registry.select("test", "interp")] == ["_setup[N=8,BLOCK=64,f16]",
                                                                  "_setup[N=8,BLOCK=128,f32]"]


def test_shapes_per_backend_and_shape_labels():
    bench(copy, shapes={"interp": [1024], "*": [1 << 24, {"M": 64, "N": 4096}]}, dtypes=[f32])(_setup)
    assert [i.case_label for i in registry.select("bench", "interp")] == ["N=1K"]
    assert [i.case_label for i in registry.select("bench", "cuda")] == ["N=16M", "M=64,N=4K"]
    assert shape_label((128, 3)) == "128x3" and compact(4099) == "4099" and compact(3 << 30) == "3G"


def test_filters_match_ids_and_kernel_names_and_dtypes_filter_rows():
    test_kernel(copy, shapes=[8], name="alpha")(_setup)
    test_kernel(fixed, shapes=[8], name="beta")(_setup)
    assert {i.entry.name for i in registry.select("test", "interp", ["fixed"])} == {"beta"}
    assert [i.id for i in registry.select("test", "interp", ["alpha"], ["f16"])] == ["alpha[N=8,f16]"]
    assert registry.select("test", "interp", ["nothing"]) == []


def test_a_dtype_the_kernel_has_no_variant_for_is_refused():
    with pytest.raises(RegistryError, match="no variant T=i32"):
        test_kernel(copy, dtypes=[i32])


def test_a_non_kernel_is_refused():
    with pytest.raises(RegistryError, match="not an @iron.kernel"):
        test_kernel(lambda: None)


def test_the_same_name_from_another_file_is_refused_but_a_reimport_replaces():
    test_kernel(copy, name="dup")(_setup)
    test_kernel(copy, name="dup", shapes=[3])(_setup)  # the same file again: a reimport
    assert registry.registered("test")[0].shapes == [3]
    ns: dict = {}
    exec(compile("def other(case):\n    pass\n", "/elsewhere/mod.py", "exec"), ns)
    with pytest.raises(RegistryError, match="two tests are named 'dup'"):
        test_kernel(copy, name="dup")(ns["other"])


def test_a_specialised_kernel_registers_with_its_binding():
    test_kernel(copy.variant(BLOCK=128), shapes=[8], dtypes=[f16])(_setup)
    (item,) = registry.select("test", "interp")
    assert item.binding == {"T": f16} and registry.base_kernel(item.entry.kernel) == (copy, {"BLOCK": 128})


def test_case_generators_are_seeded_by_run_seed_and_item_and_rounded_to_the_dtype():
    test_kernel(copy, shapes=[16])(_setup)
    f32_item, f16_item = registry.select("test", "interp")
    a = f32_item.case(7, "interp").randn()
    assert np.array_equal(a, f32_item.case(7, "interp").randn())
    assert not np.array_equal(a, f32_item.case(8, "interp").randn())
    h = f16_item.case(7, "interp")
    assert h.randn().dtype == np.float16 and h.empty(2, 3).shape == (2, 3)
    assert h.randint(100, low=-3, high=3).dtype == np.int32 and h.scalar(2.5).dtype == np.float16
    assert h["T"] == f16 and h.n == 16 and h.dims == (16,)
    named = Case({"M": 4, "N": 5}, None, {}, np.random.default_rng(0))
    assert named["N"] == 5 and named.n == 20 and named.randn().shape == (4, 5)
    with pytest.raises(KeyError, match="no extent or binding named 'K'"):
        named["K"]


def test_large_draws_come_in_pieces_the_same_on_any_machine(monkeypatch):
    """Bench-sized arrays are drawn on threads from spawned generators; the values depend on the seed only."""
    from iron.harness import cases

    monkeypatch.setattr(cases, "PARALLEL_DRAW", 1000)
    small = Case({"M": 10, "N": 99}, None, {}, np.random.default_rng(3)).randn()
    assert np.array_equal(small, np.random.default_rng(3).standard_normal((10, 99), dtype=np.float32))
    big = Case({"M": 10, "N": 100}, None, {}, np.random.default_rng(3))
    values, spread = big.randn(), big.uniform(low=2.0, high=3.0)
    monkeypatch.setattr(cases.os, "cpu_count", lambda: 1)  # one thread: the same pieces, the same values
    again = Case({"M": 10, "N": 100}, None, {}, np.random.default_rng(3))
    assert np.array_equal(values, again.randn()) and np.array_equal(spread, again.uniform(low=2.0, high=3.0))
    pieces = values.reshape(cases.DRAW_PARTS, -1)
    assert len({p.tobytes() for p in pieces}) == cases.DRAW_PARTS, "each piece has its own generator"
    assert abs(values.mean()) < 0.2 and 0.8 < values.std() < 1.2 and spread.min() >= 2.0 and spread.max() < 3.0
