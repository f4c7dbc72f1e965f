"""Rotary position embedding (RoPE) on ``x`` of shape (tokens, heads, head_dim), two pair layouts.

Pair ``i`` (``i < head_dim / 2``) of every head of token ``t`` is rotated by the angle
``pos[t] * theta ** (-2 i / head_dim)``::

    out[a] = x[a] cos - x[b] sin        out[b] = x[b] cos + x[a] sin

with ``(a, b) = (i, i + head_dim / 2)`` in the "half" layout (GPT-NeoX, Llama in Hugging Face) and
``(2 i, 2 i + 1)`` in the "interleaved" one (GPT-J, the original paper).  ``rope_cached`` takes the
cos/sin table per token (what inference engines keep: :func:`rope_cache` builds it in float64);
``rope_positions`` computes the angles on the fly.  ``rope(x, positions_or_cache)`` launches either.
"""

from __future__ import annotations

import math
import sys
from typing import Any

from iron import In, LaunchError, T, Tensor, bf16, f16, f32, func, i32, kernel, variants
from iron.lang import cast, cos, exp2, fma, grid_size, local, program_id, sin, static_range, vec

from . import _host
from .gemv import aligned
from ._plans import planned

#: Threads per group.
GROUP = 256
#: Vulkan (lavapipe and most drivers) caps a grid axis at 65535 groups; the kernels loop past it.
MAX_GROUPS = 65535
LAYOUTS = ("half", "interleaved")
#: Heads per work unit (see heads_per_thread).
HEADS_PER_THREAD = 4
#: 2 pi as an f32 and the f32 nearest to the rest: the two-step (Cody-Waite) reduction of the angle.
TWO_PI_HI = 6.2831854820251465
TWO_PI_LO = -1.7484555314695172e-07
INV_TWO_PI = 0.15915494309189535


@func
def _rotate_vector(x, out, xb, half, p0, c, s, width, layout):
    """Rotate the pairs from p0 of the head row at xb, as 16-byte vectors: c and s hold their f32 cos and
    sin (width pairs in "half", width / 2 in "interleaved")."""
    if layout == "half":
        x1 = f32(x.load(xb + p0, width=width))
        x2 = f32(x.load(xb + half + p0, width=width))
        out.store(xb + p0, cast(x1 * c - x2 * s, out.dtype))
        out.store(xb + half + p0, cast(x2 * c + x1 * s, out.dtype))
    else:
        v = f32(x.load(xb + 2 * p0, width=width))
        if width == 4:
            c2 = vec(c[0], c[0], c[1], c[1])
            s2 = vec(s[0], s[0], s[1], s[1])
            swapped = vec(-v[1], v[0], -v[3], v[2])
        else:
            c2 = vec(c[0], c[0], c[1], c[1], c[2], c[2], c[3], c[3])
            s2 = vec(s[0], s[0], s[1], s[1], s[2], s[2], s[3], s[3])
            swapped = vec(-v[1], v[0], -v[3], v[2], -v[5], v[4], -v[7], v[6])
        out.store(xb + 2 * p0, cast(v * c2 + swapped * s2, out.dtype))


@func
def _rotate_pair(x, out, xb, half, p, c, s, layout):
    """Rotate pair p of the head row at xb with scalar loads (rows that 16-byte vectors do not tile)."""
    ia = xb + p
    ib = ia + half
    if layout == "interleaved":
        ia = xb + 2 * p
        ib = ia + 1
    a = f32(x[ia])
    b = f32(x[ib])
    out[ia] = cast(a * c - b * s, out.dtype)
    out[ib] = cast(b * c + a * s, out.dtype)


@kernel(variants(T=[f32, f16, bf16], VEC=[4, 8], LAYOUT=["half", "interleaved"]))
def rope_cached(x: In[T], cos_t: In[f32], sin_t: In[f32], out: Tensor[T], tokens: int, heads: int, d: int,
                hb: int, vectors: bool):
    """out = x with pair i of token t rotated by (cos_t[t, i], sin_t[t, i]).

    x, out: (tokens, heads, d) contiguous, dtype T (f32, f16, bf16); cos_t, sin_t: (tokens, d / 2) f32
    contiguous.  d even, >= 2; tokens * heads * d < 2**31; hb >= 1.  out may be x (every pair is read
    before it is written, by the thread that writes it).  A work unit is P pairs of hb heads of one token
    (P = VEC in "half": VEC elements of each half; P = VEC / 2 in "interleaved": VEC contiguous
    elements): its cos/sin are loaded once, then each head's pairs move as 16-byte vectors with vectors
    (the host's: the half width ("half") or d ("interleaved") a multiple of VEC, x and out on 16 bytes,
    the tables on 4 P), else as scalars, each pair checked against d / 2; threads stride the grid.
    Per element: two f32 products and a sum (an fma where the target contracts), one rounding to T.
    Non-finite: IEEE f32 arithmetic; a NaN or Inf in x[a] or x[b] (or in the table) makes both outputs
    of the pair NaN or Inf (Inf * 0 is NaN); no other pair is touched by it.
    """
    half = d // 2
    P = VEC
    if LAYOUT == "interleaved":
        P = VEC // 2
    chunks = (half + P - 1) // P
    blocks = (heads + hb - 1) // hb
    total = tokens * blocks * chunks
    i = program_id(0)
    while i < total:
        p0 = (i % chunks) * P
        rest = i // chunks
        token = rest // blocks
        h0 = (rest % blocks) * hb
        h1 = min(heads, h0 + hb)
        cb = token * half + p0
        if vectors:
            c = cos_t.load(cb, width=P)
            s = sin_t.load(cb, width=P)
            for h in range(h0, h1, unroll=4):
                _rotate_vector(x, out, (token * heads + h) * d, half, p0, c, s, VEC, LAYOUT)
        else:
            for j in range(P):
                if p0 + j < half:
                    c1 = cos_t[cb + j]
                    s1 = sin_t[cb + j]
                    for h in range(h0, h1):
                        _rotate_pair(x, out, (token * heads + h) * d, half, p0 + j, c1, s1, LAYOUT)
        i += grid_size(0)


@func
def _angle_sincos(position, p, d, log2_theta):
    """cos and sin of position * theta ** (-2 p / d) in f32, the angle first reduced to [-pi, pi]."""
    angle = position * exp2(-((f32(2 * p) / f32(d)) * log2_theta))
    k = round(angle * INV_TWO_PI)
    r = fma(-k, TWO_PI_HI, angle)
    r = fma(-k, TWO_PI_LO, r)
    return cos(r), sin(r)


@kernel(variants(T=[f32, f16, bf16], VEC=[4, 8], LAYOUT=["half", "interleaved"]))
def rope_positions(x: In[T], pos: In[i32], out: Tensor[T], tokens: int, heads: int, d: int, hb: int,
                   vectors: bool, log2_theta: f32):
    """out = x with pair i of token t rotated by the angle pos[t] * theta ** (-2 i / d), computed here.

    x, out: (tokens, heads, d) contiguous, dtype T; pos: (tokens,) i32 with |pos| < 2**24; log2_theta =
    log2(theta) rounded once to f32 (the host computes it in float64).  d even, >= 2; hb >= 1; out may
    be x.  Work units, vectors, tails and the rotation as in rope_cached; the unit's P cos/sin pairs
    are computed once for its hb heads, in f32: e = (2 i / d) * log2_theta, inv = exp2(-e), angle =
    pos * inv, reduced by r = angle - k 2pi (k = round(angle / 2pi), 2pi as two f32 parts, two fmas),
    then cos(r), sin(r).  The angle is off by up to |angle| 2**-24 (5 + 2.1 e) (its rounding, exp2's,
    e's): ~5e-4 rad at pos 8191, an error a float64 table (rope_cached) does not have.
    Non-finite: as rope_cached.
    """
    half = d // 2
    P = VEC
    if LAYOUT == "interleaved":
        P = VEC // 2
    chunks = (half + P - 1) // P
    blocks = (heads + hb - 1) // hb
    total = tokens * blocks * chunks
    i = program_id(0)
    while i < total:
        p0 = (i % chunks) * P
        rest = i // chunks
        token = rest // blocks
        h0 = (rest % blocks) * hb
        h1 = min(heads, h0 + hb)
        position = f32(pos[token])
        cr = local(f32, P)
        sr = local(f32, P)
        for j in static_range(P):
            cj, sj = _angle_sincos(position, p0 + j, d, log2_theta)
            cr[j] = cj
            sr[j] = sj
        if vectors:
            if P == 2:
                c = vec(cr[0], cr[1])
                s = vec(sr[0], sr[1])
            elif P == 4:
                c = vec(cr[0], cr[1], cr[2], cr[3])
                s = vec(sr[0], sr[1], sr[2], sr[3])
            else:
                c = vec(cr[0], cr[1], cr[2], cr[3], cr[4], cr[5], cr[6], cr[7])
                s = vec(sr[0], sr[1], sr[2], sr[3], sr[4], sr[5], sr[6], sr[7])
            for h in range(h0, h1, unroll=4):
                _rotate_vector(x, out, (token * heads + h) * d, half, p0, c, s, VEC, LAYOUT)
        else:
            for j in static_range(P):
                if p0 + j < half:
                    for h in range(h0, h1):
                        _rotate_pair(x, out, (token * heads + h) * d, half, p0 + j, cr[j], sr[j], LAYOUT)
        i += grid_size(0)


def rope_cache(positions: Any, head_dim: int, theta: float = 10000.0) -> tuple[Any, Any]:
    """The (tokens, head_dim / 2) f32 cos and sin tables of ``positions``, computed in float64.

    numpy positions give numpy tables; torch positions give tables on the same device.
    """
    if head_dim < 2 or head_dim % 2:
        raise LaunchError(f"rope_cache: head_dim must be even and >= 2, got {head_dim}")
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(positions, torch.Tensor):
        freq = theta ** (-torch.arange(0, head_dim, 2, dtype=torch.float64, device=positions.device) / head_dim)
        angle = positions.to(torch.float64)[:, None] * freq[None, :]
        return torch.cos(angle).to(torch.float32), torch.sin(angle).to(torch.float32)
    import numpy as np

    freq = float(theta) ** (-np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    angle = np.asarray(positions, dtype=np.float64)[:, None] * freq[None, :]
    return np.cos(angle).astype(np.float32), np.sin(angle).astype(np.float32)


def heads_per_thread(heads: int) -> int:
    """Heads one work unit rotates: its cos/sin (loaded or computed) serve them all, and the unrolled
    head loop keeps several 16-byte loads in flight per thread."""
    return max(1, min(heads, HEADS_PER_THREAD))


def launch_grid(tokens: int, heads: int, pairs_per_unit: int, half: int, hb: int) -> int:
    """Threads for a rope launch: one per work unit, capped at MAX_GROUPS groups (threads then stride)."""
    units = tokens * _host.ceil_div(heads, hb) * _host.ceil_div(half, pairs_per_unit)
    return max(1, min(units, MAX_GROUPS * GROUP))


@planned
def rope(x: Any, positions_or_cache: Any, layout: str = "half", out: Any = None, theta: float = 10000.0,
         backend: str | None = None) -> Any:
    """Rotate ``x`` (tokens, heads, head_dim) by positions (an i32 array, angles computed in the kernel)
    or by a ``(cos, sin)`` table pair ((tokens, head_dim / 2) f32, :func:`rope_cache`); returns ``out``.

    ``layout``: "half" (pairs i, i + d/2) or "interleaved" (pairs 2i, 2i+1).  ``out`` may be ``x``.
    """
    if layout not in LAYOUTS:
        raise LaunchError(f"rope: layout must be one of {LAYOUTS}, got {layout!r}")
    dt = _host.check_float(x, "rope: x")
    shape = _host.shape_of(x)
    if len(shape) != 3:
        raise LaunchError(f"rope: x must be (tokens, heads, head_dim), got shape {shape}")
    tokens, heads, d = shape
    if d < 2 or d % 2:
        raise LaunchError(f"rope: head_dim must be even and >= 2, got {d}")
    if tokens * heads * d >= 1 << 31:
        raise LaunchError(f"rope: x has {tokens * heads * d} elements; the kernels index with i32 (< 2**31)")
    tables = (dict(zip(("cos", "sin"), positions_or_cache)) if isinstance(positions_or_cache, (tuple, list))
              else {"positions": positions_or_cache})
    out = _host.output("rope", out, x, shape, dt, {"x": x, **tables}, in_place=("x",))
    if tokens * heads == 0:
        return out
    half = d // 2
    vw = _host.vector_width(dt)
    per = vw if layout == "half" else vw // 2
    hb = heads_per_thread(heads)
    grid = (launch_grid(tokens, heads, per, half, hb),)
    tiles = (half if layout == "half" else d) % vw == 0
    if isinstance(positions_or_cache, (tuple, list)):
        if len(positions_or_cache) != 2:
            raise LaunchError("rope: give the table as a (cos, sin) pair")
        cos_t, sin_t = positions_or_cache
        for name, table in (("cos", cos_t), ("sin", sin_t)):
            if _host.dtype_of(table, f"rope: {name}") != f32:
                raise LaunchError(f"rope: the {name} table must be f32, got {_host.dtype_of(table).name}")
            _host.check_shape(table, (tokens, half), f"rope: {name}")
        # a unit's cos/sin vector is P f32: 32 bytes for f16/bf16 "half"
        vectors = tiles and aligned(x, out) and aligned(cos_t, sin_t, boundary=4 * per)
        rope_cached.variant(T=dt, VEC=vw, LAYOUT=layout).launch(x, cos_t, sin_t, out, tokens, heads, d, hb, vectors,
                                                                 grid=grid, group=(GROUP,), backend=backend)
        return out
    if _host.dtype_of(positions_or_cache, "rope: positions") != i32:
        raise LaunchError(f"rope: positions must be i32, got {_host.dtype_of(positions_or_cache).name}")
    _host.check_shape(positions_or_cache, (tokens,), "rope: positions")
    if not theta > 0 or not math.isfinite(theta):
        raise LaunchError(f"rope: theta must be positive and finite, got {theta}")
    import numpy as np

    vectors = tiles and aligned(x, out)
    rope_positions.variant(T=dt, VEC=vw, LAYOUT=layout).launch(
        x, positions_or_cache, out, tokens, heads, d, hb, vectors, np.float32(math.log2(theta)), grid=grid,
        group=(GROUP,), backend=backend)
    return out


__all__ = ["LAYOUTS", "heads_per_thread", "launch_grid", "rope", "rope_cache", "rope_cached", "rope_positions"]
