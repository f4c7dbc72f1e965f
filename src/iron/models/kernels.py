"""The two kernels a Llama decoder needs that iron.std has not: the embedding's row gather and SwiGLU, written in
Iron like a user's kernels (any target)."""

from __future__ import annotations

from iron import In, T, Tensor, bf16, f16, f32, i32, kernel, variants
from iron.lang import exp, program_id

#: Threads of one group of either kernel.
GROUP = 256


@kernel(variants(T=[f32, f16, bf16]))
def embedding_rows(table: In[T], tokens: In[i32], out: Tensor[T], rows: int, width: int, n: int):
    """out[i, :] = table[tokens[i], :] for the n = len(tokens) * width elements of out; a token outside
    [0, rows) gives a row of zeros.  table (rows, width), out (len(tokens), width), row-major.  Grid (n,)."""
    i = program_id(0)
    if i < n:
        token = tokens[i // width]
        x = T(0.0)
        if token >= 0 and token < rows:
            x = table[token * width + i % width]
        out[i] = x


@kernel(variants(T=[f32, f16, bf16]))
def swiglu(gate: In[T], up: In[T], out: Tensor[T], n: int):
    """out = silu(gate) * up elementwise (n elements), in f32 with one rounding to T: silu(g) = g / (1 + e^-g).
    Grid (n,)."""
    i = program_id(0)
    if i < n:
        g = f32(gate[i])
        out[i] = T(g / (1.0 + exp(-g)) * f32(up[i]))


__all__ = ["GROUP", "embedding_rows", "swiglu"]
