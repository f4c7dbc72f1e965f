"""iron.torch on CUDA tensors: torch's op checker on every op, ``torch.compile(fullgraph=True)`` with inductor
(Triton beside Iron's kernels) matching eager, a user kernel op compiled the same way, and std launches
captured in ``torch.cuda.graph`` replaying to the eager results on new inputs."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("torch sees no CUDA device", allow_module_level=True)

sys.path.insert(0, str(Path(__file__).parents[1] / "pytorch"))  # the shared sample arguments

import iron.torch as it  # noqa: E402
from iron import In, Tensor, f32, kernel  # noqa: E402
from iron.lang import program_id  # noqa: E402
from torch_samples import samples  # noqa: E402

SAMPLES = samples("cuda")


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_functional_op_passes_torch_opcheck_on_cuda(name, cuda):
    args, kwargs = SAMPLES[name]
    torch.library.opcheck(getattr(torch.ops.iron, name).default, args, kwargs)


def _block_params(d: int, hidden: int, dtype: torch.dtype):
    g = torch.Generator(device="cuda").manual_seed(3)
    norm = torch.rand(d, generator=g, device="cuda").to(dtype) + 0.5
    up = (torch.randn(hidden, d, generator=g, device="cuda") / d ** 0.5).to(dtype)
    down = (torch.randn(d, hidden, generator=g, device="cuda") / hidden ** 0.5).to(dtype)
    return norm, up, down


def block(x, residual, norm, up, down):
    """Five std ops the way a transformer block calls them (an _out form among them)."""
    h, residual = it.add_rmsnorm(x, residual, norm)
    u = it.silu(it.gemm(h, up, transpose_b=True))
    y = torch.empty_like(h)
    it.gemm(u, down, transpose_b=True, out=y)
    return it.softmax(y) + it.add(residual, h)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_inductor_compiled_block_matches_eager_with_no_graph_break(dtype, cuda):
    torch._dynamo.reset()
    params = _block_params(256, 512, dtype)
    x = torch.randn(64, 256, device="cuda", dtype=dtype)
    r = torch.randn(64, 256, device="cuda", dtype=dtype)
    eager = block(x, r, *params)
    compiled = torch.compile(block, fullgraph=True)(x, r, *params)
    torch.testing.assert_close(compiled, eager)
    assert torch._dynamo.explain(block)(x, r, *params).graph_break_count == 0


@it.kernel_op("iron_gpu_tests::axpy", grid=lambda x, y, a: (x.numel(),), group=256)
@kernel
def axpy(x: In[f32], y: Tensor[f32], a: f32):
    i = program_id(0)
    y[i] = a * x[i] + y[i]


def test_user_kernel_op_compiles_with_inductor(cuda):
    torch._dynamo.reset()

    def f(x, y):
        y = y.clone()
        axpy(x.sin(), y, 2.0)
        return y * 3

    x, y = torch.randn(1024, device="cuda"), torch.randn(1024, device="cuda")
    want = (2.0 * x.sin() + y) * 3
    torch.testing.assert_close(f(x, y), want)
    torch.testing.assert_close(torch.compile(f, fullgraph=True)(x, y), want)


def test_std_launches_captured_in_a_torch_cuda_graph_replay_on_new_inputs(cuda):
    from iron.std import attention, elementwise, norms, softmax

    dtype = torch.bfloat16
    norm, up, down = _block_params(256, 512, dtype)
    x = torch.randn(32, 256, device="cuda", dtype=dtype)
    r = torch.randn(32, 256, device="cuda", dtype=dtype)
    q = torch.randn(2, 8, 128, device="cuda", dtype=dtype)
    kc = torch.randn(2, 2, 512, 128, device="cuda", dtype=dtype)
    vc = torch.randn(2, 2, 512, 128, device="cuda", dtype=dtype)
    lens = torch.tensor([300, 512], dtype=torch.int32, device="cuda")

    def step():
        h, res = norms.add_rmsnorm(x, r, norm)
        y = elementwise.silu(it.gemm(h, up, transpose_b=True))
        o = attention.decode_attention(q, kc, vc, lens)
        return softmax.softmax(y), res, o

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up (compile, load, plan) off the capture, as torch's docs ask
        for _ in range(2):
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static = step()
    for trial in range(3):
        for t in (x, r, q, kc, vc):
            t.copy_(torch.randn_like(t))
        graph.replay()
        torch.cuda.synchronize()
        eager = step()
        for got, want in zip(static, eager):
            assert torch.equal(got, want), trial


def test_the_example_of_docs_torch_md_runs(cuda, tmp_path):
    """docs/torch.md's complete example, as written (its own assert_close compares compiled with eager); run
    from a file, as a user would, since a kernel's source is read from its file."""
    import runpy

    torch._dynamo.reset()
    text = (Path(__file__).parents[2] / "docs" / "torch.md").read_text()
    example = tmp_path / "torch_example.py"
    example.write_text(text.split("```python\n", 1)[1].split("```", 1)[0])
    scope = runpy.run_path(str(example))
    torch.cuda.synchronize()
    x, r, model = scope["x"], scope["r"], scope["model"]
    torch.testing.assert_close(scope["out"], model(x, r))  # the replayed graph, on the new x
