"""Row normalisations of a (rows, n) tensor: layernorm, rmsnorm and fused residual-add + rmsnorm.

Each has a register kernel (the row held in a group's registers, ``VEC * ITEMS`` f32 values per
thread: HBM read once, written once) and a long-row kernel for rows a group cannot hold (a statistics
pass, then a pass that re-reads the row and writes).  The host functions pick by row length, like
:mod:`iron.std.softmax`, whose group reduction (subgroup first, then shared memory) they share.

layernorm's variance is two-pass over the registers (the mean, then the sum of squared deviations),
never E[x^2] - E[x]^2, which cancels catastrophically when |mean| >> std; the long-row kernel keeps
per-thread Welford statistics and merges them with Chan's formula.  See docs/std/norms.md.
"""

from __future__ import annotations

import math
from typing import Any

from iron import In, T, Tensor, bf16, f16, f32, func, kernel, variants
from iron.core.errors import LaunchError
from iron.lang import (barrier, group_id, lane_id, local, num_groups, num_simd_groups, rsqrt, shared,
                       simd_group_id, simd_shuffle_xor, simd_size, static_range, thread_id, vec)

from . import _host
from .softmax import (GROUP, ITEMS_CHOICES, MAX_GROUPS, checked_out, group_sum, register_items, rows_of,
                      vector_ok)
from ._plans import planned


@func
def live_registers(n: int, t: int, aligned: bool, vec_: int, group: int) -> int:
    """How many of thread t's registers hold columns of an n-wide row: always a prefix (registers
    j * vec + k), in the vector layout (column (j * group + t) * vec + k) and the scalar one
    (column (j * vec + k) * group + t) alike."""
    return ((n // vec_ - t + group - 1) // group) * vec_ if aligned else (n - t + group - 1) // group


@func
def chan(na: f32, ma: f32, qa: f32, nb: f32, mb: f32, qb: f32):
    """Merge two (count, mean, sum of squared deviations) triples (Chan et al.); empty ones merge as no-ops."""
    nn = na + nb
    d = mb - ma
    f = nb / max(nn, 1.0)
    return nn, ma + d * f, qa + qb + d * d * na * f


@kernel(variants(T=[f32, f16, bf16], VEC=[4, 8], ITEMS=list(ITEMS_CHOICES)))
def layernorm_rows(x: In[T], weight: In[T], bias: In[T], out: Tensor[T], rows: int, n: int, eps: float,
                   has_bias: bool, aligned: bool):
    """out[r, :] = (x[r, :] - mean) * rsqrt(var + eps) * weight (+ bias), one row in registers per group.

    x, out: (rows, n) row-major, contiguous; weight, bias: (n,); all dtype T (f32/f16/bf16); f32 math,
    one rounding to T. bias is read only when has_bias. var is the biased (1/n) variance, computed in
    two passes over the registers: mean = sum(x) / n, then sum((x - mean)^2) / n.
    Domain: 1 <= n <= GROUP * VEC * ITEMS; GROUP-thread groups, any count (a group loops over rows);
    aligned (only when n % VEC == 0 and every tensor starts on 16 bytes): 16-byte vectors, otherwise
    coalesced scalar accesses. Sums: a tree over the thread's registers, simd_sum, then the
    subgroups' partials through shared memory. Non-finite: a NaN or +-inf in a row gives a NaN row.
    """
    t = thread_id(0)
    red = shared(f32, 2 * GROUP)
    K = VEC * ITEMS
    LEVELS = int(math.log2(K))
    r = local(f32, K)
    acc = local(f32, K)
    for row in range(group_id(0), rows, num_groups(0)):
        base = row * n
        for j in static_range(ITEMS):
            if aligned:
                c = (j * GROUP + t) * VEC
                if c < n:
                    v = f32(x.load(base + c, width=VEC))
                    for k in static_range(VEC):
                        r[j * VEC + k] = v[k]
                else:
                    for k in static_range(VEC):
                        r[j * VEC + k] = 0.0
            else:
                for k in static_range(VEC):
                    c = (j * VEC + k) * GROUP + t
                    if c < n:
                        r[j * VEC + k] = f32(x[base + c])
                    else:
                        r[j * VEC + k] = 0.0
        for i in static_range(K):
            acc[i] = r[i]
        for lvl in static_range(LEVELS):
            for i in static_range(K >> (lvl + 1)):
                acc[i] = acc[i] + acc[i + (K >> (lvl + 1))]
        mean = group_sum(acc[0], red, 0) / f32(n)
        live = live_registers(n, t, aligned, VEC, GROUP)
        for i in static_range(K):
            d = r[i] - mean
            r[i] = d if i < live else 0.0
            acc[i] = r[i] * r[i]
        for lvl in static_range(LEVELS):
            for i in static_range(K >> (lvl + 1)):
                acc[i] = acc[i] + acc[i + (K >> (lvl + 1))]
        rstd = rsqrt(group_sum(acc[0], red, GROUP) / f32(n) + eps)
        for j in static_range(ITEMS):
            if aligned:
                c = (j * GROUP + t) * VEC
                if c < n:
                    w = f32(weight.load(c, width=VEC))
                    for k in static_range(VEC):
                        acc[k] = r[j * VEC + k] * rstd * w[k]
                    if has_bias:
                        b = f32(bias.load(c, width=VEC))
                        for k in static_range(VEC):
                            acc[k] = acc[k] + b[k]
                    if VEC == 4:
                        out.store(base + c, T(vec(acc[0], acc[1], acc[2], acc[3])))
                    else:
                        out.store(base + c, T(vec(acc[0], acc[1], acc[2], acc[3], acc[4], acc[5], acc[6], acc[7])))
            else:
                for k in static_range(VEC):
                    c = (j * VEC + k) * GROUP + t
                    if c < n:
                        yv = r[j * VEC + k] * rstd * f32(weight[c])
                        if has_bias:
                            yv = yv + f32(bias[c])
                        out[base + c] = T(yv)


@kernel(variants(T=[f32, f16, bf16], VEC=[4, 8], ITEMS=list(ITEMS_CHOICES), ADD=[False, True]))
def rmsnorm_rows(x: In[T], residual: In[T], weight: In[T], out: Tensor[T], h: Tensor[T], rows: int, n: int,
                 eps: float, aligned: bool):
    """out[r, :] = x[r, :] * rsqrt(mean(x[r, :]^2) + eps) * weight, one row in registers per group.

    ADD (fused residual add): h[r, :] = T(x + residual) is written, and out = rmsnorm(h) of that
    rounded h, so out is exactly the norm of the residual stream returned; without ADD, residual and
    h are neither read nor written (pass any T arrays). x, residual, out, h: (rows, n) row-major,
    contiguous; weight: (n,); dtype T (f32/f16/bf16); f32 math, one rounding to T per output.
    Domain, layout, aligned and the sum's order: as layernorm_rows (one sum of squares per row).
    Non-finite: a NaN gives a NaN row; an inf makes the sum of squares inf, so the row's finite
    elements give 0 (times weight) and the inf NaN (inf * 0), as torch's arithmetic.
    """
    t = thread_id(0)
    red = shared(f32, 2 * GROUP)
    K = VEC * ITEMS
    LEVELS = int(math.log2(K))
    r = local(f32, K)
    acc = local(f32, K)
    parity = 0
    for row in range(group_id(0), rows, num_groups(0)):
        base = row * n
        for j in static_range(ITEMS):
            if aligned:
                c = (j * GROUP + t) * VEC
                if c < n:
                    if ADD:
                        hv = T(f32(x.load(base + c, width=VEC)) + f32(residual.load(base + c, width=VEC)))
                        h.store(base + c, hv)
                        v = f32(hv)
                    else:
                        v = f32(x.load(base + c, width=VEC))
                    for k in static_range(VEC):
                        r[j * VEC + k] = v[k]
                else:
                    for k in static_range(VEC):
                        r[j * VEC + k] = 0.0
            else:
                for k in static_range(VEC):
                    c = (j * VEC + k) * GROUP + t
                    if c < n:
                        if ADD:
                            hs = T(f32(x[base + c]) + f32(residual[base + c]))
                            h[base + c] = hs
                            r[j * VEC + k] = f32(hs)
                        else:
                            r[j * VEC + k] = f32(x[base + c])
                    else:
                        r[j * VEC + k] = 0.0
        for i in static_range(K):
            acc[i] = r[i] * r[i]
        for lvl in static_range(LEVELS):
            for i in static_range(K >> (lvl + 1)):
                acc[i] = acc[i] + acc[i + (K >> (lvl + 1))]
        # Alternate the two slot ranges row by row: the next row's partials never overwrite this
        # row's before every thread has read them (the next reduction's barrier separates them).
        rstd = rsqrt(group_sum(acc[0], red, parity * GROUP) / f32(n) + eps)
        parity = 1 - parity
        for j in static_range(ITEMS):
            if aligned:
                c = (j * GROUP + t) * VEC
                if c < n:
                    w = f32(weight.load(c, width=VEC))
                    if VEC == 4:
                        out.store(base + c, T(vec(r[j * 4], r[j * 4 + 1], r[j * 4 + 2], r[j * 4 + 3]) * rstd * w))
                    else:
                        b8 = j * 8
                        out.store(base + c, T(vec(r[b8], r[b8 + 1], r[b8 + 2], r[b8 + 3], r[b8 + 4], r[b8 + 5],
                                                  r[b8 + 6], r[b8 + 7]) * rstd * w))
            else:
                for k in static_range(VEC):
                    c = (j * VEC + k) * GROUP + t
                    if c < n:
                        out[base + c] = T(r[j * VEC + k] * rstd * f32(weight[c]))


# ---------------------------------------------------------------- rows longer than a group holds

@kernel(variants(T=[f32, f16, bf16], VEC=[4, 8]))
def layernorm_rows_long(x: In[T], weight: In[T], bias: In[T], out: Tensor[T], rows: int, n: int, eps: float,
                        has_bias: bool, aligned: bool):
    """layernorm_rows for rows of any length: a statistics pass, then a normalising pass (2 reads, 1 write).

    Contract as layernorm_rows, with n >= 1 unbounded. Pass 1: each thread keeps Welford statistics
    (count, mean, sum of squared deviations) over its VEC-wide chunks (stride GROUP * VEC; scalar,
    stride GROUP, unless aligned), merging each chunk's own two-pass statistics with Chan's formula;
    the subgroup merges by a shuffle-xor butterfly, the subgroups' triples through shared memory
    (merged in subgroup order by every thread). Non-finite: a NaN or +-inf gives a NaN row.
    """
    t = thread_id(0)
    red_n = shared(f32, GROUP)
    red_m = shared(f32, GROUP)
    red_q = shared(f32, GROUP)
    for row in range(group_id(0), rows, num_groups(0)):
        base = row * n
        cnt = 0.0
        mean = 0.0
        q = 0.0
        if aligned:
            for c in range(t * VEC, n, GROUP * VEC, unroll=4):
                v = f32(x.load(base + c, width=VEC))
                cs = v[0]
                for k in static_range(1, VEC):
                    cs += v[k]
                cm = cs / f32(VEC)
                d = v - cm
                dd = d * d
                cq = dd[0]
                for k in static_range(1, VEC):
                    cq += dd[k]
                cnt, mean, q = chan(cnt, mean, q, f32(VEC), cm, cq)
        else:
            for c in range(t, n, GROUP, unroll=4):
                xv = f32(x[base + c])
                cnt = cnt + 1.0
                ds = xv - mean
                mean = mean + ds / cnt
                q = q + ds * (xv - mean)
        off = simd_size() // 2
        while off > 0:
            on = simd_shuffle_xor(cnt, off)
            om = simd_shuffle_xor(mean, off)
            oq = simd_shuffle_xor(q, off)
            cnt, mean, q = chan(cnt, mean, q, on, om, oq)
            off = off // 2
        if lane_id() == 0:
            red_n[simd_group_id()] = cnt
            red_m[simd_group_id()] = mean
            red_q[simd_group_id()] = q
        barrier()
        cnt = 0.0
        mean = 0.0
        q = 0.0
        for i in range(num_simd_groups()):
            cnt, mean, q = chan(cnt, mean, q, red_n[i], red_m[i], red_q[i])
        barrier()  # every thread has read the triples before the next row writes them
        rstd = rsqrt(q / f32(n) + eps)
        if aligned:
            for c in range(t * VEC, n, GROUP * VEC, unroll=4):
                y = (f32(x.load(base + c, width=VEC)) - mean) * rstd * f32(weight.load(c, width=VEC))
                if has_bias:
                    y = y + f32(bias.load(c, width=VEC))
                out.store(base + c, T(y))
        else:
            for c in range(t, n, GROUP, unroll=4):
                ys = (f32(x[base + c]) - mean) * rstd * f32(weight[c])
                if has_bias:
                    ys = ys + f32(bias[c])
                out[base + c] = T(ys)


@kernel(variants(T=[f32, f16, bf16], VEC=[4, 8], ADD=[False, True]))
def rmsnorm_rows_long(x: In[T], residual: In[T], weight: In[T], out: Tensor[T], h: Tensor[T], rows: int, n: int,
                      eps: float, aligned: bool):
    """rmsnorm_rows for rows of any length: a sum-of-squares pass, then a writing pass.

    Contract as rmsnorm_rows, with n >= 1 unbounded. Without ADD: 2 reads + 1 write. ADD: pass 1
    reads x and residual and writes h, pass 2 reads h back (each thread its own elements) and writes
    out: 3 reads + 2 writes. Per thread: a tree over each chunk's squares, added sequentially.
    """
    t = thread_id(0)
    red = shared(f32, 2 * GROUP)
    parity = 0
    for row in range(group_id(0), rows, num_groups(0)):
        base = row * n
        ss = 0.0
        if aligned:
            for c in range(t * VEC, n, GROUP * VEC, unroll=4):
                if ADD:
                    hv = T(f32(x.load(base + c, width=VEC)) + f32(residual.load(base + c, width=VEC)))
                    h.store(base + c, hv)
                    v = f32(hv)
                else:
                    v = f32(x.load(base + c, width=VEC))
                sq = v * v
                part = sq[0]
                if VEC == 4:
                    part = (sq[0] + sq[1]) + (sq[2] + sq[3])
                else:
                    part = ((sq[0] + sq[1]) + (sq[2] + sq[3])) + ((sq[4] + sq[5]) + (sq[6] + sq[7]))
                ss += part
        else:
            for c in range(t, n, GROUP, unroll=4):
                if ADD:
                    hs = T(f32(x[base + c]) + f32(residual[base + c]))
                    h[base + c] = hs
                    xs = f32(hs)
                else:
                    xs = f32(x[base + c])
                ss += xs * xs
        rstd = rsqrt(group_sum(ss, red, parity * GROUP) / f32(n) + eps)
        parity = 1 - parity
        src = h if ADD else x
        if aligned:
            for c in range(t * VEC, n, GROUP * VEC, unroll=4):
                out.store(base + c, T(f32(src.load(base + c, width=VEC)) * rstd * f32(weight.load(c, width=VEC))))
        else:
            for c in range(t, n, GROUP, unroll=4):
                out[base + c] = T(f32(src[base + c]) * rstd * f32(weight[c]))


# ---------------------------------------------------------------- host functions

def _prepare(x: Any, weight: Any, out: Any, what: str, reads: dict[str, Any]) -> tuple[Any, int, int, Any]:
    dt = _host.check_float(x, f"{what}: x")
    rows, n = rows_of(x, f"{what}: x")
    wdt = _host.dtype_of(weight, f"{what}: weight")
    if wdt != dt:
        raise LaunchError(f"{what}: weight has dtype {wdt.name}, x has {dt.name}; they must match")
    _host.check_shape(weight, (n,), f"{what}: weight")
    return dt, rows, n, checked_out(x, out, dt, what, {"x": x, "weight": weight, **reads})


def _geometry(rows: int) -> dict[str, Any]:
    return {"grid": (min(rows, MAX_GROUPS) * GROUP,), "group": (GROUP,)}


@planned
def layernorm(x: Any, weight: Any, bias: Any = None, eps: float = 1e-5, out: Any = None,
              backend: str | None = None) -> Any:
    """LayerNorm over the last axis of ``x`` (f32/f16/bf16, C-contiguous) with ``weight`` (and ``bias``) of
    shape (n,), in f32; biased variance, two-pass.  Returns ``out``."""
    dt, rows, n, out = _prepare(x, weight, out, "layernorm", {"bias": bias})
    if bias is not None:
        bdt = _host.dtype_of(bias, "layernorm: bias")
        if bdt != dt:
            raise LaunchError(f"layernorm: bias has dtype {bdt.name}, x has {dt.name}; they must match")
        _host.check_shape(bias, (n,), "layernorm: bias")
    if rows == 0 or n == 0:
        return out
    vec = _host.vector_width(dt)
    b = weight if bias is None else bias
    aligned = vector_ok(n, vec, x, weight, b, out)
    items = register_items(n, vec)
    k = (layernorm_rows_long.variant(T=dt, VEC=vec) if items is None
         else layernorm_rows.variant(T=dt, VEC=vec, ITEMS=items))
    k.launch(x, weight, b, out, rows, n, float(eps), bias is not None, aligned, backend=backend, **_geometry(rows))
    return out


def _rms(x: Any, residual: Any, weight: Any, eps: float, out: Any, h: Any, backend: str | None, what: str) -> Any:
    dt, rows, n, out = _prepare(x, weight, out, what, {"residual": residual})
    add = residual is not None
    if add:
        rdt = _host.dtype_of(residual, f"{what}: residual")
        if rdt != dt:
            raise LaunchError(f"{what}: residual has dtype {rdt.name}, x has {dt.name}; they must match")
        _host.check_shape(residual, _host.shape_of(x), f"{what}: residual")
        h = checked_out(x, h, dt, what, {"x": x, "residual": residual, "weight": weight, "out": out},
                        name="residual_out")
    if rows == 0 or n == 0:
        return out, h
    vec = _host.vector_width(dt)
    aligned = vector_ok(n, vec, x, weight, out, *((residual, h) if add else ()))
    items = register_items(n, vec)
    k = (rmsnorm_rows_long.variant(T=dt, VEC=vec, ADD=add) if items is None
         else rmsnorm_rows.variant(T=dt, VEC=vec, ITEMS=items, ADD=add))
    # Without ADD the kernel touches neither residual nor h: x and out stand in for them.
    k.launch(x, residual if add else x, weight, out, h if add else out, rows, n, float(eps), aligned,
             backend=backend, **_geometry(rows))
    return out, h


@planned
def rmsnorm(x: Any, weight: Any, eps: float = 1e-6, out: Any = None, backend: str | None = None) -> Any:
    """RMSNorm over the last axis of ``x``: x * rsqrt(mean(x^2) + eps) * weight, in f32.  Returns ``out``."""
    return _rms(x, None, weight, eps, out, None, backend, "rmsnorm")[0]


@planned
def add_rmsnorm(x: Any, residual: Any, weight: Any, eps: float = 1e-6, out: Any = None, residual_out: Any = None,
                backend: str | None = None) -> tuple[Any, Any]:
    """The fused pre-norm step: h = x + residual (rounded to the dtype), y = rmsnorm(h) * weight.

    Returns ``(y, h)``; ``residual_out=residual`` updates the residual stream in place (each element is
    read before it is written, by the same thread).
    """
    return _rms(x, residual, weight, eps, out, residual_out, backend, "add_rmsnorm")


__all__ = ["add_rmsnorm", "layernorm", "layernorm_rows", "layernorm_rows_long", "rmsnorm", "rmsnorm_rows",
           "rmsnorm_rows_long"]
