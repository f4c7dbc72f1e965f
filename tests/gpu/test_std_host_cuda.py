"""iron.std's host functions on the ``cuda`` device, where they choose CUDA-only configurations (gemv's
K splits and 1024-thread column groups, decode's keys in flight) that the registered items bind by hand.
Against float64 numpy; skips where no CUDA GPU answers (CI); the H200 runs it."""

from __future__ import annotations

import math

import numpy as np
import pytest

from iron.std import attention as A
from iron.std import gemv as G


@pytest.mark.parametrize("k,n", [(4096, 4096), (1000, 264), (37, 4096)])
def test_gemv_columns_as_the_host_plans_them(cuda, k, n):
    """K split over 512-byte row segments then the sum pass (the first two), and one 1024-thread pass."""
    splits = -(-k // G.column_plan(k, n, G.f16, "cuda")[1])
    assert (splits > 1) == (k > 37)
    rng = np.random.default_rng(k + n)
    a = rng.standard_normal((k, n)).astype(np.float16)
    x = rng.standard_normal(k).astype(np.float16)
    want = x.astype(np.float64) @ a.astype(np.float64)
    got = G.gemv(a, x, transpose=True, backend="cuda").astype(np.float64)
    # f32 sums rounded once to f16: a wrong slice or a lost partial is off by O(1) of the scale.
    scale = np.sqrt(k)
    assert np.max(np.abs(got - want)) < 2.0 ** -8 * scale + 2.0 ** -10 * np.max(np.abs(want))


@pytest.mark.parametrize("h,h_kv", [(8, 8), (8, 2)])
def test_decode_attention_with_each_heads_per_group(cuda, h, h_kv):
    rng = np.random.default_rng(h_kv)
    b, s, d = 2, 700, 128
    q = rng.standard_normal((b, h, d)).astype(np.float16)
    k = rng.standard_normal((b, h_kv, s, d)).astype(np.float16)
    v = rng.standard_normal((b, h_kv, s, d)).astype(np.float16)
    lens = np.array([s, 333], np.int32)
    got = A.decode_attention(q, k, v, lens, backend="cuda").astype(np.float64)
    r = h // h_kv
    for bi in range(b):
        for hi in range(h):
            kk = k[bi, hi // r, :lens[bi]].astype(np.float64)
            w = kk @ q[bi, hi].astype(np.float64) / math.sqrt(d)
            p = np.exp(w - w.max())
            want = (p / p.sum()) @ v[bi, hi // r, :lens[bi]].astype(np.float64)
            assert np.max(np.abs(got[bi, hi] - want)) < 2.0 ** -8, (bi, hi)
