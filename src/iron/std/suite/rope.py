"""Tests and benches of iron.std.rope against a float64 numpy rotation.

``std/rope/cached``: the oracle rotates by the f32 tables the kernel reads (its contract), so the only
error is the f32 arithmetic: two products and a sum, relative to their |terms|.
``std/rope/positions``: the oracle's angle is ``pos * theta ** (-2 i / d)`` in float64; the kernel's f32
angle is off by up to ``|angle| * 2**-24 * (5 + 2.1 e)`` (e = (2 i / d) log2 theta; derivation in
:func:`angle_error`), a rotation error of ``(|a| + |b|)`` times that (the derivative of
``a cos - b sin`` in the angle is at most ``|a| + |b|``).  The scale carries that absolute allowance.
"""

from __future__ import annotations

import math

import numpy as np

from iron import Depth, Expect, Setup, bench, bf16, f16, f32, i32, test_kernel
from iron.harness.tolerance import derive_tolerance

from ..rope import GROUP, heads_per_thread, launch_grid, rope_cache, rope_cached, rope_positions

THETA = 10000.0
#: Positions drawn in [0, MAX_POS]: Llama-2's 4096 context twice over, angles up to 8191 rad.
MAX_POS = 8191
VECTORS = [{"T": f32, "VEC": 4}, {"T": f16, "VEC": 8}, {"T": bf16, "VEC": 8}]
BINDINGS = [{**v, "LAYOUT": lay} for lay in ("half", "interleaved") for v in VECTORS]


# (tokens S, heads H, head_dim D): D = 2 (one pair); half width 3 (scalar path everywhere); D = 24, 40
# (half width a multiple of 4, not of 8: f32 vectors, f16/bf16 scalars in "half"; vectors in
# "interleaved"); D = 64, 128 (vectors); HB: heads per work unit (5 heads in units of 2: a partial
# last unit); V = 0: scalars where vectors would tile (an unaligned array); G = 1: one group, threads
# stride over the work.
SHAPES = [{"S": 1, "H": 1, "D": 2}, {"S": 3, "H": 2, "D": 6}, {"S": 2, "H": 3, "D": 24}, {"S": 4, "H": 2, "D": 40},
          {"S": 5, "H": 3, "D": 64}, {"S": 7, "H": 4, "D": 128}, {"S": 3, "H": 5, "D": 24, "HB": 2},
          {"S": 3, "H": 5, "D": 64, "HB": 2}, {"S": 2, "H": 3, "D": 32, "V": 0}, {"S": 9, "H": 6, "D": 64, "G": 1}]
BENCH = {"interp": [{"S": 64, "H": 4, "D": 64}], "vulkan": [{"S": 512, "H": 8, "D": 128}],
         "*": [{"S": 4096, "H": 32, "D": 128}]}
#: The rotation in f32: two products and a sum (or an fma and a product), then one rounding to T.
DEPTH = Depth(steps=1, f32_steps=3)


def _pairs(x: np.ndarray, layout: str) -> tuple[np.ndarray, np.ndarray]:
    h = x.shape[-1] // 2
    return (x[..., :h], x[..., h:]) if layout == "half" else (x[..., 0::2], x[..., 1::2])


def _join(first: np.ndarray, second: np.ndarray, layout: str) -> np.ndarray:
    if layout == "half":
        return np.concatenate([first, second], axis=-1)
    out = np.empty(first.shape[:-1] + (2 * first.shape[-1],))
    out[..., 0::2], out[..., 1::2] = first, second
    return out


def rotate64(x: np.ndarray, cos: np.ndarray, sin: np.ndarray, layout: str) -> tuple[np.ndarray, np.ndarray]:
    """The rotation in float64 and the sum of |terms| of each output: (value, scale), shaped like x."""
    a, b = _pairs(np.asarray(x, np.float64), layout)
    c, s = np.asarray(cos, np.float64)[:, None, :], np.asarray(sin, np.float64)[:, None, :]
    value = _join(a * c - b * s, b * c + a * s, layout)
    terms = np.abs(a * c) + np.abs(b * s)
    return value, _join(terms, np.abs(b * c) + np.abs(a * s), layout)


def angle_error(pos: np.ndarray, d: int, theta: float = THETA) -> np.ndarray:
    """Bound on |f32 angle - exact angle| plus the reduction's and cos/sin's errors, (tokens, d/2).

    With u = 2**-24 and e = (2 i / d) log2 theta: log2 theta, 2 i / d and their product round once
    each, so the f32 e is off by 3 u e and exp2(-e) by ln2 * 3 u e = 2.1 u e relative; exp2 itself
    adds 2 ulp (4 u, CUDA's documented bound), pos * inv one rounding (u): the angle is off by
    |angle| u (5 + 2.1 e).  The two fma steps of the 2 pi reduction add 2 u each (|r| < 4), cos/sin
    2 ulp of 1 (4 u): 8 u absolute.
    """
    u = 2.0 ** -24
    i = np.arange(d // 2, dtype=np.float64)
    e = (2 * i / d) * math.log2(theta)
    angle = np.abs(np.asarray(pos, np.float64))[:, None] * theta ** (-2 * i / d)[None, :]
    return angle * u * (5 + 2.1 * e[None, :]) + 8 * u


# ---------------------------------------------------------------- the cos/sin table form

def _cached_oracle(layout: str):
    def oracle(x, cos_t, sin_t, out, tokens, heads, d, hb, vectors):
        value, scale = rotate64(x, cos_t, sin_t, layout)
        return Expect(value, scale=scale)
    return oracle


def _torch_rope(layout: str):
    def reference(x, cos_t, sin_t, out, tokens, heads, d, hb, vectors):
        import torch

        c, s = cos_t[:, None, :], sin_t[:, None, :]
        if layout == "half":  # the Hugging Face composition: x * cos + rotate_half(x) * sin
            a, b = x[..., : d // 2], x[..., d // 2:]
            rotated = torch.cat([-b, a], dim=-1)
            return (x * torch.cat([c, c], dim=-1) + rotated * torch.cat([s, s], dim=-1)).to(x.dtype)
        a, b = x[..., 0::2], x[..., 1::2]
        return torch.stack([a * c - b * s, b * c + a * s], dim=-1).flatten(-2).to(x.dtype)
    reference.__name__ = f"rope_{layout}"
    return reference


def _numpy_rope(layout: str):
    def reference(x, cos_t, sin_t, out, tokens, heads, d, hb, vectors):
        a, b = _pairs(x.astype(np.float32), layout)
        c, s = cos_t[:, None, :], sin_t[:, None, :]
        return _join(a * c - b * s, b * c + a * s, layout).astype(out.dtype)
    reference.__name__ = f"rope_{layout}"
    return reference


def _positions(case, tokens: int) -> np.ndarray:
    pos = case.randint(tokens, low=0, high=MAX_POS, dtype=i32)
    pos[-1] = MAX_POS  # the largest angle always appears
    return pos


def _launch(case) -> tuple[int, bool, int]:
    """(heads per unit, vectors, grid in threads): the host's choices unless the shape names HB, V or G."""
    s, h, d, vec, layout = case["S"], case["H"], case["D"], case["VEC"], case["LAYOUT"]
    hb = int(case.shape["HB"]) if "HB" in case.shape else heads_per_thread(h)
    vectors = (d // 2 if layout == "half" else d) % vec == 0 and case.shape.get("V", 1) != 0
    if "G" in case.shape:
        return hb, vectors, int(case.shape["G"]) * GROUP
    return hb, vectors, launch_grid(s, h, vec if layout == "half" else vec // 2, d // 2, hb)


@test_kernel(rope_cached, shapes=SHAPES, bindings=BINDINGS, name="std/rope/cached")
@bench(rope_cached, shapes=BENCH, bindings=BINDINGS, name="std/rope/cached")
def cached_setup(case):
    s, h, d, layout = case["S"], case["H"], case["D"], case["LAYOUT"]
    cos_t, sin_t = rope_cache(_positions(case, s), d, THETA)
    hb, vectors, grid = _launch(case)
    return Setup(args=[case.randn(s, h, d), cos_t, sin_t, case.empty(s, h, d), s, h, d, hb, vectors], grid=grid,
                 group=GROUP, oracle=_cached_oracle(layout), depth=DEPTH, flops=3 * s * h * d,
                 reference={"cuda": _torch_rope(layout), "*": _numpy_rope(layout)})


# ---------------------------------------------------------------- angles computed in the kernel

def _positions_oracle(case):
    def oracle(x, pos, out, tokens, heads, d, hb, vectors, log2_theta):
        angle = np.asarray(pos, np.float64)[:, None] * THETA ** (-np.arange(0, d, 2) / d)[None, :]
        value, terms = rotate64(x, np.cos(angle), np.sin(angle), case["LAYOUT"])
        a, b = _pairs(np.abs(x), case["LAYOUT"])
        err = angle_error(pos, d)[:, None, :] * (a + b)  # the absolute allowance of the angle
        rtol = derive_tolerance(case.T, DEPTH).rtol
        return Expect(value, scale=terms + _join(err, err, case["LAYOUT"]) / rtol)
    return oracle


def _positions_reference(layout: str, rotate):
    """The table per call (float64, rounded to f32: torch on the GPU, numpy on the host), then the
    composition.  (An f32 table, as Hugging Face builds it, is not always inside the kernel's angle
    allowance: torch's powf may be off by more than the kernel's exp2 is.)"""
    def reference(x, pos, out, tokens, heads, d, hb, vectors, log2_theta):
        cos_t, sin_t = rope_cache(pos, d, THETA)
        return rotate(layout)(x, cos_t, sin_t, out, tokens, heads, d, hb, vectors)
    reference.__name__ = f"rope_table_{layout}"
    return reference


@test_kernel(rope_positions, shapes=SHAPES, bindings=BINDINGS, name="std/rope/positions")
@bench(rope_positions, shapes=BENCH, bindings=BINDINGS, name="std/rope/positions")
def positions_setup(case):
    s, h, d, layout = case["S"], case["H"], case["D"], case["LAYOUT"]
    hb, vectors, grid = _launch(case)
    return Setup(args=[case.randn(s, h, d), _positions(case, s), case.empty(s, h, d), s, h, d, hb, vectors,
                       np.float32(math.log2(THETA))],
                 grid=grid, group=GROUP, oracle=_positions_oracle(case), depth=DEPTH,
                 flops=3 * s * h * d, reference={"cuda": _positions_reference(layout, _torch_rope),
                                                         "*": _positions_reference(layout, _numpy_rope)})
