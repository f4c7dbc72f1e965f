"""iron.torch on the CPU (torch CPU tensors run on the interpreter): every std host function is an op whose
schema, fake implementation and mutation declarations torch's own checker (``torch.library.opcheck``)
accepts, in its functional and its ``_out`` form; a model calling five of them compiles with
``torch.compile(fullgraph=True)`` (no graph break) to the eager result; a user kernel becomes an op with one
decorator.  The CUDA side (inductor, CUDA graphs) is tests/gpu/test_torch_ops_cuda.py."""

from __future__ import annotations

import importlib
import inspect

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import iron.std as S  # noqa: E402
import iron.torch as it  # noqa: E402
from iron import In, LaunchError, Tensor, f32, kernel  # noqa: E402
from iron.lang import program_id  # noqa: E402
from iron.torch import std_ops  # noqa: E402
from torch_samples import samples  # noqa: E402

SAMPLES = samples()


@pytest.fixture(autouse=True)
def _interp(monkeypatch):
    monkeypatch.setenv("IRON_BACKEND", "auto")


def _outputs(result):
    return result if isinstance(result, tuple) else (result,)


def test_every_std_host_function_is_an_op():
    hosts = set()
    for name in S.MODULES:
        module = importlib.import_module(f"iron.std.{name}")
        for attr, obj in vars(module).items():
            if (inspect.isfunction(obj) and obj.__module__ == module.__name__ and not attr.startswith("_")
                    and "out" in inspect.signature(obj).parameters):
                hosts.add((name, attr))
    hosts.discard(("softmax", "checked_out"))  # the norms' helper, not a host function (test_host_contract.py)
    assert hosts == set(std_ops.COVERS.values())
    assert set(std_ops.COVERS) == set(it.OPS) == set(SAMPLES)
    for name in it.OPS:
        assert hasattr(torch.ops.iron, name) and hasattr(torch.ops.iron, f"{name}_out"), name
        assert getattr(it, name) is it.OPS[name]


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_functional_op_passes_torch_opcheck(name):
    args, kwargs = SAMPLES[name]
    torch.library.opcheck(getattr(torch.ops.iron, name).default, args, kwargs)


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_out_op_passes_torch_opcheck_and_writes_what_the_functional_op_returns(name):
    args, kwargs = SAMPLES[name]
    op = it.OPS[name]
    want = _outputs(getattr(torch.ops.iron, name)(*args, **kwargs))
    bound = op._bound(args, kwargs)
    full = [bound[n] for n in op.inputs]
    outs = [torch.empty_like(w) for w in want]
    torch.library.opcheck(getattr(torch.ops.iron, f"{name}_out").default, (*full, *outs))
    outs = [torch.full_like(w, 7) for w in want]
    getattr(torch.ops.iron, f"{name}_out")(*full, *outs)
    for got, w in zip(outs, want):
        torch.testing.assert_close(got, w, equal_nan=True)


@pytest.mark.parametrize("name", ["softmax", "rmsnorm", "gemm", "silu", "add_rmsnorm", "decode_attention"])
def test_eager_call_and_op_agree_with_torch(name):
    args, kwargs = SAMPLES[name]
    eager = _outputs(getattr(it, name)(*args, **kwargs))
    op = _outputs(getattr(torch.ops.iron, name)(*args, **kwargs))
    for e, o in zip(eager, op):
        assert torch.equal(e, o)
    F = torch.nn.functional
    if name == "softmax":
        want = (torch.softmax(args[0], -1),)
    elif name == "rmsnorm":
        x, w = args
        want = (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w,)
    elif name == "gemm":
        a, b, bias = args
        want = (torch.relu(a @ b.T + bias),)
    elif name == "silu":
        want = (F.silu(args[0]),)
    elif name == "add_rmsnorm":
        x, res, w = args
        h = x + res
        want = (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6) * w, h)
    else:
        q, k, v, lens = args
        n = int(lens[0])
        want = (F.scaled_dot_product_attention(q[:, :, None], k[:, :, :n], v[:, :, :n], enable_gqa=True)[:, :, 0],)
    for e, w in zip(eager, want):
        torch.testing.assert_close(e, w, rtol=1e-5, atol=1e-5)


class Block(torch.nn.Module):
    """Five std ops the way a transformer block calls them, functional and in-place forms mixed."""

    def __init__(self, d: int = 16, hidden: int = 32):
        super().__init__()
        g = torch.Generator().manual_seed(1)
        self.norm = torch.nn.Parameter(torch.rand(d, generator=g) + 0.5, requires_grad=False)
        self.up = torch.nn.Parameter(torch.randn(hidden, d, generator=g) / 4, requires_grad=False)
        self.down = torch.nn.Parameter(torch.randn(d, hidden, generator=g) / 4, requires_grad=False)

    def forward(self, x, residual):
        h, residual = it.add_rmsnorm(x, residual, self.norm)
        u = it.gemm(h, self.up, transpose_b=True)
        u = it.silu(u)
        y = torch.empty_like(h)
        it.gemm(u, self.down, transpose_b=True, out=y)  # the _out form, mutated under functionalisation
        return it.softmax(y * 2.0) + it.add(residual, h)


def test_compiled_model_of_five_std_ops_matches_eager_with_no_graph_break():
    torch._dynamo.reset()
    model = Block()
    x, residual = torch.randn(8, 16), torch.randn(8, 16)
    with torch.no_grad():
        eager = model(x, residual)
        compiled = torch.compile(model, fullgraph=True, backend="aot_eager")(x, residual)
    torch.testing.assert_close(compiled, eager)
    explained = torch._dynamo.explain(model)(x, residual)
    assert explained.graph_break_count == 0 and explained.graph_count == 1


def test_compiled_graph_calls_the_iron_ops():
    torch._dynamo.reset()
    seen = []

    def backend(gm, example_inputs):
        seen.extend(str(n.target) for n in gm.graph.nodes if n.op == "call_function")
        return gm.forward

    x = torch.randn(4, 8)
    torch.compile(lambda t: it.rmsnorm(it.exp(t), torch.ones(8)), fullgraph=True, backend=backend)(x)
    assert "iron.exp.default" in seen and "iron.rmsnorm.default" in seen


def test_inputs_that_want_gradients_are_refused_not_silently_detached():
    x = torch.randn(4, 8, requires_grad=True)
    with pytest.raises(RuntimeError, match="[Aa]utograd"):
        it.softmax(x).sum().backward()
    with torch.no_grad():
        assert it.softmax(x).shape == (4, 8)


def test_a_compiled_call_with_only_some_outputs_given_is_refused():
    x, r, w = torch.randn(4, 8), torch.randn(4, 8), torch.ones(8)
    f = torch.compile(lambda a, b: it.add_rmsnorm(a, b, w, out=torch.empty_like(a)), fullgraph=True,
                      backend="aot_eager")
    with pytest.raises(Exception, match="every output or none"):
        f(x, r)


# ---------------------------------------------------------------- user kernels


@it.kernel_op("iron_tests::scale", grid=lambda x, y, a: (x.numel(),))
@kernel
def scale(x: In[f32], y: Tensor[f32], a: f32):
    i = program_id(0)
    y[i] = a * x[i]


def test_a_user_kernel_becomes_an_op_with_a_schema_from_its_signature():
    schema = str(torch.ops.iron_tests.scale.default._schema)
    assert schema == "iron_tests::scale(Tensor x, Tensor(a!) y, float a) -> ()"
    x, y = torch.arange(6, dtype=torch.float32), torch.zeros(6)
    scale(x, y, 2.0)
    assert torch.equal(y, 2 * x)
    torch.library.opcheck(torch.ops.iron_tests.scale.default, (x, torch.zeros(6), np.float32(3.0).item()))


def test_a_user_kernel_op_compiles_with_no_graph_break():
    torch._dynamo.reset()

    def f(x):
        y = torch.empty_like(x)
        scale(x.exp(), y, 0.5)
        return y + 1

    x = torch.randn(16)
    torch.testing.assert_close(torch.compile(f, fullgraph=True, backend="aot_eager")(x), x.exp() * 0.5 + 1)


def test_kernel_op_refuses_what_cannot_be_an_op():
    @kernel
    def reads_only(x: In[f32], a: f32):
        pass

    with pytest.raises(LaunchError, match="writes none of its tensors"):
        it.kernel_op("iron_tests::reads_only", grid=1)(reads_only)
    with pytest.raises(LaunchError, match="namespace::name"):
        it.kernel_op("scale2", grid=1)(scale.kernel)
    with pytest.raises(LaunchError, match="decorate an @iron.kernel"):
        it.kernel_op("iron_tests::plain", grid=1)(lambda x: x)


def test_a_tensor_without_memory_gets_the_functions_own_error_not_the_plans():
    """A meta tensor has no address for a call plan's signature: the host function runs as written and says
    what is wrong with the argument."""
    from iron.std import softmax

    with pytest.raises(LaunchError):
        softmax.softmax(torch.empty(4, 8, device="meta"))


def test_conv2d_op_takes_groups_and_the_fused_epilogue():
    """The matrix path through the op (f16, two groups of 8 channels, residual and relu fused): opcheck, and the
    values of torch's own grouped convolution in float64."""
    g = torch.Generator().manual_seed(3)
    x = torch.randn(1, 16, 5, 4, generator=g).half()
    w = torch.randn(8, 8, 3, 3, generator=g).half()
    res = torch.randn(1, 8, 5, 4, generator=g).half()
    kwargs = {"padding": [1, 1], "groups": 2, "activation": "relu", "residual": res}
    torch.library.opcheck(torch.ops.iron.conv2d.default, (x, w), kwargs)
    got = torch.ops.iron.conv2d(x, w, **kwargs)
    want = torch.relu(torch.nn.functional.conv2d(x.double(), w.double(), None, 1, 1, 1, 2) + res.double())
    assert (got.double() - want).abs().max().item() <= 2.0 ** -8 * want.abs().max().item()
