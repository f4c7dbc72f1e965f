"""torch tensors in host memory run on the interpreter, read and written in place (bf16 included), like
numpy arrays: a PyTorch program on a machine with no GPU gets the same results with no conversion."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from iron import In, LaunchError, Tensor, bf16, f32, kernel  # noqa: E402
from iron.lang import program_id  # noqa: E402
from iron.std import elementwise, softmax  # noqa: E402


@kernel
def twice(x: In[bf16], y: Tensor[bf16]):
    i = program_id(0)
    y[i] = x[i] + x[i]


@kernel
def bump(y: Tensor[f32]):
    i = program_id(0)
    y[i] = y[i] + 1.0


def test_a_kernel_writes_a_cpu_tensor_in_place_bf16_included():
    x = torch.tensor([1.5, -2.0, 3.25], dtype=torch.bfloat16)
    y = torch.zeros(3, dtype=torch.bfloat16)
    twice[3](x, y)
    assert torch.equal(y, x * 2)
    z = torch.arange(4, dtype=torch.float32)
    view = z[1:]  # a contiguous view: the kernel writes the tensor it shares memory with
    bump[3](view)
    assert z.tolist() == [0.0, 2.0, 3.0, 4.0]


def test_std_returns_cpu_tensors_for_cpu_tensors():
    x = torch.randn(3, 16)
    y = softmax.softmax(x)
    assert isinstance(y, torch.Tensor) and y.dtype == torch.float32
    torch.testing.assert_close(y, torch.softmax(x, -1))
    e = elementwise.exp(x.to(torch.bfloat16))
    assert e.dtype == torch.bfloat16
    torch.testing.assert_close(e.float(), x.to(torch.bfloat16).float().exp(), rtol=1e-2, atol=1e-2)


def test_what_the_interpreter_cannot_view_is_a_clear_error():
    with pytest.raises(LaunchError, match="C-contiguous"):
        bump[2](torch.zeros(2, 2).t()[0])
    with pytest.raises(LaunchError, match="resolve_neg"):
        bump[2](torch.zeros(2)._neg_view())
    with pytest.raises(LaunchError, match=r"expects f32 elements, got f64; convert with \.to\(torch\.float32\)"):
        bump[2](torch.zeros(2, dtype=torch.float64))
