"""Call plans (iron/std/_plans.py): every host function's second call with a signature replays the first one's
steps and gives what the function as written gives; what depends on memory is still checked on every call;
and anything the plan cannot name runs as written."""

from __future__ import annotations

import numpy as np
import pytest
from test_host_contract import CASES, Case

from iron import LaunchError, config, f32
from iron.std import _plans, elementwise, norms, softmax


pytestmark = pytest.mark.usefixtures("on_interp")


def _fresh(case: Case) -> dict[str, np.ndarray]:
    """Inputs at a 128-byte boundary, so that every call of the case has one signature (address mod 128)."""
    out = {}
    for name, a in case.inputs().items():
        raw = np.empty(a.nbytes + 128, np.uint8)
        start = -raw.ctypes.data % 128
        view = raw[start:start + a.nbytes].view(a.dtype).reshape(a.shape)
        view[...] = a
        out[name] = view
    return out


def _as_tuple(r):
    return r if isinstance(r, tuple) else (r,)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_a_replayed_call_gives_what_the_function_as_written_gives(case, monkeypatch):
    case.fn.plans.clear()
    first = _as_tuple(case.call(_fresh(case), None))
    inputs = _fresh(case)
    replayed = _as_tuple(case.call(inputs, None))
    planned = [p for p in case.fn.plans.values() if p is not None]
    assert planned, "the second call found a plan"
    monkeypatch.setenv("IRON_CALL_PLANS", "0")
    config.reload()
    written = _as_tuple(case.call(inputs, None))
    for r, w, f in zip(replayed, written, first):
        np.testing.assert_array_equal(r, w)
        np.testing.assert_array_equal(r, f)


@pytest.mark.parametrize("case", [c for c in CASES if c.in_place], ids=lambda c: c.name)
def test_in_place_forms_replay_in_place(case):
    name = case.in_place[0]
    results = []
    for _ in range(2):
        inputs = _fresh(case)
        want = _as_tuple(case.call({k: v.copy() for k, v in inputs.items()}, None))[0]
        got = case.call(inputs, inputs[name])
        assert _as_tuple(got)[0] is inputs[name]
        np.testing.assert_array_equal(inputs[name], want)
        results.append(got)


def test_an_out_overlapping_an_input_is_refused_on_a_replayed_call_too():
    """Two calls with one signature (same alignment mod 128), the second with out overlapping x: the replay
    checks memory as the function does and raises its error, launching nothing."""
    buf = np.zeros(4096, np.float32)
    start = (-buf.ctypes.data % 128) // 4
    x = buf[start:start + 64]
    x[:] = np.arange(64)
    elementwise.unary("exp", x, out=buf[start + 256:start + 320])  # recorded: a separate out
    with pytest.raises(LaunchError, match="exp: out overlaps x"):
        elementwise.unary("exp", x, out=buf[start + 32:start + 96])  # same signature, shares x's memory


def test_a_shape_dtype_or_value_change_is_another_plan():
    x = np.ones((4, 8), np.float32)
    w = np.ones(8, np.float32)
    norms.rmsnorm.plans.clear()
    norms.rmsnorm(x, w)
    norms.rmsnorm(x, w, eps=1e-3)
    norms.rmsnorm(x[:2].copy(), w)
    assert len(norms.rmsnorm.plans) == 3
    got = norms.rmsnorm(np.full((4, 8), 2.0, np.float32), w, eps=1e-3)
    np.testing.assert_allclose(got, np.full((4, 8), 2.0 / np.sqrt(4.0 + 1e-3), np.float32), rtol=1e-6)


def test_an_option_change_is_a_new_generation_and_off_plans_nothing(monkeypatch):
    x = np.ones((2, 8), np.float32)
    softmax.softmax.plans.clear()
    softmax.softmax(x)
    monkeypatch.setenv("IRON_CALL_PLANS", "0")
    config.reload()
    softmax.softmax(x)
    softmax.softmax(x)
    assert len(softmax.softmax.plans) == 1, "nothing planned while off"


def test_a_step_on_an_array_the_plan_cannot_name_is_run_as_written():
    x = np.ones(8, np.float32)
    record = _plans.Recording([x])
    record.scratch(x.reshape(2, 4), (2, 4), None, np.empty((2, 4), np.float32))  # a view made inside
    assert record.finish([], None) is None


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_every_launch_of_a_host_function_can_go_straight_to_the_device(case):
    """Each kernel a host function launches has its whole binding fixed by the host (no type variable left to
    the arguments), so a repeated launch is handed to the device's generated launcher (iron.jit.kernel
    relaunch) instead of being resolved again."""
    from iron.jit.kernel import traced_launches

    inputs = _fresh(case)
    case.call(inputs, None)
    with traced_launches() as launched:
        case.call(inputs, None)  # a replay
    assert launched
    for kernel, *_ in launched:
        assert getattr(kernel, "_fixed", getattr(kernel, "_is_fixed", False)), kernel


def test_strided_arrays_of_one_shape_but_other_strides_have_other_signatures():
    """A contiguous array's layout follows from its shape; a strided one's strides are part of the key, so a
    function that handles strided inputs cannot replay one layout's steps on another's."""
    def aligned(rows: int, cols: int) -> np.ndarray:  # at a 128-byte boundary: only the strides differ
        raw = np.zeros(rows * cols * 4 + 128, np.uint8)
        start = -raw.ctypes.data % 128
        return raw[start:start + rows * cols * 4].view(np.float32).reshape(rows, cols)

    a, b = aligned(8, 8)[:, :4], aligned(8, 16)[:, :4]  # one shape (8, 4), row strides 32 and 64 bytes
    key_a, _ = _plans.signature([a])
    key_b, _ = _plans.signature([b])
    assert key_a != key_b
    assert _plans.signature([np.zeros((8, 4), np.float32)])[0][0][1][2] is True


def test_the_native_signature_is_the_python_one():
    """native/plans.c builds the key signature_py builds, value for value: scalars by type, arrays with
    their reader and which earlier argument they are, tuples and lists inside, and no key for an unhashable
    value (with the arrays seen so far)."""
    from iron.core.native import compiler

    torch = pytest.importorskip("torch")
    if compiler() is None:
        pytest.skip("no C compiler here")
    native = _plans.SIGNATURE.load()
    assert native is not None, _plans.SIGNATURE.why_not
    native.configure(_plans._reader, torch.Tensor)
    x = torch.zeros(8, 8)
    n = np.zeros(4, np.float32)
    g = config.generation()
    cases = [
        ["exp", x, x, None, 1.5, 3, True, False, 2**70, "auto"],
        [x, x.t(), x[1:], x[:, ::2], torch.zeros(3, dtype=torch.bfloat16), n, n[::2], n],
        [(x, 2, (n, "a")), [x, x], np.float32(2.0), f32],
        [x, {}, n],  # no key: the arrays before the unhashable value
        [(x, [{}]), n],
        [torch.zeros(0)],
    ]
    for values in cases:
        got, want = native.signature(list(values), g), _plans.signature_py(list(values), g)
        assert got[0] == want[0]
        assert [id(a) for a in got[1]] == [id(a) for a in want[1]]
    assert native.signature([x, x], g)[0][1][2] == 0 and native.signature([x, x.clone()], g)[0][1][2] == -1
    assert native.signature([1], g)[0] != native.signature([1.0], g)[0] != native.signature([True], g)[0]


def test_calls_replay_the_same_with_the_native_path_off(monkeypatch):
    """IRON_NATIVE_PLANS=0: binding, signature and lookup run in Python, with the same plans and results."""
    results = {}
    for native in ("1", "0"):
        monkeypatch.setenv("IRON_NATIVE_PLANS", native)
        config.reload()
        softmax.softmax.plans.clear()
        a = np.arange(64, dtype=np.float32).reshape(4, 16)
        results[native] = [softmax.softmax(a), softmax.softmax(a)]
        assert len([p for p in softmax.softmax.plans.values() if p is not None]) == 1
        assert (_plans._hot is None) == (native == "0") or _plans.SIGNATURE.load() is None
    for a, b in zip(results["1"], results["0"]):
        np.testing.assert_array_equal(a, b)


def test_a_replayed_call_binds_its_arguments_as_python_does():
    """Positional, keyword and default arguments reach the plan; anything the binding cannot place (an unknown
    keyword, a missing argument, one too many) is the function's own error, never a replay."""
    a = np.arange(64, dtype=np.float32).reshape(4, 16)
    w = np.ones(16, np.float32)
    norms.rmsnorm.plans.clear()
    first = norms.rmsnorm(a, w)
    np.testing.assert_array_equal(norms.rmsnorm(a, w, 1e-6), first)
    np.testing.assert_array_equal(norms.rmsnorm(a, weight=w), first)
    np.testing.assert_array_equal(norms.rmsnorm(x=a, weight=w, eps=1e-6), first)
    assert not np.array_equal(norms.rmsnorm(a, w, eps=0.5), first)
    with pytest.raises(TypeError):
        norms.rmsnorm(a, w, bogus=1)
    with pytest.raises(TypeError):
        norms.rmsnorm(a)
    with pytest.raises(TypeError):
        norms.rmsnorm(a, w, 1e-6, None, None, 7)


def test_a_changed_tuning_table_is_not_replayed_past(monkeypatch):
    """A std tuning table (``_plans.Tuning``: attention's MMA_PLAN, COMBINE_PLAN) changed between two calls of one
    signature: the second call takes the new choice, not the first call's plan (a tuner's sweep, a test comparing
    two forms)."""
    from std_testing import spy_on_kernels

    from iron.std import attention

    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal(s).astype(np.float16) for s in ((1, 2, 64), (1, 2, 40, 64), (1, 2, 40, 64)))
    lens = np.full(1, 40, np.int32)
    launched = spy_on_kernels(monkeypatch, attention, "attention_decode_combine")
    monkeypatch.setitem(attention.COMBINE_PLAN, "tiled_from", 1 << 30)
    attention.decode_attention(q, k, v, lens, chunk=16)
    monkeypatch.setitem(attention.COMBINE_PLAN, "tiled_from", 1)
    attention.decode_attention(q, k, v, lens, chunk=16)
    assert [b["TILED"] for _, b in launched] == [False, True]
    before = config.generation()
    table = _plans.Tuning({"a": 1})
    for change in (lambda: table.__setitem__("a", 2), lambda: table.update(b=3), lambda: table.pop("b"),
                   lambda: table.setdefault("c", 4), lambda: table.__delitem__("c"), table.popitem,
                   lambda: table.__ior__({"d": 5}), table.clear):
        change()
        assert config.generation() > before
        before = config.generation()
