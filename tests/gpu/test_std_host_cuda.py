"""iron.std's host functions on the ``cuda`` device, where they choose CUDA-only configurations (gemv's
K splits and 1024-thread column groups, decode's keys in flight) that the registered items bind by hand.
Against float64 numpy; skips where no CUDA GPU answers (CI); the H200 runs it."""

from __future__ import annotations

import math

import numpy as np
import pytest

from iron import In, Tensor, bf16, f32, kernel
from iron.lang import program_id
from iron.std import attention as A
from iron.std import gemv as G
from iron.std.gemm_ws import runs_roles


@kernel
def twice(a: In[f32], b: Tensor[f32]):
    i = program_id(0)
    b[i] = 2.0 * a[i]


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


def test_decode_attention_past_the_index_limit_in_batches(cuda):
    """Issue 21's B = 64 at 32K keys and 8 KV heads of 128 is a cache of 2**31 elements, one past what a launch's
    i32 indices reach: the host decodes it in two batches of 32 sequences, and gives SDPA's output (8 GiB)."""
    torch = pytest.importorskip("torch")
    b, h, h_kv, s, d = 64, 32, 8, 32768, 128
    gen = torch.Generator(device="cuda").manual_seed(5)
    q = torch.randn(b, h, d, device="cuda", dtype=torch.bfloat16, generator=gen)
    k, v = (torch.randn(b, h_kv, s, d, device="cuda", dtype=torch.bfloat16, generator=gen) for _ in range(2))
    lens = torch.randint(1, s + 1, (b,), device="cuda", dtype=torch.int32, generator=gen)
    got = A.decode_attention(q, k, v, lens)
    mask = (torch.arange(s, device="cuda")[None, :] < lens[:, None])[:, None, None, :]
    want = torch.nn.functional.scaled_dot_product_attention(q[:, :, None], k, v, attn_mask=mask,
                                                            enable_gqa=True)[:, :, 0]
    err = float((got.float() - want.float()).abs().max() / want.float().abs().max())
    assert err < 2.0 ** -7, err


@pytest.mark.parametrize("shape,causal", [((1, 4, 4, 1000, 128), True), ((2, 4, 1, 300, 64), False),
                                          ((1, 2, 2, 1, 128), True), ((1, 2, 1, 300, 256), True)],
                         ids=["mha-causal", "gqa", "one-token", "d256"])
def test_prefill_attention_takes_the_hopper_kernel(cuda, shape, causal):
    """On sm_90 the host runs attention_ws.py's kernel (128 queries, warp roles, tile copies): query tiles and key
    blocks with tails, grouped-query heads, one token.  A wrong block, mask or rescale is off by O(0.1)."""
    if A.prefill_block("cuda") != 128:
        pytest.skip(f"the Hopper prefill needs sm_90's warp roles and tile copies; this GPU is {cuda.arch}")
    b, h, h_kv, s, d = shape
    rng = np.random.default_rng(s)
    q = rng.standard_normal((b, h, s, d)).astype(np.float16)
    k = rng.standard_normal((b, h_kv, s, d)).astype(np.float16)
    v = rng.standard_normal((b, h_kv, s, d)).astype(np.float16)
    got = A.prefill_attention(q, k, v, causal=causal, backend="cuda").astype(np.float64)
    r = h // h_kv
    for bi in range(b):
        for hi in range(h):
            w = q[bi, hi].astype(np.float64) @ k[bi, hi // r].astype(np.float64).T / math.sqrt(d)
            if causal:
                w = np.where(np.tril(np.ones((s, s), bool)), w, -np.inf)
            p = np.exp(w - w.max(axis=1, keepdims=True))
            want = (p / p.sum(axis=1, keepdims=True)) @ v[bi, hi // r].astype(np.float64)
            assert np.max(np.abs(got[bi, hi] - want)) < 2.0 ** -7, (bi, hi)


def _attention_alone(q, k, v, causal):
    """float64 softmax(Q K^T / sqrt(D) + mask) V of one sequence's (S, heads, D) rows, (S, H, D) out."""
    s, h, d = q.shape
    r = h // k.shape[1]
    out = np.empty(q.shape)
    for hi in range(h):
        w = q[:, hi].astype(np.float64) @ k[:, hi // r].astype(np.float64).T / math.sqrt(d)
        if causal:
            w = np.where(np.tril(np.ones((s, s), bool)), w, -np.inf)
        p = np.exp(w - w.max(axis=1, keepdims=True))
        out[:, hi] = (p / p.sum(axis=1, keepdims=True)) @ v[:, hi // r].astype(np.float64)
    return out


@pytest.mark.parametrize("block", [None, 64, 16])
@pytest.mark.parametrize("causal", [True, False])
def test_prefill_attention_varlen_runs_each_sequence_alone(cuda, causal, block):
    """Packed sequences (one past two query tiles of 128, an empty one, one token, one tail) on the host's kernel
    (Hopper's on sm_90) and on the mma.sync and portable ones; a neighbour's key or a lost row is off by O(0.1)."""
    lens = (300, 0, 1, 129, 64)
    cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    rng = np.random.default_rng(len(lens))
    q = rng.standard_normal((int(cu[-1]), 4, 128)).astype(np.float16)
    k, v = (rng.standard_normal((int(cu[-1]), 2, 128)).astype(np.float16) for _ in range(2))
    got = A.prefill_attention_varlen(q, k, v, cu, causal=causal, block=block, backend="cuda").astype(np.float64)
    for b in range(len(lens)):
        rows = slice(int(cu[b]), int(cu[b + 1]))
        if lens[b]:
            assert np.max(np.abs(got[rows] - _attention_alone(q[rows], k[rows], v[rows], causal))) < 2.0 ** -7, b


def test_prefill_attention_varlen_takes_torch_tensors(cuda):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    lens = (200, 57)
    cu = torch.tensor([0, 200, 257], dtype=torch.int32, device="cuda")
    q, k, v = (torch.randn(257, 8, 64, dtype=torch.bfloat16, device="cuda") for _ in range(3))
    got = A.prefill_attention_varlen(q, k, v, cu, max_seqlen=200).float().cpu().numpy()
    for b, (lo, hi) in enumerate(((0, 200), (200, 257))):
        want = _attention_alone(*(x[lo:hi].float().cpu().numpy() for x in (q, k, v)), True)
        assert np.max(np.abs(got[lo:hi] - want)) < 2.0 ** -6, (b, lens)


@pytest.mark.parametrize("block,page", [(None, 16), (None, 64), (64, 16), (16, 32)])
def test_prefill_attention_paged_runs_each_sequence_over_its_pages(cuda, block, page):
    """Chunks after cached prefixes (and a whole prompt) over a shuffled pool of pages whose unused rows and pages
    are NaN (the rest of each sequence's last piece zero, which the Hopper kernel reads whole) on the host's kernel
    (Hopper's on sm_90) and the mma.sync and portable ones, bottom-right causal, against float64."""
    q_lens, k_lens = (130, 1, 64, 200), (300, 1, 70, 200)
    h, h_kv, d = 4, 2, 128
    rng = np.random.default_rng(page)
    width = max(-(-n // page) for n in k_lens)
    table = rng.permutation(len(k_lens) * width + 3)[: len(k_lens) * width].reshape(-1, width).astype(np.int32)
    k_pages, v_pages = (np.full((len(k_lens) * width + 3, page, h_kv, d), np.nan, np.float16) for _ in range(2))
    keys = []
    for i, n in enumerate(k_lens):
        kv = [rng.standard_normal((n, h_kv, d)).astype(np.float16) for _ in range(2)]
        piece = max(p for p in (16, 64, 128) if page % p == 0)  # what the Hopper kernel copies at once
        for s in range(min(-(-n // piece) * piece, width * page)):
            at = (table[i, s // page], s % page)
            k_pages[at], v_pages[at] = (kv[0][s], kv[1][s]) if s < n else (0, 0)
        keys.append(kv)
    cu = np.concatenate([[0], np.cumsum(q_lens)]).astype(np.int32)
    q = rng.standard_normal((int(cu[-1]), h, d)).astype(np.float16)
    got = A.prefill_attention_paged(q, k_pages, v_pages, table, cu, np.array(k_lens, np.int32), block=block,
                                    backend="cuda").astype(np.float64)
    for b, ((k, v), n, nk) in enumerate(zip(keys, q_lens, k_lens)):
        rows = slice(int(cu[b]), int(cu[b + 1]))
        want = np.empty((n, h, d))
        for hi in range(h):
            w = q[rows, hi].astype(np.float64) @ k[:, hi // 2].astype(np.float64).T / np.sqrt(d)
            w = np.where(np.arange(nk)[None, :] <= np.arange(n)[:, None] + nk - n, w, -np.inf)
            p = np.exp(w - w.max(axis=1, keepdims=True))
            want[:, hi] = (p / p.sum(axis=1, keepdims=True)) @ v[:, hi // 2].astype(np.float64)
        assert np.max(np.abs(got[rows] - want)) < 2.0 ** -7, b


def test_decode_attention_refuses_a_cache_off_a_16_byte_boundary(cuda):
    """The split passes read q, k and v in 16-byte pieces (cp.async, vector loads): a view that starts mid-vector is a
    clear error, not a misaligned-address fault that would end the CUDA context."""
    import torch

    from iron import LaunchError
    from iron.std import attention as A

    q = torch.randn(1, 4, 64, device="cuda", dtype=torch.bfloat16)
    whole = torch.randn(1 * 2 * 32 * 64 + 1, device="cuda", dtype=torch.bfloat16)
    k = whole[1:].view(1, 2, 32, 64)
    lens = torch.full((1,), 32, device="cuda", dtype=torch.int32)
    with pytest.raises(LaunchError, match="16-byte boundaries"):
        A.decode_attention(q, k, k, lens)
    out = A.decode_attention(q, k.clone(), k.clone(), lens)
    assert torch.isfinite(out.float()).all()


@pytest.mark.parametrize("h,h_kv", [(32, 8), (8, 8)])
def test_decode_attention_paged_reads_what_the_dense_cache_holds(cuda, h, h_kv):
    """A shuffled pool of 16-key pages (every unused row NaN) gives the dense cache's decode bit for bit (with and
    without MMA_PLAN's TABLE_AHEAD), and append_paged_kv's writes land where the table says."""
    rng = np.random.default_rng(h)
    b, page, width, d = 4, 16, 40, 128
    s_max = page * width
    lens = np.array([s_max - 1, 1, 333, 0], np.int32)
    q = rng.standard_normal((b, h, d)).astype(np.float16)
    k, v = (rng.standard_normal((b, h_kv, s_max, d)).astype(np.float16) for _ in range(2))
    pool = b * width + 3
    table = rng.permutation(pool)[: b * width].reshape(b, width).astype(np.int32)
    k_pages, v_pages = (np.full((pool, page, h_kv, d), np.nan, np.float16) for _ in range(2))
    for i in range(b):
        rows = np.arange(lens[i])
        k_pages[table[i, rows // page], rows % page] = k[i].transpose(1, 0, 2)[rows]
        v_pages[table[i, rows // page], rows % page] = v[i].transpose(1, 0, 2)[rows]
    got = A.decode_attention_paged(q, k_pages, v_pages, table, lens, backend="cuda")
    dense = A.decode_attention(q, k, v, lens, backend="cuda")
    np.testing.assert_array_equal(got, dense)
    with pytest.MonkeyPatch.context() as m:  # the table read in front of each block's copies: the same bits
        m.setitem(A.MMA_PLAN, "TABLE_AHEAD", 1 - A.MMA_PLAN["TABLE_AHEAD"])
        np.testing.assert_array_equal(A.decode_attention_paged(q, k_pages, v_pages, table, lens, backend="cuda"),
                                      dense)
    k_new, v_new = (rng.standard_normal((b, h_kv, d)).astype(np.float16) for _ in range(2))
    A.append_paged_kv(k_new, v_new, k_pages, v_pages, table, lens, backend="cuda")
    for i in range(b):
        np.testing.assert_array_equal(v_pages[table[i, lens[i] // page], lens[i] % page], v_new[i])


def test_reduce_many_long_rows_go_one_subgroup_each(cuda):
    """4096 rows of 12 KB: past SHORT_ROW_BYTES, but MANY_ROWS of them take the subgroup schedule."""
    from iron import f32
    from iron.std import reduce as R

    assert R.by_subgroup(4096, 3000, f32)
    x = (np.random.default_rng(7).standard_normal((4096, 3000)) * 3).astype(np.float32)
    want = x.astype(np.float64).sum(axis=-1)
    got = R.sum(x, backend="cuda").astype(np.float64)
    # f32 sums of 3000 terms round within ~3000 * 2**-24 of sum |x| (2e-4); a lost element is ~3e-4 of it.
    assert np.max(np.abs(got - want) / np.abs(x).astype(np.float64).sum(axis=-1)) < 1e-5
    np.testing.assert_array_equal(R.max(x, backend="cuda"), x.max(axis=-1))
    np.testing.assert_array_equal(R.argmax(x, backend="cuda"), x.argmax(axis=-1))


@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize("ks", [3, 5, 7])
def test_depthwise_nchw_square_filters_as_the_host_launches_them(cuda, ks, stride):
    """3x3/5x5/7x7 at stride 1 and 2 take dwconv2d_nchw_k_kernel (runs of 8 f16 outputs); W_out 33 (17) is no
    multiple of the run, and planes of 30 x 33 need two tiles of 256 (row, run) pairs."""
    from iron.std import conv as C

    assert C.dw_nchw_ks(ks, ks, (stride, stride), (1, 1))
    rng = np.random.default_rng(ks)
    x = rng.standard_normal((2, 8, 30, 33)).astype(np.float16)
    w = rng.standard_normal((8, 1, ks, ks)).astype(np.float16)
    b = rng.standard_normal(8).astype(np.float16)
    p = ks // 2
    ho, wo = (30 + 2 * p - ks) // stride + 1, (33 + 2 * p - ks) // stride + 1
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (p, p), (p, p)))
    want = np.zeros((2, 8, ho, wo)) + b.astype(np.float64)[None, :, None, None]
    for i in range(ks):
        for j in range(ks):
            win = xp[:, :, i:i + stride * (ho - 1) + 1:stride, j:j + stride * (wo - 1) + 1:stride]
            want += win * w[None, :, 0, i, j, None, None].astype(np.float64)
    got = C.depthwise_conv2d(x, w, b, stride=stride, padding=p, backend="cuda").astype(np.float64)
    # f32 chains rounded once to f16: 2**-10 relative to the output, plus the chain's few ulps of f32.
    scale = np.abs(xp).max() * np.abs(w.astype(np.float64)).sum(axis=(1, 2, 3)).max() + np.abs(b).max()
    assert got.shape == want.shape
    assert np.max(np.abs(got - want) / (np.abs(want) + 1e-3 * scale)) < 2.0 ** -9


@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize("ks", [3, 5])
def test_depthwise_nhwc_square_filters_as_the_host_launches_them(cuda, ks, stride):
    """3x3/5x5 at stride 1 and 2 in NHWC take dwconv2d_nhwc_k_kernel: C = 264 (two groups of channel vectors,
    the second mostly idle), W_out 33 (17) no multiple of the 4-output tile, asymmetric padding."""
    from iron.std import conv as C

    assert C.dw_nhwc_ks(ks, ks, (stride, stride), (1, 1))
    rng = np.random.default_rng(ks + 10)
    c = 264
    x = rng.standard_normal((2, 30, 33, c)).astype(np.float16)
    w = rng.standard_normal((c, 1, ks, ks)).astype(np.float16)
    b = rng.standard_normal(c).astype(np.float16)
    ph, pw = ks // 2, ks // 2 + 1
    ho, wo = (30 + 2 * ph - ks) // stride + 1, (33 + 2 * pw - ks) // stride + 1
    xp = np.pad(x.astype(np.float64), ((0, 0), (ph, ph), (pw, pw), (0, 0)))
    want = np.zeros((2, ho, wo, c)) + b.astype(np.float64)
    for i in range(ks):
        for j in range(ks):
            win = xp[:, i:i + stride * (ho - 1) + 1:stride, j:j + stride * (wo - 1) + 1:stride, :]
            want += win * w[:, 0, i, j].astype(np.float64)
    got = C.depthwise_conv2d(x, w, b, stride=stride, padding=(ph, pw), layout="NHWC", backend="cuda")
    got = got.astype(np.float64)
    scale = np.abs(xp).max() * np.abs(w.astype(np.float64)).sum(axis=(1, 2, 3)).max() + np.abs(b).max()
    assert got.shape == want.shape
    assert np.max(np.abs(got - want) / (np.abs(want) + 1e-3 * scale)) < 2.0 ** -9


@pytest.mark.parametrize("m,n,k,transpose_b,act", [(4096, 4096, 4096, False, None), (2049, 4104, 264, True, "silu"),
                                                   (300, 520, 200, True, "gelu_tanh"), (129, 257, 72, False, "relu"),
                                                   (1, 3, 5, True, None), (512, 11008, 264, True, "relu")])
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_gemm_on_warpgroups(cuda, m, n, k, transpose_b, act, dtype):
    """The host runs gemm_ws on the H200 from 256 output tiles up (the first two: warp roles and tile copies,
    a tail past 16 x 16 tiles), below that in clusters of two for B given (n, k) (300 rows: the second group
    of the last pair has no rows; 512 x 11008: 168-wide tiles), and gemm_wg where tile copies cannot read the
    operands (129 x 257: rows of B not whole 16-byte chunks; wgmma from swizzled tiles): every tail, both
    layouts of B."""
    import ml_dtypes

    from iron.core import dtypes as D
    from iron.harness.tolerance import compare, derive_tolerance
    from iron.std import gemm as GM
    from iron.std.suite import gemm as GS

    nd = np.float16 if dtype == "f16" else ml_dtypes.bfloat16
    rng = np.random.default_rng(m + n + k)
    a = rng.standard_normal((m, k)).astype(nd)
    b = rng.standard_normal((k, n)).astype(nd)
    bias = rng.standard_normal(n).astype(nd) if act else None
    got = GM.gemm(a, np.ascontiguousarray(b.T) if transpose_b else b, bias, act, backend="cuda",
                  transpose_b=transpose_b)
    oracle = GS.make_oracle(False, bias is not None, act or "none")
    want = oracle(a.astype(np.float64), b.astype(np.float64), None if bias is None else bias.astype(np.float64), None,
                  m, n, k)
    tol = derive_tolerance(D.from_numpy(a.dtype), GS.gemm_depth(k, bias is not None, act or "none"))
    verdict = compare(np.asarray(got), want, tol)
    assert verdict.ok, verdict.message


@pytest.mark.parametrize("m,n,k,act", [(16, 4096, 4096, None), (2, 6144, 4096, None), (5, 131, 200, "silu"),
                                       (16, 28672, 264, "gelu_tanh"), (9, 72, 8, None)])
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_gemm_of_a_few_rows(cuda, m, n, k, act, dtype):
    """2 to 16 rows against an (n, k) weight take gemm_few on mma.sync devices (32 columns a group and 6 stages up to
    4096 columns, 64 past): whole 16-byte rows and ragged ones, a bias and activation, K of one chunk."""
    import ml_dtypes

    from iron.core import dtypes as D
    from iron.harness.tolerance import compare, derive_tolerance
    from iron.std import gemm as GM
    from iron.std.suite import gemm as GS

    nd = np.float16 if dtype == "f16" else ml_dtypes.bfloat16
    rng = np.random.default_rng(m + n + k)
    a = rng.standard_normal((m, k)).astype(nd)
    w = rng.standard_normal((n, k)).astype(nd)
    bias = rng.standard_normal(n).astype(nd) if act else None
    got = GM.gemm(a, w, bias, act, backend="cuda", transpose_b=True)
    oracle = GS.make_oracle(True, bias is not None, act or "none")
    want = oracle(a.astype(np.float64), w.astype(np.float64), None if bias is None else bias.astype(np.float64), None,
                  m, n, k)
    tol = derive_tolerance(D.from_numpy(a.dtype), GS.gemm_depth(k, bias is not None, act or "none"))
    verdict = compare(np.asarray(got), want, tol)
    assert verdict.ok, verdict.message


def test_gemm_refuses_operands_off_a_16_byte_boundary_but_not_one_row(cuda):
    """The tile kernels copy 16-byte pieces of A and B and store 16-byte pieces of C: a view that starts mid-vector
    is a clear error, not a misaligned-address fault; one row (gemv, which checks alignment itself) still runs on
    it."""
    import torch

    from iron import LaunchError
    from iron.std import gemm as GM

    w = torch.randn(64 * 32 + 1, device="cuda", dtype=torch.bfloat16)[1:].view(64, 32)
    with pytest.raises(LaunchError, match="16-byte boundaries"):
        GM.gemm(torch.randn(4, 32, device="cuda", dtype=torch.bfloat16), w, transpose_b=True)
    out = torch.zeros(4 * 64 + 1, device="cuda", dtype=torch.bfloat16)[1:].view(4, 64)  # its 16-byte stores
    with pytest.raises(LaunchError, match="16-byte boundaries"):
        GM.gemm(torch.randn(4, 32, device="cuda", dtype=torch.bfloat16), w.clone(), out=out, transpose_b=True)
    assert not out.any(), "nothing was written"
    x = torch.randn(1, 32, device="cuda", dtype=torch.bfloat16)
    got = GM.gemm(x, w, transpose_b=True)
    want = x.float() @ w.float().T
    assert float((got.float() - want).abs().max()) <= 2.0 ** -7 * float(want.abs().max())


@pytest.mark.parametrize("qtype,m,k", [(q, m, k) for q in ("Q8_0", "Q4_0", "Q4_K")
                                        for m, k in [(4096, 4096), (11008, 4096), (3, 11008)]]
                         + [("Q8_0", 5, 4384), ("Q4_0", 5, 4384)])
def test_quant_gemv_with_the_hosts_split(cuda, qtype, m, k):
    """The host's kernel (Q8_0's and Q4_K's word kernels; Q4_0's byte kernel, and Q8_0's at 5 x 137 blocks, an odd
    count) with split_for's teams on the suite's blocks (random past a million weights), against float64 ``W @ x``
    with W gguf's own dequantisation (the registered oracle)."""
    from iron.core import dtypes as D
    from iron.harness.tolerance import compare, derive_tolerance
    from iron.std import quant_gemv as Q
    from iron.std.suite import gguf as SG
    from iron.std.suite import quant_gemv as SQ

    rng = np.random.default_rng(m + k)
    data = SG.make_data(rng, qtype, m, k)
    x = rng.standard_normal(k).astype(np.float16)
    sc = Q.scheme_for(data, qtype, m, k)
    split = Q.split_for(m, k, qtype, sc)
    got = Q.quant_gemv(data, qtype, x, m, k, backend="cuda")
    want = SQ.oracle_of(qtype, m, k)(data, x.astype(np.float64), None, m, k, split)
    verdict = compare(got, want, derive_tolerance(D.f16, SQ.depth(qtype, k, 32, split, sc.kernel.name)))
    assert verdict.ok, verdict.message


def test_quant_gemv_q4_k_forms_give_the_same_bits(cuda):
    """Q4_K's "pieces" order on the GPU gives the host's "halves" bits at a Llama shape, with the host's split."""
    import torch

    from iron.std import quant_gemv as Q
    from iron.std.suite import gguf as SG

    m, k = 4096, 4096
    rng = np.random.default_rng(7)
    data = torch.from_numpy(SG.make_data(rng, "Q4_K", m, k)).cuda()
    words = Q.kernel_data(data, Q.SCHEMES["Q4_K"])
    x = torch.from_numpy(rng.standard_normal(k).astype(np.float32)).cuda().to(torch.bfloat16)
    sc = Q.SCHEMES["Q4_K"]
    split = Q.split_for(m, k, "Q4_K")
    grid = (Q.grid_for(m, split, sc.rows),)
    got = []
    for form in ({"ORDER": "halves"}, {"ORDER": "pieces"}):
        y = torch.empty(m, dtype=torch.bfloat16, device="cuda")
        Q.gemv_q4_k.variant(T=bf16, **form).launch(words, x, y, m, k, split, grid=grid, group=(Q.GROUP,))
        got.append(y.cpu())
    assert torch.equal(got[0], got[1])


@pytest.mark.parametrize("h_kv,d", [(8, 128), (32, 128), (8, 64)])
def test_decode_attention_short_chunks_take_teams_of_16(cuda, h_kv, d):
    """Batch 1 over a 4K cache: 64-128-key chunks, which the host runs with teams of 16 lanes (8 at D = 64
    in f16: 16 vectors of 8 do not fit a row of 64)."""
    b, h, s = 1, 32, 4096
    gq = A.heads_per_group(h, h_kv)
    assert A.team_lanes(A.decode_chunk(b, h // gq, s), d, 8, "cuda") == (16 if d == 128 else 8)
    rng = np.random.default_rng(h_kv + d)
    q = rng.standard_normal((b, h, d)).astype(np.float16)
    k = rng.standard_normal((b, h_kv, s, d)).astype(np.float16)
    v = rng.standard_normal((b, h_kv, s, d)).astype(np.float16)
    lens = np.array([s - 5], np.int32)
    got = A.decode_attention(q, k, v, lens, backend="cuda").astype(np.float64)
    r = h // h_kv
    for hi in range(h):
        kk = k[0, hi // r, :lens[0]].astype(np.float64)
        w = kk @ q[0, hi].astype(np.float64) / math.sqrt(d)
        p = np.exp(w - w.max())
        want = (p / p.sum()) @ v[0, hi // r, :lens[0]].astype(np.float64)
        assert np.max(np.abs(got[0, hi] - want)) < 2.0 ** -8, hi


def test_torch_cuda_tensors_run_on_cuda_with_no_backend(cuda):
    """backend auto follows the data: torch CUDA tensors run on the CUDA device with no backend=, std picks its
    CUDA-tuned shapes for them, and a user kernel launched on them does the same."""
    torch = pytest.importorskip("torch")
    from iron import runtime
    from iron.std import elementwise, softmax

    x = torch.randn(4096, device="cuda", dtype=torch.float16)
    got = elementwise.unary("exp", x)
    assert got.is_cuda and torch.allclose(got.float(), torch.exp(x.float()), rtol=2e-3, atol=1e-3)
    s = torch.randn(64, 1000, device="cuda")
    assert torch.allclose(softmax.softmax(s), torch.softmax(s, -1), atol=1e-6)
    hopper = runs_roles(cuda.profile)  # warp roles and warpgroup multiplies: attention_ws's 128 queries a group
    assert A.prefill_block(None, (x,)) == (128 if hopper else 64) and A.prefill_block(None, (np.zeros(1),)) == 16
    a = torch.arange(256, dtype=torch.float32, device="cuda")
    b = torch.empty_like(a)
    twice[256](a, b)
    assert torch.equal(b, 2 * a) and "cuda" in runtime._devices


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("shape", [(4, 64, 20, 20, 96, 3, 1, 1, 1), (2, 64, 15, 17, 64, 3, 2, 1, 4),
                                   (2, 128, 9, 9, 256, 1, 1, 0, 1), (3, 80, 1, 301, 384, 3, 2, 1, 1)], ids=str)
def test_conv2d_matrix_path_against_cudnn(cuda, shape, layout):
    """conv2d on torch CUDA tensors (the implicit GEMM, or gemm for channels-last 1 x 1): groups, a residual and
    relu fused, both layouts, against torch's own convolution in float64."""
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F

    from iron.std import conv as C

    n, c, h, wd, co, k, stride, pad, groups = shape
    kh = 1 if h == 1 else k
    gen = torch.Generator(device="cuda").manual_seed(sum(shape))
    x = torch.randn(n, c, h, wd, device="cuda", dtype=torch.bfloat16, generator=gen)
    w = torch.randn(co, c // groups, kh, k, device="cuda", dtype=torch.bfloat16, generator=gen) / (c * k) ** 0.5
    b = torch.randn(co, device="cuda", dtype=torch.bfloat16, generator=gen)
    pads = (0 if h == 1 else pad, pad)
    ref = F.conv2d(x.double(), w.double(), b.double(), (1 if h == 1 else stride, stride), pads, 1, groups)
    res = torch.randn(ref.shape, device="cuda", dtype=torch.bfloat16, generator=gen)
    want = torch.relu(ref + res.double())
    if layout == "NHWC":
        got = C.conv2d(x.permute(0, 2, 3, 1).contiguous(), w.permute(0, 2, 3, 1).contiguous(), b,
                       (1 if h == 1 else stride, stride), pads, layout="NHWC", groups=groups, activation="relu",
                       residual=res.permute(0, 2, 3, 1).contiguous()).permute(0, 3, 1, 2)
    else:
        got = C.conv2d(x, w, b, (1 if h == 1 else stride, stride), pads, groups=groups, activation="relu",
                       residual=res)
    # f32 sums rounded once to bf16 (2**-8 relative) against the float64 result
    assert (got.double() - want).abs().max().item() <= 2.0 ** -7 * want.abs().max().item()


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_conv2d_k_ranges_against_cudnn(cuda, layout, monkeypatch):
    """ResNet's 512 channels at 7 x 7 with conv_ws's K split on (WS_PLAN; Hopper): conv_ws's ranges, then
    conv_ws_finish with the bias, residual and relu, against torch's convolution in float64."""
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F

    from iron.std import conv as C
    from iron.std import conv_ws as W

    if not runs_roles(cuda.profile):
        pytest.skip("conv_ws needs warp roles and tile copies (sm_90)")
    monkeypatch.setitem(W.WS_PLAN, "split", 1)
    assert W.conv_ws_config(8, 7, 7, 512, 1, 0, 72)["SPLIT"] == 4
    gen = torch.Generator(device="cuda").manual_seed(5)
    x = torch.randn(8, 512, 7, 7, device="cuda", dtype=torch.bfloat16, generator=gen)
    w = torch.randn(512, 512, 3, 3, device="cuda", dtype=torch.bfloat16, generator=gen) / (512 * 9) ** 0.5
    b = torch.randn(512, device="cuda", dtype=torch.bfloat16, generator=gen)
    res = torch.randn(8, 512, 7, 7, device="cuda", dtype=torch.bfloat16, generator=gen)
    want = torch.relu(F.conv2d(x.double(), w.double(), b.double(), 1, 1) + res.double())
    if layout == "NHWC":
        got = C.conv2d(x.permute(0, 2, 3, 1).contiguous(), w.permute(0, 2, 3, 1).contiguous(), b, 1, 1, layout="NHWC",
                       activation="relu", residual=res.permute(0, 2, 3, 1).contiguous()).permute(0, 3, 1, 2)
    else:
        got = C.conv2d(x, w, b, 1, 1, activation="relu", residual=res)
    assert (got.double() - want).abs().max().item() <= 2.0 ** -7 * want.abs().max().item()


@pytest.mark.parametrize("m,n,k", [(512, 1024, 512), (300, 520, 256), (1024, 2048, 384), (2048, 4104, 272)])
@pytest.mark.parametrize("fast_accum", [False, True], ids=["fold", "fast"])
def test_scaled_mm_with_the_hosts_configuration(cuda, m, n, k, fast_accum):
    """scaled_mm's host choice on Hopper (fp8_config: over few 128 x 256 tiles, folding on 128 or 192 columns
    one group a tile, fast accumulation in clusters of two; else 128 x 256 tiles in persistent groups), against
    the float64 oracle."""
    from iron import bf16
    from iron.core import dtypes as D
    from iron.harness.tolerance import Depth, compare, derive_tolerance
    from iron.std import gemm_fp8 as G
    from iron.std.suite import gemm_fp8 as GS

    rng = np.random.default_rng(m + n + k)
    a = (rng.standard_normal((m, k)) * 4).astype(D.numpy_dtype(D.f8e4m3))
    b = (rng.standard_normal((n, k)) * 4).astype(D.numpy_dtype(D.f8e4m3))
    sa, sb = np.array([0.375], np.float32), np.array([1.5], np.float32)
    got = G.scaled_mm(a, b, sa, sb, out_dtype=bf16, fast_accum=fast_accum, backend="cuda")
    want = GS.fp8_oracle(a.astype(np.float64), b.astype(np.float64), sa, sb, None, m, n, k)
    verdict = compare(np.asarray(got), want, derive_tolerance(bf16, Depth(steps=1, f32_steps=k + 2)))
    assert verdict.ok, verdict.message
