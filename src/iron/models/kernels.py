"""The kernels a Llama decoder needs that iron.std has not, written in Iron like a user's kernels (any target): the
embedding's row gather, SwiGLU over the gate and up projections (one merged product or two), and RoPE of the
merged Q/K/V projection fused with the paged cache's append."""

from __future__ import annotations

from iron import In, T, Tensor, bf16, f16, f32, func, i32, kernel, variants
from iron.lang import barrier, bitcast, exp, group_id, max, min, program_id, shared, thread_id
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


@func
def _group_reduce(buf, t, v, op):
    """``v`` of every thread of the group combined by ``op`` ("sum", "max" or "min") as a tree over ``buf``
    (shared, GROUP elements): the same order on every target; every thread gets the result."""
    buf[t] = v
    barrier()
    s = GROUP // 2
    while s > 0:
        if t < s:
            if op == "sum":
                buf[t] = buf[t] + buf[t + s]
            elif op == "max":
                buf[t] = max(buf[t], buf[t + s])
            else:
                buf[t] = min(buf[t], buf[t + s])
        barrier()
        s = s // 2
    r = buf[0]
    barrier()
    return r


@func
def _order_key(x):
    """An i32 that orders like the f32 ``x`` (not NaN): its bits, the magnitude bits flipped when negative."""
    b = bitcast(x, i32)
    return b ^ ((b >> 31) & 0x7FFFFFFF)


@kernel(variants(T=[f32, f16, bf16]))
def topk_sample(logits: In[T], uniform: In[f32], out: Tensor[i32], vocab: int, k: int, inv_temp: f32):
    """out[r] = a token drawn from row r of ``logits`` (rows, vocab) restricted to its k largest values, with
    probabilities softmax(inv_temp x) over them, by the inverse of their distribution at uniform[r] in [0, 1).

    One group of GROUP threads a row (grid (rows GROUP,)).  The k-th largest value is found exactly by bisection
    on the values' order keys (32 rounds of counting the row); every value equal to it is kept, so ties
    can keep more than k.  NaN logits are never drawn (a row of NaN gives token 0).  Weights are exp((x - max)
    inv_temp) in f32; thread t sums its contiguous slice of the row in index order, thread 0 adds the slices in
    order and finds the slice holding uniform * total, and that slice's thread walks it to the token: the first
    whose running sum passes the target (the last kept token if rounding leaves none)."""
    row = group_id(0)
    t = thread_id(0)
    base = row * vocab
    ints = shared(i32, GROUP)
    floats = shared(f32, GROUP)
    pick = shared(f32, 2)
    lo = 2147483647
    hi = -2147483647
    top = -3.4028234663852886e38
    i = t
    while i < vocab:
        x = f32(logits[base + i])
        if x == x:
            key = _order_key(x)
            lo = min(lo, key)
            hi = max(hi, key)
            top = max(top, x)
        i += GROUP
    lo = _group_reduce(ints, t, lo, "min")
    hi = _group_reduce(ints, t, hi, "max") + 1
    top = _group_reduce(floats, t, top, "max")
    # count(key >= lo) >= k and count(key >= hi) < k; 32 halvings of a range of at most 2**32 keys leave hi =
    # lo + 1, and lo is the k-th key (once there, mid = lo and nothing moves)
    for _ in range(32):
        mid = (lo >> 1) + (hi >> 1) + (lo & hi & 1)
        count = 0
        i = t
        while i < vocab:
            x = f32(logits[base + i])
            if x == x and _order_key(x) >= mid:
                count += 1
            i += GROUP
        if _group_reduce(ints, t, count, "sum") >= k:
            lo = mid
        else:
            hi = mid
    chunk = (vocab + GROUP - 1) // GROUP
    start = min(t * chunk, vocab)
    end = min(start + chunk, vocab)
    part = 0.0
    for j in range(start, end):
        x = f32(logits[base + j])
        if x == x and _order_key(x) >= lo:
            part += exp((x - top) * inv_temp)
    floats[t] = part
    barrier()
    if t == 0:
        total = 0.0
        for c in range(GROUP):
            total += floats[c]
        target = uniform[row] * total
        owner = -1
        last = 0
        below = 0.0
        acc = 0.0
        for c in range(GROUP):
            if floats[c] > 0.0:
                if owner < 0 and acc + floats[c] > target:
                    owner = c
                    below = acc
                last = c
            acc += floats[c]
        if owner < 0:  # rounding: target at the very top
            owner = last
            below = acc - floats[last]
            target = acc
        pick[0] = f32(owner)
        pick[1] = target - below
    barrier()
    if t == i32(pick[0]):
        goal = pick[1]
        run = 0.0
        chosen = -1
        kept = 0
        for j in range(start, end):
            x = f32(logits[base + j])
            if x == x and _order_key(x) >= lo:
                run += exp((x - top) * inv_temp)
                kept = j
                if chosen < 0 and run > goal:
                    chosen = j
        if chosen < 0:
            chosen = kept
        out[row] = chosen


__all__ = ["GROUP", "embedding_rows", "rope_qkv_append", "swiglu", "topk_sample"]
