"""Two memory-bound kernels registered as tests and benches: what `iron test` and `iron bench` run here.

The repository's iron.toml lists this module beside the kernel corpus.  On CUDA the references are
PyTorch on the same GPU; elsewhere numpy.  N = 16M elements is the seed's headline shape.
"""

import numpy as np

from iron import Depth, Expect, In, Setup, T, Tensor, bench, bf16, f16, f32, kernel, test_kernel, variants
from iron.lang import exp, program_id

SHAPES = {"interp": [1 << 16], "vulkan": [1 << 22], "*": [1 << 24]}


#: 16 bytes per thread: one 128-bit load and store (4 f32, 8 f16/bf16), the width GPUs move best.
VECTORS = [{"T": f32, "VEC": 4}, {"T": f16, "VEC": 8}, {"T": bf16, "VEC": 8}]


@kernel(variants(T=[f32, f16, bf16], VEC=[4, 8]))
def exp_kernel(a: In[T], out: Tensor[T], n: int):
    """out = exp(a), in f32 for f16/bf16, rounded once to T; VEC elements per thread, a scalar tail."""
    i = program_id(0) * VEC
    if i + VEC <= n:
        out.store(i, T(exp(f32(a.load(i, width=VEC)))))
    elif i < n:
        for k in range(VEC):
            if i + k < n:
                out[i + k] = T(exp(f32(a[i + k])))


def _exp_torch(a, out, n):
    import torch

    return torch.exp(a)


def _exp_numpy(a, out, n):
    return np.exp(a.astype(np.float32)).astype(out.dtype)


@test_kernel(exp_kernel, shapes=[1, 7, 255, 4099], bindings=VECTORS)
@bench(exp_kernel, shapes=SHAPES, bindings=VECTORS, reference={"cuda": _exp_torch, "*": _exp_numpy})
def exp_setup(case):
    n, vec = case.n, case["VEC"]
    return Setup(args=[case.randn(n), case.empty(n), n], grid=-(-n // vec), group=256,
                 oracle=lambda a, out, n: np.exp(a), depth=Depth(steps=1, f32_steps=1), flops=n)


@kernel(variants(T=[f32, f16, bf16], VEC=[4, 8]))
def axpy(x: In[T], y: In[T], out: Tensor[T], alpha: f32, n: int):
    """out = alpha * x + y, in f32, rounded once to T; VEC elements per thread, a scalar tail."""
    i = program_id(0) * VEC
    if i + VEC <= n:
        out.store(i, T(alpha * f32(x.load(i, width=VEC)) + f32(y.load(i, width=VEC))))
    elif i < n:
        for k in range(VEC):
            if i + k < n:
                out[i + k] = T(alpha * f32(x[i + k]) + f32(y[i + k]))


def _axpy_torch(x, y, out, alpha, n):
    import torch

    return torch.add(y, x, alpha=float(alpha))


def _axpy_numpy(x, y, out, alpha, n):
    return (np.float32(alpha) * x.astype(np.float32) + y.astype(np.float32)).astype(out.dtype)


@test_kernel(axpy, shapes=[1, 7, 255, 4099], bindings=VECTORS)
@bench(axpy, shapes=SHAPES, bindings=VECTORS, reference={"cuda": _axpy_torch, "*": _axpy_numpy})
def axpy_setup(case):
    n, vec = case.n, case["VEC"]
    return Setup(args=[case.randn(n), case.randn(n), case.empty(n), np.float32(1.5), n], grid=-(-n // vec),
                 group=256,
                 oracle=lambda x, y, out, alpha, n: Expect(alpha * x + y, scale=np.abs(alpha * x) + np.abs(y)),
                 depth=Depth(steps=1, f32_steps=2), flops=2 * n)
