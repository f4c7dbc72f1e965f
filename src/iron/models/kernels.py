"""The kernels a Llama decoder needs that iron.std has not, written in Iron like a user's kernels (any target): the
embedding's row gather, SwiGLU over the gate and up projections (one merged product or two), and RoPE of the
merged Q/K/V projection fused with the paged cache's append."""

from __future__ import annotations

from iron import In, T, Tensor, bf16, f16, f32, i32, kernel, variants
from iron.lang import exp, program_id
from iron.std.rope import _angle_sincos

#: Threads of one group of every kernel here.
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
def swiglu(gate: In[T], up: In[T], out: Tensor[T], n: int, ffn: int, ld: int, up_at: int):
    """out (n / ffn, ffn) = silu(gate) * up, in f32 with one rounding to T: silu(g) = g / (1 + e^-g).  Row r's
    gate is gate[r ld ..+ ffn], its up is up[r ld + up_at ..+ ffn]: one merged (rows, 2 ffn) product (both
    arguments the same array, ld = 2 ffn, up_at = ffn) or two (rows, ffn) ones (ld = ffn, up_at = 0).  Grid (n,)."""
    i = program_id(0)
    if i < n:
        at = (i // ffn) * ld + i % ffn
        g = f32(gate[at])
        out[i] = T(g / (1.0 + exp(-g)) * f32(up[at + up_at]))


@kernel(variants(T=[f32, f16, bf16]))
def rope_qkv_append(qkv: In[T], pos: In[i32], table: In[i32], q: Tensor[T], k_pages: Tensor[T],
                    v_pages: Tensor[T], heads: int, kv_heads: int, d: int, page: int, width: int, pages: int,
                    n: int, log2_theta: f32):
    """One token's merged projection qkv (tokens, (heads + 2 kv_heads) d) (its query heads, then key heads, then
    value heads) split three ways: the queries rotated into q (tokens, heads, d); the keys rotated and the values
    as they are written into the paged cache, k_pages / v_pages (pages, page, kv_heads, d), at row pos % page of
    page table[t, pos // page] for the token's position pos (``table`` (tokens, width): each token's sequence's
    row).  A position outside [0, width page) or a page outside [0, pages) writes no key or value.  RoPE on
    adjacent pairs (2 i, 2 i + 1) by the angle pos theta^(-2 i / d), as iron.std.rope's "interleaved" layout
    computes it (log2_theta = log2(theta) as f32).  Grid (n,) for n = tokens (heads + 2 kv_heads) d / 2: one
    pair a thread."""
    i = program_id(0)
    if i < n:
        half = d // 2
        p = i % half
        rest = i // half
        all_heads = heads + 2 * kv_heads
        h = rest % all_heads
        t = rest // all_heads
        src = (t * all_heads + h) * d + 2 * p
        a = f32(qkv[src])
        b = f32(qkv[src + 1])
        position = pos[t]
        if h < heads + kv_heads:
            c, s = _angle_sincos(f32(position), p, d, log2_theta)
            a, b = a * c - b * s, b * c + a * s
        if h < heads:
            at = (t * heads + h) * d + 2 * p
            q[at] = T(a)
            q[at + 1] = T(b)
        elif position >= 0 and position < width * page:
            slot = table[t * width + position // page]
            if slot >= 0 and slot < pages:
                hk = (h - heads) % kv_heads
                at = ((slot * page + position % page) * kv_heads + hk) * d + 2 * p
                if h < heads + kv_heads:
                    k_pages[at] = T(a)
                    k_pages[at + 1] = T(b)
                else:
                    v_pages[at] = T(a)
                    v_pages[at + 1] = T(b)


__all__ = ["GROUP", "embedding_rows", "rope_qkv_append", "swiglu"]
