"""iron.std.attention: the registered rows on interp and lavapipe (and at subgroup widths 8 and 64),
mutants of every kernel, four-target compiles, the host functions (values against the float64 oracle on
shapes the registry never uses, errors) and the non-finite policy."""

import math
import re
from pathlib import Path
from types import SimpleNamespace

import ml_dtypes
import numpy as np
import pytest
from std_testing import (TOOLCHAIN_OF, assert_mutant_caught, assert_rows_pass, compile_for, compile_points,
                         edited_module, mutant_rows, run_entry, suite)

import iron
from iron import Depth, config
from iron.core import dtypes as D
from iron.core.errors import UnsupportedOnTarget
from iron.harness.tolerance import compare, derive_tolerance
from iron.std import attention as A
from iron.std import attention_decode as AD
from iron.std import attention_decode_mma as DM
from iron.std import attention_prefill as AP
from iron.std import attention_ws as W
from iron.std.suite import attention as SA

ENTRIES = suite("attention")


def _entry(name: str):
    return next(e for e in ENTRIES if e.name == name)


#: The 48 KB tensor-core prefill, the Hopper one (warpgroup multiplies), decode teams of 16 lanes (lavapipe's
#: subgroups have 8), and the decode on the matrix units (bf16 fragments from shared memory).
NOT_ON_LAVAPIPE = ("std/attention/prefill", "std/attention/prefill_ws", "std/attention/prefill_ws_d256",
                   "std/attention/decode_split_tm16", "std/attention/decode_split_tm16_f32",
                   "std/attention/decode_mma", "std/attention/decode_mma_direct")


@pytest.mark.parametrize("backend", ["interp", "vulkan"])
@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e.name)
def test_registered_rows_pass(entry, backend, seed):
    rows = run_entry(entry, backend, seed)
    if backend == "vulkan" and entry.name in NOT_ON_LAVAPIPE:
        assert rows == []  # registered for interp and cuda only
        return
    assert_rows_pass(rows, seed)


#: The registry shapes that exercise the most: several chunks / query and key blocks with tails, GQA, D 128.
DECODE_SUBSET = SA.DECODE_SHAPES[1:]
PREFILL_SUBSET = [SA.PREFILL_SHAPES[2], SA.PREFILL_SHAPES[4]]
#: Two query tiles of 128 with tails: causal at D 128, and not at D 64 (where alone the sequence's end is masked).
PREFILL_WS_SUBSET = SA.PREFILL_WS_SHAPES[5:7]


def test_teams_of_16_in_subgroups_of_64(seed):
    """A 2-level team butterfly (32, the default, has one); the interpreter runs widths 8, 32 and 64."""
    config.set_option("simd_width", 64)
    for name in ("std/attention/decode_split_tm16", "std/attention/decode_split_tm16_f32"):
        assert_rows_pass(mutant_rows(name, _entry(name).kernel, seed), seed)


@pytest.mark.parametrize("width", [8, 64])
def test_rows_pass_at_other_subgroup_widths(width, seed):
    """8: 16 decode subgroups, 8 small-prefill ones; 64: team butterflies of 3 levels, 2 prefill subgroups."""
    config.set_option("simd_width", width)  # tests/conftest.py clears the override after the test
    # mutant_rows with the real kernel: the registration's rows on a subset of its shapes.
    for name, shapes in (("std/attention/decode_split", DECODE_SUBSET), ("std/attention/prefill", PREFILL_SUBSET),
                         ("std/attention/prefill_small", PREFILL_SUBSET)):
        assert_rows_pass(mutant_rows(name, _entry(name).kernel, seed, shapes=shapes), seed)


# ---------------------------------------------------------------- compiles

#: Where the host launches each kernel: the tensor-core prefill on CUDA only (48 KB of static shared
#: arrays; bf16 fragments read from shared memory, which SPIR-V and HIP store as bits and cannot load).
HOST_TARGETS = {"attention_prefill": ("cuda",), "attention_prefill_ws": ("cuda",), "attention_decode_mma": ("cuda",)}
POINTS = compile_points("attention")


@pytest.mark.parametrize("target,launch", [
    pytest.param(t, launch, id=f"{t}-{launch.kernel.name}-{i}") for i, (_, launch) in enumerate(POINTS)
    for t in HOST_TARGETS.get(launch.kernel.name, tuple(TOOLCHAIN_OF))])
def test_compiles(target, launch, require_toolchain):
    """Every specialisation the tests run, emitted and compiled for each target the host launches it on."""
    require_toolchain(TOOLCHAIN_OF[target])
    compile_for(target, launch)


@pytest.mark.parametrize("target,dtype,d,what", [
    ("spirv", iron.bf16, 64, "bf16 tensor used by matrix fragments"),
    ("spirv", iron.f16, 128, "shared memory reaches"), ("metal", iron.f16, 128, "shared memory reaches")])
def test_tensor_core_prefill_elsewhere_is_a_clear_error(target, dtype, d, what, require_toolchain):
    require_toolchain(TOOLCHAIN_OF[target])
    launch = next(lp for _, lp in POINTS if lp.kernel.name == "attention_prefill" and lp.binding["T"] == dtype
                  and lp.binding["D"] == d)
    with pytest.raises(UnsupportedOnTarget, match=what):
        compile_for(target, launch)


# ---------------------------------------------------------------- mutants

def mutant(tmp_path: Path, kernel: str, old: str, new: str):
    """``kernel`` from a copy of its module (iron/std/attention_decode.py, attention_decode_mma.py,
    attention_prefill.py or attention_ws.py) with every ``old`` replaced by ``new``."""
    module = next(m for m in (AD, DM, AP, W) if hasattr(m, kernel) and getattr(m, kernel).__module__ == m.__name__)
    return getattr(edited_module(module, tmp_path, (old, new), unique=False), kernel)


CAUSAL = ("kj <= qi", "kj < qi")
MUTANTS = [
    ("prefill causal mask off by one", "std/attention/prefill", "attention_prefill", *CAUSAL),
    ("prefill_small causal mask off by one", "std/attention/prefill_small", "attention_prefill_small", *CAUSAL),
    ("prefill: no rescale of the accumulator when the max grows", "std/attention/prefill", "attention_prefill",
     "fma(acc[ch * PER + i], alpha_s[r], fs[r * FLD + e % DC])", "acc[ch * PER + i] + fs[r * FLD + e % DC]"),
    ("prefill_small: no rescale of the accumulator", "std/attention/prefill_small", "attention_prefill_small",
     "os_[e] = os_[e] * alpha_s[e // D]", "os_[e] = os_[e]"),
    ("prefill_ws: causal diagonal off by one", "std/attention/prefill_ws", "attention_prefill_ws",
     "diagonal = row0 - k0", "diagonal = row0 - k0 - 1"),
    ("prefill_ws: keys past the sequence end left unmasked", "std/attention/prefill_ws", "attention_prefill_ws",
     "cols=S - k0", "cols=S - k0 + 64"),
    ("prefill_ws: no rescale of the output rows", "std/attention/prefill_ws", "attention_prefill_ws",
     "acc = frag_scale_rows(acc, alpha)", "acc = acc"),
    ("prefill_ws: the running sum not rescaled", "std/attention/prefill_ws", "attention_prefill_ws",
     "l * alpha + frag_row_sum(p)", "l + frag_row_sum(p)"),
    ("prefill_ws: the weights' max left unscaled", "std/attention/prefill_ws", "attention_prefill_ws",
     "sc * sl2 - m_new * sl2", "sc * sl2 - m_new"),
    ("decode ignores seq_lens", "std/attention/decode_split", "attention_decode_split",
     "seq = min(max(seq_lens[b], 0), S_max)", "seq = S_max"),
    ("decode: wrong GQA head mapping", "std/attention/decode_split", "attention_decode_split",
     "h0 // (H // H_kv), start", "h0 % H_kv, start"),
    ("prefill_ws ping-pong: warpgroup 0's first turn never opened (a hang)", "std/attention/prefill_ws",
     "attention_prefill_ws", "    if wg == 1 and turn0 == 0:\n        pass_turn(turn, wg)",
     "    if wg == 2 and turn0 == 0:\n        pass_turn(turn, wg)"),
    ("prefill_ws ping-pong: the output rows not rescaled after a block", "std/attention/prefill_ws",
     "attention_prefill_ws", "        acc = frag_scale_rows(acc, alpha)  # no multiply in flight", "        # "),
    ("decode: no rescale of a team's accumulator when the max grows", "std/attention/decode_split",
     "attention_decode_split", "acc[g * E + e] = acc[g * E + e] * alpha", "acc[g * E + e] = acc[g * E + e]"),
    ("decode: team butterfly drops the partner's accumulator", "std/attention/decode_split", "attention_decode_split",
     "acc[g * E + e] * a0 + simd_shuffle_xor(acc[g * E + e], mask) * a1", "acc[g * E + e] * a0"),
    ("decode: a key past the chunk (U > 1) is not masked", "std/attention/decode_split",
     "attention_decode_split", "sc[u * GQ + g] = select(j0 + u * TEAMS < end, s, NEG)", "sc[u * GQ + g] = s"),
    ("decode: the block's sum of weights drops its last key", "std/attention/decode_split",
     "attention_decode_split", "                tot += p\n", "                tot += p * f32(u < U - 1)\n"),
    ("decode TM=16: the score butterfly stops a level short", "std/attention/decode_split_tm16",
     "attention_decode_split", "LEVELS = 3 if TM == 8 else 4", "LEVELS = 3"),
    ("decode_mma: keys past the chunk's end left unmasked", "std/attention/decode_mma", "attention_decode_mma",
     "sc = frag_mask(sc, NEG, cols=end - k0)", "sc = sc"),
    ("decode_mma: the output not rescaled when the max grows", "std/attention/decode_mma", "attention_decode_mma",
     "o0 = mma(pa, frag_b(vp, base, LD, 16, 16), frag_scale_rows(o0, alpha))",
     "o0 = mma(pa, frag_b(vp, base, LD, 16, 16), o0)"),
    ("decode_mma: a subgroup's share merged without its weight", "std/attention/decode_mma", "attention_decode_mma",
     "    part = frag_scale_rows(o, f)", "    part = o"),
    ("decode_mma: the ring refilled one block early (a race)", "std/attention/decode_mma", "attention_decode_mma",
     "        ahead = j + STAGES - 1", "        ahead = j + STAGES"),
    ("decode_mma PAR: the last subgroup's slice left out of the sum", "std/attention/decode_mma",
     "attention_decode_mma", "            for w in static_range(1, SUBS):\n                acc = acc + out_s",
     "            for w in static_range(1, SUBS - 1):\n                acc = acc + out_s"),
    ("combine drops the last chunk", "std/attention/decode_combine", "attention_decode_combine",
     "            for c in range(NCH):\n                w =", "            for c in range(NCH - 1):\n                w ="),
    ("combine TILED: a tile's last chunk past the unrolled ones dropped", "std/attention/decode_combine_tiled",
     "attention_decode_combine", "                while c < n:\n", "                while c < n - 1:\n"),
    ("combine TILED: every tile weighed with the first tile's LSEs", "std/attention/decode_combine_tiled",
     "attention_decode_combine", "                if NCH > COMBINE_GROUP:\n", "                if NCH > 4 * COMBINE_GROUP:\n"),
    ("combine TILED: a tile's weights overwritten while others read them", "std/attention/decode_combine_tiled",
     "attention_decode_combine", "            barrier()  # everyone read the last tile's weights\n", "\n"),
    ("decode_mma DIRECT: every head group writes the first group's rows", "std/attention/decode_mma_direct",
     "attention_decode_mma", "            o[(b * H + h0) * D + i] = T(acc)", "            o[b * H * D + i] = T(acc)"),
]


@pytest.mark.parametrize("what,name,kernel,old,new", MUTANTS, ids=[m[0] for m in MUTANTS])
def test_mutant_is_caught(what, name, kernel, old, new, tmp_path, seed):
    subset = {"std/attention/prefill": PREFILL_SUBSET, "std/attention/prefill_small": PREFILL_SUBSET,
              "std/attention/prefill_ws": PREFILL_WS_SUBSET, "std/attention/decode_split": DECODE_SUBSET}.get(name)
    assert_mutant_caught(name, mutant(tmp_path, kernel, old, new), seed, shapes=subset)


# ---------------------------------------------------------------- host functions

BF16 = np.dtype(ml_dtypes.bfloat16)


def _randn(rng, shape, dtype):
    return rng.standard_normal(shape, dtype=np.float32).astype(dtype)


def _check(got, expect, dtype, depth):
    verdict = compare(got, expect, derive_tolerance(D.from_numpy(np.dtype(dtype)), depth))
    assert verdict.ok, verdict.message


def _decode_expect(q, k, v, lens, scale):
    h = q.shape[1]
    s_max = k.shape[2]
    mask = (np.arange(s_max)[None, :] < np.asarray(lens)[:, None])[:, None, None, :]
    f = lambda x: x.astype(np.float64)  # noqa: E731
    out, mag, _ = SA.attention_reference(f(q)[:, :, None, :], SA.expand_kv(f(k), h), SA.expand_kv(f(v), h), scale,
                                         mask)
    return SA.Expect(out[:, :, 0, :], mag[:, :, 0, :])


def _decode_depth(q, k, scale, ch):
    """The split's chain (f32 partials), the combine's over its chunks, one rounding to T."""
    a = SA.score_magnitude(q.astype(np.float64)[:, :, None, :], SA.expand_kv(k.astype(np.float64), q.shape[1]),
                           scale)
    split = SA.decode_depth(q.shape[-1], a, ch)
    nch = -(-k.shape[2] // ch)
    # The combine: |lse_c - M| <= the spread of the chunk LSEs, bounded by 2 A log2(e) + log2(CH).
    spread = 2 * a / math.log(2.0) + math.log2(ch)
    return Depth(steps=1, f32_steps=split.f32_steps + math.ceil(2 * (math.log(2.0) * spread + 2)) + 2 * nch + 1)


@pytest.mark.parametrize("backend", ["interp", "vulkan"])
@pytest.mark.parametrize("dtype,shape,chunk", [
    (np.float16, (3, 6, 2, 300, 128), None),     # H/H_kv = 3 (GQ = 1), the host's chunk
    (BF16, (2, 4, 1, 77, 64), 24),               # GQ = 2 of 4, a chunk that is no multiple of 16
    (np.float32, (1, 2, 2, 5, 64), None),        # f32, fewer keys than teams
])
def test_decode_attention_matches_oracle(backend, dtype, shape, chunk):
    b, h, h_kv, s_max, d = shape
    rng = np.random.default_rng(7)
    q, k, v = _randn(rng, (b, h, d), dtype), _randn(rng, (b, h_kv, s_max, d), dtype), _randn(
        rng, (b, h_kv, s_max, d), dtype)
    lens = rng.integers(1, s_max + 1, size=b).astype(np.int32)
    lens[0] = s_max
    out = A.decode_attention(q, k, v, lens, backend=backend, chunk=chunk)
    assert out.shape == q.shape and out.dtype == q.dtype
    scale = 1.0 / math.sqrt(d)
    ch = chunk or A.decode_chunk(b, h // A.heads_per_group(h, h_kv), s_max)
    _check(out, _decode_expect(q, k, v, lens, scale), dtype, _decode_depth(q, k, scale, ch))
    again = A.decode_attention(q, k, v, lens, backend=backend, chunk=chunk)
    assert np.array_equal(out.view(np.uint8), again.view(np.uint8)), "decode is not deterministic"


def test_decode_attention_scale_out_and_zero_length():
    rng = np.random.default_rng(3)
    q, k, v = (_randn(rng, s, np.float16) for s in ((2, 2, 64), (2, 1, 40, 64), (2, 1, 40, 64)))
    lens = np.array([0, 17], np.int32)
    out = np.full(q.shape, np.nan, np.float16)
    got = A.decode_attention(q, k, v, lens, scale=0.3, out=out, chunk=16)
    assert got is out
    assert np.all(out[0] == 0), "a sequence of length 0 gives zeros"
    _check(out[1:], _decode_expect(q[1:], k[1:], v[1:], lens[1:], 0.3), np.float16,
           _decode_depth(q[1:], k[1:], 0.3, 16))


@pytest.mark.parametrize("backend", ["interp", "vulkan"])
def test_decode_attention_takes_a_cache_past_the_index_limit_in_batches(backend, monkeypatch):
    """A cache of more elements than a launch's i32 indices reach is decoded a batch of sequences at a time, on
    views of their rows: with the limit lowered to two and a half sequences' caches, five sequences take three
    launches of two, two and one, and give the bits of one launch over all five (the same chunk)."""
    from iron.std import _host

    b, h, h_kv, s_max, d = 5, 4, 2, 40, 64
    rng = np.random.default_rng(11)
    q, k, v = _randn(rng, (b, h, d), np.float16), _randn(rng, (b, h_kv, s_max, d), np.float16), _randn(
        rng, (b, h_kv, s_max, d), np.float16)
    lens = np.array([40, 1, 33, 17, 40], np.int32)
    whole = A.decode_attention(q, k, v, lens, backend=backend, chunk=16)
    launched = []
    real = A._decode
    monkeypatch.setattr(A, "_decode", lambda fn, q_, *rest: launched.append(q_.shape[0]) or real(fn, q_, *rest))
    monkeypatch.setattr(_host, "MAX_ELEMENTS", 5 * h_kv * s_max * d // 2)
    out = np.full(q.shape, np.nan, np.float16)
    got = A.decode_attention(q, k, v, lens, out=out, backend=backend, chunk=16)
    assert got is out and launched == [2, 2, 1]
    np.testing.assert_array_equal(out.view(np.uint16), whole.view(np.uint16))
    monkeypatch.setattr(_host, "MAX_ELEMENTS", h_kv * s_max * d - 1)
    with pytest.raises(iron.LaunchError, match="one sequence's cache holds H_kv \\* S_max \\* D = 5120 elements"):
        A.decode_attention(q, k, v, lens, out=out, backend=backend, chunk=16)  # as the last call: not planned


def _scatter_pages(k, v, lens, table, pool, page):
    """Pools (pool, page, H_kv, D) holding each sequence's first lens[b] keys and values of the dense caches k, v
    where ``table`` says (key s of sequence b in row s % page of page table[b, s // page]); every other row NaN."""
    _, h_kv, _, d = k.shape
    k_pages, v_pages = (np.full((pool, page, h_kv, d), np.nan, k.dtype) for _ in range(2))
    for i in range(k.shape[0]):
        for s in range(lens[i]):
            k_pages[table[i, s // page], s % page] = k[i, :, s]
            v_pages[table[i, s // page], s % page] = v[i, :, s]
    return k_pages, v_pages


@pytest.mark.parametrize("backend", ["interp", "vulkan"])
@pytest.mark.parametrize("dtype,page,heads,d", [(np.float16, 16, (4, 2), 64), (np.float32, 8, (2, 2), 128)])
def test_decode_attention_paged_reads_what_the_dense_cache_holds(backend, dtype, page, heads, d):
    """Keys scattered over a pool of pages (a shuffled table, spare pages, every unused row NaN) give the dense
    cache's decode bit for bit (the same kernel, chunks and order); then append_paged_kv writes each sequence's
    next key and value where its table says, and a position past the table's reach writes nothing."""
    h, h_kv = heads
    b, width = 3, 5
    s_max = width * page
    rng = np.random.default_rng(page + d)
    lens = np.array([s_max - 1, 1, 2 * page + 3], np.int32)  # one short of full, one token, a page and a bit
    q = _randn(rng, (b, h, d), dtype)
    k, v = _randn(rng, (b, h_kv, s_max, d), dtype), _randn(rng, (b, h_kv, s_max, d), dtype)
    pool = b * width + 2
    table = rng.permutation(pool)[: b * width].reshape(b, width).astype(np.int32)
    k_pages, v_pages = _scatter_pages(k, v, lens, table, pool, page)
    got = A.decode_attention_paged(q, k_pages, v_pages, table, lens, backend=backend)
    np.testing.assert_array_equal(got, A.decode_attention(q, k, v, lens, backend=backend))

    k_new, v_new = _randn(rng, (b, h_kv, d), dtype), _randn(rng, (b, h_kv, d), dtype)
    before = k_pages.copy()
    positions = lens.copy()
    positions[0] = s_max  # past the table's reach: skipped
    A.append_paged_kv(k_new, v_new, k_pages, v_pages, table, positions, backend=backend)
    for i in (1, 2):
        k[i, :, lens[i]], v[i, :, lens[i]] = k_new[i], v_new[i]
        np.testing.assert_array_equal(k_pages[table[i, lens[i] // page], lens[i] % page], k_new[i])
    written = np.zeros(pool * page, bool)
    written[[table[i, lens[i] // page] * page + lens[i] % page for i in (1, 2)]] = True
    np.testing.assert_array_equal(k_pages.reshape(pool * page, -1)[~written], before.reshape(pool * page, -1)[~written])
    grown = np.minimum(lens + 1, s_max - 1).astype(np.int32)
    np.testing.assert_array_equal(A.decode_attention_paged(q, k_pages, v_pages, table, grown, backend=backend),
                                  A.decode_attention(q, k, v, grown, backend=backend))


@pytest.mark.parametrize("par", [0, 1], ids=["rounds", "par"])
@pytest.mark.parametrize("dtype,shape,page,chunk", [
    (np.float16, (2, 8, 2, 150, 64), 16, None),  # four heads a KV head, the host's chunk, partial blocks
    (BF16, (3, 32, 1, 70, 128), 14, 64),          # 32 heads of one KV head (two groups of 16), pages of 14
    (np.float16, (1, 4, 1, 300, 64), 7, 256),      # 8 blocks a chunk of 7-key pages: the ring wraps on pages
])
def test_decode_on_the_matrix_units(dtype, shape, page, chunk, par, monkeypatch):
    """The host's matrix-unit decode (attention_decode_mma, then the combine; chosen on CUDA, forced here on the
    interpreter), its subgroups merged in turn or in one step (PAR: the same bits): the oracle's values with its
    rounding chain, and over a paged cache (NaN in every unused row) the dense cache's bits."""
    monkeypatch.setattr(A, "decode_on_matrix_units", lambda *args, **kw: True)
    monkeypatch.setitem(A.MMA_PLAN, "PAR", par)
    b, h, h_kv, s_max, d = shape
    rng = np.random.default_rng(s_max)
    q, k, v = _randn(rng, (b, h, d), dtype), _randn(rng, (b, h_kv, s_max, d), dtype), _randn(
        rng, (b, h_kv, s_max, d), dtype)
    lens = rng.integers(1, s_max + 1, size=b).astype(np.int32)
    lens[0] = s_max
    out = A.decode_attention(q, k, v, lens, backend="interp", chunk=chunk)
    if par:
        with monkeypatch.context() as m:
            m.setitem(A.MMA_PLAN, "PAR", 0)
            np.testing.assert_array_equal(out, A.decode_attention(q, k, v, lens, backend="interp", chunk=chunk))
    scale = 1.0 / math.sqrt(d)
    ch = chunk or A.decode_mma_chunk(b, h // min(h // h_kv, DM.DM_ROWS), s_max)
    a = SA.score_magnitude(q.astype(np.float64)[:, :, None, :], SA.expand_kv(k.astype(np.float64), h), scale)
    split = SA.decode_mma_depth(d, a, ch)
    nch = -(-s_max // ch)
    spread = 2 * a / math.log(2.0) + math.log2(ch)
    depth = Depth(steps=split.steps + 1, f32_steps=split.f32_steps + math.ceil(2 * (math.log(2.0) * spread + 2))
                  + 2 * nch + 1)
    _check(out, _decode_expect(q, k, v, lens, scale), dtype, depth)
    width = -(-s_max // page)
    pool = b * width + 1
    table = rng.permutation(pool)[: b * width].reshape(b, width).astype(np.int32)
    k_pages, v_pages = _scatter_pages(k, v, lens, table, pool, page)
    grow = ((0, 0), (0, 0), (0, width * page - s_max), (0, 0))  # the dense cache as long as the table's reach
    dense = A.decode_attention(q, np.pad(k, grow), np.pad(v, grow), lens, backend="interp", chunk=chunk)
    got = A.decode_attention_paged(q, k_pages, v_pages, table, lens, backend="interp", chunk=chunk)
    np.testing.assert_array_equal(got, dense)


@pytest.mark.parametrize("subs,stages", [(2, 3), (4, 4), (2, 6)])
@pytest.mark.parametrize("dtype,shape,page,chunk", [
    (np.float16, (2, 8, 2, 150, 64), 16, None),  # the host's chunk, partial blocks
    (BF16, (3, 32, 1, 70, 128), 14, 64),          # D = 128: eight rows a thread, pages of 14
    (np.float16, (1, 4, 1, 300, 64), 7, 256),      # 7-key pages, the ring wrapping several times a chunk
])
def test_paged_table_read_ahead_gives_the_same_bits(dtype, shape, page, chunk, subs, stages, monkeypatch):
    """MMA_PLAN's TABLE_AHEAD (a paged cache's table entries read a ring block before their copies) gives the plain
    paged decode's bits for every ring shape, and so the dense cache's."""
    monkeypatch.setattr(A, "decode_on_matrix_units", lambda *args, **kw: True)
    monkeypatch.setitem(A.MMA_PLAN, "SUBS", subs)
    monkeypatch.setitem(A.MMA_PLAN, "STAGES", stages)
    b, h, h_kv, s_max, d = shape
    rng = np.random.default_rng(s_max + subs)
    q, k, v = _randn(rng, (b, h, d), dtype), _randn(rng, (b, h_kv, s_max, d), dtype), _randn(
        rng, (b, h_kv, s_max, d), dtype)
    lens = rng.integers(1, s_max + 1, size=b).astype(np.int32)
    lens[0] = s_max
    width = -(-s_max // page)
    table = rng.permutation(b * width + 1)[: b * width].reshape(b, width).astype(np.int32)
    k_pages, v_pages = _scatter_pages(k, v, lens, table, b * width + 1, page)
    monkeypatch.setitem(A.MMA_PLAN, "TABLE_AHEAD", 0)
    plain = A.decode_attention_paged(q, k_pages, v_pages, table, lens, backend="interp", chunk=chunk)
    monkeypatch.setitem(A.MMA_PLAN, "TABLE_AHEAD", 1)
    np.testing.assert_array_equal(A.decode_attention_paged(q, k_pages, v_pages, table, lens, backend="interp",
                                                           chunk=chunk), plain)
    grow = ((0, 0), (0, 0), (0, width * page - s_max), (0, 0))
    np.testing.assert_array_equal(A.decode_attention(q, np.pad(k, grow), np.pad(v, grow), lens, backend="interp",
                                                     chunk=chunk), plain)


def test_paged_read_ahead_mutant_is_caught(tmp_path, monkeypatch):
    """TABLE_AHEAD reading the entries of the block it just staged, not of the next one, changes the paged decode's
    output: the test above would see it."""
    monkeypatch.setattr(A, "decode_on_matrix_units", lambda *args, **kw: True)
    monkeypatch.setitem(A.MMA_PLAN, "TABLE_AHEAD", 1)
    rng = np.random.default_rng(7)
    b, h, h_kv, s_max, d, page = 1, 4, 1, 300, 64, 7
    q, k, v = (_randn(rng, sh, np.float16) for sh in ((b, h, d), (b, h_kv, s_max, d), (b, h_kv, s_max, d)))
    lens = np.full(b, s_max, np.int32)
    width = -(-s_max // page)
    table = rng.permutation(b * width).reshape(b, width).astype(np.int32)
    k_pages, v_pages = _scatter_pages(k, v, lens, table, b * width, page)
    good = A.decode_attention_paged(q, k_pages, v_pages, table, lens, backend="interp", chunk=256)
    monkeypatch.setattr(A, "attention_decode_mma", mutant(tmp_path, "attention_decode_mma",
                                                          "start + (ahead + 1) * BLOCK, end, tid,",
                                                          "start + ahead * BLOCK, end, tid,"))
    config.touch()  # the call plan recorded above launches the real kernel: not replayed
    bad = A.decode_attention_paged(q, k_pages, v_pages, table, lens, backend="interp", chunk=256)
    assert not np.array_equal(bad, good)


@pytest.mark.parametrize("dtype,shape,chunk", [
    (np.float16, (2, 8, 2, 150, 64), 160),  # one chunk: DIRECT against the combine of one chunk
    (BF16, (3, 32, 8, 70, 128), 16),        # five chunks: the tiled combine on the matrix units' partials
    (np.float16, (2, 2, 2, 270, 64), 2),    # one head a KV head (the FMA split), 135 chunks: two tiles
])
def test_direct_and_tiled_combine_give_the_combines_bits(dtype, shape, chunk, monkeypatch):
    """MMA_PLAN's DIRECT (a launch of one chunk writes the output, no combine) and COMBINE_PLAN's TILED (a group a
    head) make the bits the per-element combine makes, sequences of no keys and of one key among them."""
    monkeypatch.setattr(A, "decode_on_matrix_units", lambda h, h_kv, *args, **kw: h // h_kv >= A.MMA_MIN_HEADS)
    b, h, h_kv, s_max, d = shape
    rng = np.random.default_rng(s_max + chunk)
    q, k, v = (_randn(rng, sh, dtype) for sh in ((b, h, d), (b, h_kv, s_max, d), (b, h_kv, s_max, d)))
    lens = rng.integers(1, s_max + 1, size=b).astype(np.int32)
    lens[0], lens[-1] = 0, 1
    monkeypatch.setitem(A.MMA_PLAN, "DIRECT", 0)
    monkeypatch.setitem(A.COMBINE_PLAN, "tiled_from", 1 << 30)
    want = A.decode_attention(q, k, v, lens, backend="interp", chunk=chunk)
    assert np.isfinite(want.astype(np.float32)).all() and not want[0].any()
    monkeypatch.setitem(A.MMA_PLAN, "DIRECT", 1)
    monkeypatch.setitem(A.COMBINE_PLAN, "tiled_from", 1)
    np.testing.assert_array_equal(A.decode_attention(q, k, v, lens, backend="interp", chunk=chunk), want)


@pytest.mark.parametrize("batch,s_max", [(1, 1024), (1, 4096), (1, 32768), (4, 4096), (4, 32768), (16, 1024),
                                         (16, 4096), (16, 8192), (16, 32768), (64, 4096), (1, 40), (3, 1000)])
def test_decode_mma_chunks_follow_the_plan(batch, s_max):
    """attention_decode_mma's chunks: whole ring blocks, no longer than the cache needs, at least min_chunk keys
    where the cache has them, about MMA_PLAN's groups, and longer than max_chunk only while the (sequence, KV head)
    pairs are fewer than few_pairs, or one wave of them (then one chunk a pair)."""
    plan, heads = A.MMA_PLAN, 8
    block = plan["SUBS"] * DM.DM_KEYS
    ch = A.decode_mma_chunk(batch, heads, s_max)
    pairs, groups = batch * heads, batch * heads * -(-s_max // ch)
    assert ch % block == 0 and ch <= -(-s_max // block) * block
    assert ch >= min(plan["min_chunk"], -(-s_max // block) * block)
    one_wave = plan["few_pairs"] <= pairs <= plan["one_wave"] and s_max <= plan["long_chunk"]
    if one_wave:
        assert ch >= s_max, "one chunk a pair"
    assert ch <= (plan["long_chunk"] if pairs < plan["few_pairs"] or one_wave else plan["max_chunk"])
    if pairs < plan["few_pairs"] and ch < plan["long_chunk"] and ch > plan["min_chunk"]:
        assert plan["groups"] <= groups < 2 * plan["groups"] + pairs, "about the plan's groups"


def test_decode_mma_chunk_lengths_follow_few_pairs_not_the_group_target(monkeypatch):
    """Aiming at more groups (a plan the device tune tries) changes how finely few pairs split, not where chunks may
    grow past max_chunk or where a pair is one chunk: B = 16 with 8 KV heads stays one chunk a pair at 4K keys and
    2048-key chunks at 32K."""
    monkeypatch.setitem(A.MMA_PLAN, "groups", 256)
    assert A.decode_mma_chunk(16, 8, 4096) == 4096
    assert A.decode_mma_chunk(16, 8, 32768) == A.MMA_PLAN["max_chunk"]
    assert A.decode_mma_chunk(1, 8, 4096) == 128  # 256 groups of 128 keys


def test_paged_decode_and_append_reject_bad_input():
    q, pages, table, lens = np.zeros((1, 2, 64), np.float16), np.zeros((4, 16, 1, 64), np.float16), \
        np.zeros((1, 2), np.int32), np.ones(1, np.int32)
    for args, what in (((q, pages, pages, table.astype(np.int64), lens), "block_table must be int32"),
                       ((q, pages, pages[:, :8], table, lens), "v_pages: expected shape"),
                       ((q, pages.astype(np.float32), pages, table, lens), "k_pages is f32, q is f16"),
                       ((q, pages, pages, table[0], lens), "block_table (B, max_pages)")):
        with pytest.raises(iron.LaunchError, match=re.escape(what)):
            A.decode_attention_paged(*args, backend="interp")
    with pytest.raises(iron.LaunchError, match=re.escape("positions must be int32")):
        A.append_paged_kv(q[:, :1], q[:, :1], pages, pages, table, lens.astype(np.int64), backend="interp")


def _prefill_expect(q, k, v, causal, scale):
    h, s = q.shape[1], q.shape[2]
    f = lambda x: x.astype(np.float64)  # noqa: E731
    mask = np.tril(np.ones((s, s), bool)) if causal else None
    out, mag, _ = SA.attention_reference(f(q), SA.expand_kv(f(k), h), SA.expand_kv(f(v), h), scale, mask)
    return SA.Expect(out, mag)


@pytest.mark.parametrize("backend,block,dtype,shape,causal", [
    *((backend, block, *case) for backend, block in [("interp", 128), ("interp", 64), ("interp", 16), ("vulkan", None)]
      for case in [(np.float16, (1, 3, 1, 65, 64), True),       # H/H_kv = 3; one past a 64-query block
                   (BF16, (2, 2, 2, 17, 128), False)]),         # one past a 16-query block, D = 128
    ("interp", 128, BF16, (1, 2, 1, 130, 256), True),           # heads of 256: the Hopper kernel alone
])
def test_prefill_attention_matches_oracle(backend, block, dtype, shape, causal):
    b, h, h_kv, s, d = shape
    rng = np.random.default_rng(11)
    q = _randn(rng, (b, h, s, d), dtype)
    k, v = _randn(rng, (b, h_kv, s, d), dtype), _randn(rng, (b, h_kv, s, d), dtype)
    out = A.prefill_attention(q, k, v, causal=causal, backend=backend, block=block)
    scale = 1.0 / math.sqrt(d)
    a = SA.score_magnitude(q.astype(np.float64), SA.expand_kv(k.astype(np.float64), h), scale)
    _check(out, _prefill_expect(q, k, v, causal, scale), dtype, SA.prefill_depth(d, s, a, 128 if block == 128 else 32))


@pytest.mark.parametrize("backend,block,dtype,lens,heads,d,causal", [
    *((backend, block, *case) for backend, block in [("interp", 128), ("interp", 64), ("interp", 16), ("vulkan", None)]
      for case in [(np.float16, (130, 0, 1, 77), (2, 1), 64, True),   # a sequence past one tile, an empty one, GQA
                   (BF16, (17, 40), (2, 2), 128, False)]),              # tiles past the shorter one's end
    ("interp", 128, BF16, (3, 70), (2, 1), 256, True),                  # heads of 256
])
def test_prefill_attention_varlen_matches_each_sequence_alone(backend, block, dtype, lens, heads, d, causal):
    """Packed sequences (T, H, D) with cu_seqlens give each sequence's prefill_attention: no key of a neighbour is
    seen (a sequence's keys past its end are the next one's rows), no row is left out or written twice."""
    h, h_kv = heads
    cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    rng = np.random.default_rng(len(lens) * d)
    q = _randn(rng, (int(cu[-1]), h, d), dtype)
    k, v = _randn(rng, (int(cu[-1]), h_kv, d), dtype), _randn(rng, (int(cu[-1]), h_kv, d), dtype)
    out = A.prefill_attention_varlen(q, k, v, cu, causal=causal, backend=backend, block=block)
    scale = 1.0 / math.sqrt(d)
    for b, n in enumerate(lens):
        if n == 0:
            continue
        rows = slice(int(cu[b]), int(cu[b + 1]))
        alone = [np.ascontiguousarray(x[rows].transpose(1, 0, 2))[None] for x in (q, k, v)]  # (1, heads, n, D)
        a = SA.score_magnitude(alone[0].astype(np.float64), SA.expand_kv(alone[1].astype(np.float64), h), scale)
        _check(np.ascontiguousarray(out[rows].transpose(1, 0, 2))[None], _prefill_expect(*alone, causal, scale),
               dtype, SA.prefill_depth(d, n, a, 128 if block == 128 else 32))


def _paged_prefill_case(rng, dtype, q_lens, k_lens, heads, d, page, finite_piece=False):
    """Packed queries (the last q_lens[b] tokens of each sequence), each sequence's k_lens[b] keys and values (K, V
    (H_kv, n, D) each) scattered over a pool of pages by a shuffled table with spare pages, every row no sequence
    holds NaN and the table's unused entries out of range (none of them may be read)."""
    h, h_kv = heads
    b = len(q_lens)
    width = max(-(-n // page) for n in k_lens) + 1
    pool = b * width + 2
    table = rng.permutation(pool)[: b * width].reshape(b, width).astype(np.int32)
    k_pages, v_pages = (np.full((pool, page, h_kv, d), np.nan, dtype) for _ in range(2))
    keys = []
    for i, n in enumerate(k_lens):
        kv = [_randn(rng, (h_kv, n, d), dtype) for _ in range(2)]
        for s_ in range(n):
            k_pages[table[i, s_ // page], s_ % page] = kv[0][:, s_]
            v_pages[table[i, s_ // page], s_ % page] = kv[1][:, s_]
        if finite_piece:  # the rest of the last piece the Hopper kernel copies: finite junk (read, weighted 0)
            piece = max(p for p in (16, 64, 128) if page % p == 0)
            for s_ in range(n, min(-(-n // piece) * piece, -(-n // page) * page)):
                k_pages[table[i, s_ // page], s_ % page] = 1e4
                v_pages[table[i, s_ // page], s_ % page] = -1e4
        table[i, -(-n // page):] = -7 if i % 2 else 10 ** 6  # unused: clamped if read, so a read shows in the values
        keys.append(kv)
    cu = np.concatenate([[0], np.cumsum(q_lens)]).astype(np.int32)
    q = _randn(rng, (int(cu[-1]), h, d), dtype)
    return q, k_pages, v_pages, table, cu, np.array(k_lens, np.int32), keys


def _check_paged_prefill(out, q, cu, keys, causal, scale, dtype, block):
    h = q.shape[1]
    for b, (k, v) in enumerate(keys):
        rows = slice(int(cu[b]), int(cu[b + 1]))
        n, nk = rows.stop - rows.start, k.shape[1]
        if n == 0:
            continue
        f = lambda x: x.astype(np.float64)  # noqa: E731
        qb = f(q[rows].transpose(1, 0, 2))[None]
        mask = np.arange(nk)[None, :] <= np.arange(n)[:, None] + (nk - n) if causal else None
        ref, mag, _ = SA.attention_reference(qb, SA.expand_kv(f(k)[None], h), SA.expand_kv(f(v)[None], h), scale,
                                             mask)
        a = SA.score_magnitude(qb, SA.expand_kv(f(k)[None], h), scale)
        _check(np.ascontiguousarray(out[rows].transpose(1, 0, 2))[None], SA.Expect(ref, mag), dtype,
               SA.prefill_depth(q.shape[-1], nk, a, 32))


#: (dtype, q lens, k lens, (H, H_kv), D, P, causal): a chunk after a cached prefix, a whole prompt, an empty
#: query set, a prefix ending inside a page; one token over a page and a bit; queries past a 64-query tile; pages
#: of 128 and 64 keys (the Hopper kernel's longer pieces).
PAGED_PREFILL_CASES = [(np.float16, (5, 0, 17, 20), (20, 3, 17, 21), (4, 2), 64, 16, True),
                       (BF16, (1, 70), (19, 75), (2, 2), 128, 8, True),
                       (np.float16, (9, 3), (12, 40), (2, 1), 64, 32, False),
                       (BF16, (3, 40), (130, 40), (2, 1), 64, 128, True),    # block 128: one piece of 128 a block
                       (np.float16, (7,), (150,), (2, 2), 128, 64, True)]    # two pieces of 64 a block


@pytest.mark.parametrize("backend,block", [("interp", 128), ("interp", 64), ("interp", 16), ("vulkan", None)])
@pytest.mark.parametrize("dtype,q_lens,k_lens,heads,d,page,causal", PAGED_PREFILL_CASES)
def test_prefill_attention_paged_matches_each_sequence_over_its_keys(backend, block, dtype, q_lens, k_lens, heads,
                                                                     d, page, causal):
    """Each sequence's queries (its last tokens) against its keys gathered from the pages, with the bottom-right
    causal mask, in float64: no unused row, page or table entry is read, no neighbour's key seen (block 128 reads
    a sequence's last 16-row piece whole: its unused rows hold finite values there, later ones stay NaN)."""
    if block == 128 and page % W.PAGE_PIECE:
        page = W.PAGE_PIECE  # the Hopper kernel's pages hold a multiple of 16 keys
    rng = np.random.default_rng(sum(k_lens) + d)
    q, k_pages, v_pages, table, cu, lens, keys = _paged_prefill_case(rng, dtype, q_lens, k_lens, heads, d, page,
                                                                     finite_piece=block == 128)
    out = A.prefill_attention_paged(q, k_pages, v_pages, table, cu, lens, causal=causal, backend=backend,
                                    block=block)
    _check_paged_prefill(out, q, cu, keys, causal, 1.0 / math.sqrt(d), dtype, block)


@pytest.mark.parametrize("kernel,block,old,new", [
    ("attention_prefill_small", 16, "kj <= qi + shift", "kj <= qi"),                      # the top-left causal mask
    ("attention_prefill", 64, "(page * P + j % P) * H_kv", "(page * P + j // P) * H_kv"),  # a key's row in its page
    ("attention_prefill_ws", 128, "return select(key < nk, page * P + key % P, rows)",     # pieces past the end
     "return page * P + key % P"),                                                          # read from the page
    ("attention_prefill_ws", 128, "kq0, kd0 = q0 + shift, row0 + shift", "kq0, kd0 = q0, row0"),
])
def test_prefill_attention_paged_mutants_are_caught(kernel, block, old, new, tmp_path, monkeypatch):
    rng = np.random.default_rng(5)
    q, k_pages, v_pages, table, cu, lens, keys = _paged_prefill_case(rng, np.float16, (5, 17), (20, 49), (2, 1), 64,
                                                                     32, finite_piece=True)
    monkeypatch.setattr(A, kernel, mutant(tmp_path, kernel, old, new))
    out = A.prefill_attention_paged(q, k_pages, v_pages, table, cu, lens, backend="interp", block=block)
    with pytest.raises(AssertionError):
        _check_paged_prefill(out, q, cu, keys, True, 1.0 / 8, np.float16, block)


@pytest.mark.parametrize("kernel", ["attention_prefill_small", "attention_prefill_ws"])
def test_paged_kernels_take_dense_queries(kernel):
    """PAGED with q (B, H, S, D) not packed: every sequence's last S tokens as queries (a speculative decode's
    verification step), against the same float64 oracle."""
    rng = np.random.default_rng(9)
    b, h, h_kv, s, d = 2, 2, 1, 5, 64
    q, k_pages, v_pages, table, cu, lens, keys = _paged_prefill_case(rng, np.float16, (s, s), (21, 40), (h, h_kv), d,
                                                                     16, finite_piece=True)
    dense = np.ascontiguousarray(q.reshape(b, s, h, d).transpose(0, 2, 1, 3))
    out = np.zeros_like(dense)
    tail = (lens, table, 16, table.shape[1], k_pages.shape[0])
    if kernel == "attention_prefill_small":
        A.attention_prefill_small.variant(T=iron.f16, D=d, VARLEN=False, PAGED=True).launch(
            dense, k_pages, v_pages, out, cu, s, h, h_kv, 1, np.float32(0.125), *tail, grid=(AP.SNT, b * h),
            group=(AP.SNT,), backend="interp")
    else:
        W.attention_prefill_ws.variant(T=iron.f16, D=d, PAGED=True, **W.FA_DEFAULT).launch(
            dense, k_pages, v_pages, out, cu, s, h, h_kv, b * h, k_pages.shape[0] * 16, 1, np.float32(0.125), *tail,
            grid=(W.FA_THREADS, b * h), group=(W.FA_THREADS,), backend="interp")
    packed = np.ascontiguousarray(out.transpose(0, 2, 1, 3)).reshape(b * s, h, d)
    _check_paged_prefill(packed, q, cu, keys, True, 0.125, np.float16, 16)


@pytest.mark.parametrize("causal,groups", [(True, 2), (False, 4), (False, 1)])
def test_persistent_prefill_walks_every_tile(causal, groups):
    """PERSIST: fewer groups than query tiles (3 heads x 3 tiles of 128), each walking its tiles with the rings and
    turns running on across them, gives the float64 attention on every row."""
    rng = np.random.default_rng(groups)
    b, h, h_kv, s, d = 1, 3, 1, 300, 64
    q = _randn(rng, (b, h, s, d), np.float16)
    k, v = _randn(rng, (b, h_kv, s, d), np.float16), _randn(rng, (b, h_kv, s, d), np.float16)
    out, cu = np.zeros_like(q), np.zeros(1, np.int32)
    W.attention_prefill_ws.variant(T=iron.f16, D=d, **W.FA_DEFAULT, PERSIST=True).launch(
        q, k, v, out, cu, s, h, h_kv, b * h, b * h_kv, int(causal), np.float32(0.125), cu, cu, 16, 1, 1,
        grid=(groups * W.FA_THREADS, 1), group=(W.FA_THREADS,), backend="interp")
    a = SA.score_magnitude(q.astype(np.float64), SA.expand_kv(k.astype(np.float64), h), 0.125)
    _check(out, _prefill_expect(q, k, v, causal, 0.125), np.float16, SA.prefill_depth(d, s, a, 128))


@pytest.mark.parametrize("causal", [True, False])
def test_the_host_runs_persistent_groups_where_told(causal, monkeypatch):
    """prefill_attention on the Hopper kernel with persistent groups (two, for 2 heads x 2 tiles of 128)."""
    monkeypatch.setattr(A, "FA_PERSIST_MASKS", (True, False))
    monkeypatch.setattr(A, "WS_SMS", 2)
    rng = np.random.default_rng(21)
    q = _randn(rng, (1, 2, 190, 64), np.float16)
    k, v = _randn(rng, (1, 1, 190, 64), np.float16), _randn(rng, (1, 1, 190, 64), np.float16)
    out = A.prefill_attention(q, k, v, causal=causal, backend="interp", block=128)
    a = SA.score_magnitude(q.astype(np.float64), SA.expand_kv(k.astype(np.float64), 2), 0.125)
    _check(out, _prefill_expect(q, k, v, causal, 0.125), np.float16, SA.prefill_depth(64, 190, a, 128))


def test_persistent_prefill_without_q_release_hangs_and_says_so(tmp_path):
    """A mutant whose consumers never give Q's tile back: the producer's wait for the next tile cannot pass, which
    the interpreter reports instead of hanging."""
    kern = mutant(tmp_path, "attention_prefill_ws", "        release_slot(q_empty, 0)", "        pass")
    q = np.zeros((1, 2, 130, 64), np.float16)
    cu = np.zeros(1, np.int32)
    with pytest.raises(iron.IronError, match="q_empty"):
        kern.variant(T=iron.f16, D=64, **W.FA_DEFAULT, PERSIST=True).launch(
            q, q[:, :1], q[:, :1], np.zeros_like(q), cu, 130, 2, 1, 2, 1, 0, np.float32(0.125), cu, cu, 16, 1, 1,
            grid=(1 * W.FA_THREADS, 1), group=(W.FA_THREADS,), backend="interp")


def test_prefill_attention_paged_rejects_bad_input():
    q, pages, table, cu, lens = (np.zeros((3, 2, 64), np.float16), np.zeros((4, 16, 1, 64), np.float16),
                                 np.zeros((1, 2), np.int32), np.array([0, 3], np.int32), np.full(1, 3, np.int32))
    for args, kw, what in (((q, pages, pages, table.astype(np.int64), cu, lens), {}, "block_table must be int32"),
                           ((q, pages, pages[:, :8], table, cu, lens), {}, "v_pages: expected shape"),
                           ((q, pages.astype(np.float32), pages, table, cu, lens), {}, "k_pages must be f16"),
                           ((q, pages, pages, table, cu[:1], lens), {}, "block_table: expected shape"),
                           ((q, pages, pages, table, np.array([0, 2], np.int32), lens), {}, "run from 0 to T = 3"),
                           ((q, pages[:, :8], pages[:, :8], table, cu, lens), {"block": 128},
                            "a multiple of 16 keys")):
        with pytest.raises(iron.LaunchError, match=re.escape(what)):
            A.prefill_attention_paged(*args, backend="interp", **kw)


def test_prefill_attention_varlen_checks_cu_seqlens_and_trusts_max_seqlen():
    q = np.zeros((10, 2, 64), np.float16)
    for cu, what in ((np.array([0, 4, 3, 10], np.int32), "without decreasing"),
                     (np.array([0, 4, 9], np.int32), "from 0 to T = 10"),
                     (np.array([0, 4, 10], np.int64), "must be int32"),
                     (np.zeros((2, 2), np.int32), "must be (B + 1,)")):
        with pytest.raises(iron.LaunchError, match=re.escape(what)):
            A.prefill_attention_varlen(q, q, q, cu, backend="interp")
    with pytest.raises(iron.LaunchError, match=re.escape("q must be (T, H, D)")):
        A.prefill_attention_varlen(q[None], q, q, np.array([0, 10], np.int32), backend="interp")
    rng = np.random.default_rng(3)
    q, k, v = (_randn(rng, (40, 2, 64), np.float16) for _ in range(3))
    cu = np.array([0, 20, 40], np.int32)
    full = A.prefill_attention_varlen(q, k, v, cu, backend="interp")
    np.testing.assert_array_equal(A.prefill_attention_varlen(q, k, v, cu, max_seqlen=20, backend="interp"), full)
    short = A.prefill_attention_varlen(q, k, v, cu, max_seqlen=16, out=np.zeros_like(q), backend="interp")
    np.testing.assert_array_equal(short[:16], full[:16])
    assert not short[16:20].any()  # a max_seqlen under the longest sequence is trusted: rows past it stay as given


def test_prefill_attention_custom_scale_and_out():
    rng = np.random.default_rng(5)
    q, k, v = (_randn(rng, (1, 2, 9, 64), np.float16) for _ in range(3))
    out = np.empty_like(q)
    assert A.prefill_attention(q, k, v, causal=False, scale=0.05, out=out, backend="interp") is out
    a = SA.score_magnitude(q.astype(np.float64), k.astype(np.float64), 0.05)
    _check(out, _prefill_expect(q, k, v, False, 0.05), np.float16, SA.prefill_depth(64, 9, a))


# ---------------------------------------------------------------- errors

def _decode_inputs(d=64, dtype=np.float16):
    return (np.zeros((1, 2, d), dtype), np.zeros((1, 1, 8, d), dtype), np.zeros((1, 1, 8, d), dtype),
            np.full(1, 8, np.int32))


@pytest.mark.parametrize("change,message", [
    (lambda a: (np.zeros((1, 2, 96), np.float16), np.zeros((1, 1, 8, 96), np.float16),
                np.zeros((1, 1, 8, 96), np.float16), a[3]), "D must be 64 or 128"),
    (lambda a: (np.zeros((1, 3, 64), np.float16), np.zeros((1, 2, 8, 64), np.float16),
                np.zeros((1, 2, 8, 64), np.float16), a[3]), "multiple of H_kv"),
    (lambda a: (a[0], a[1].astype(np.float32), *a[2:]), "k_cache is f32"),
    (lambda a: (*a[:3], np.full(1, 8, np.int64)), "seq_lens must be int32"),
    (lambda a: (*a[:3], np.full(2, 8, np.int32)), "seq_lens: expected shape"),
    (lambda a: (a[0], a[1], np.zeros((1, 1, 9, 64), np.float16), a[3]), "v_cache: expected shape"),
    (lambda a: (a[0][0], *a[1:]), "q must be (B, H, D)"),
    (lambda a: (np.zeros((1, 2, 64), np.int32), *a[1:]), "takes f32, f16 or bf16"),
    (lambda a: ([1.0], *a[1:]), "expected an array"),
])
def test_decode_attention_rejects_bad_input(change, message):
    with pytest.raises(iron.LaunchError, match=re.escape(message)):
        A.decode_attention(*change(_decode_inputs()), backend="interp")


def test_decode_plan_takes_teams_of_16_for_short_chunks_on_cuda_only():
    """TM 16 needs CUDA (16-lane subgroups), chunks of at most SHORT_CHUNK keys and D a multiple of 16
    vectors; U follows the team width (tests/gpu runs the plan on the H200)."""
    assert A.team_lanes(A.SHORT_CHUNK, 128, 8, "cuda") == 16 and A.team_lanes(64, 64, 4, "cuda") == 16
    assert A.team_lanes(A.SHORT_CHUNK + 16, 128, 8, "cuda") == A.TEAM
    assert A.team_lanes(64, 64, 8, "cuda") == A.TEAM  # 16 lanes x 8 elements > D
    assert A.team_lanes(64, 128, 8, "vulkan") == A.TEAM and A.team_lanes(64, 128, 8, "interp") == A.TEAM
    # backend auto follows the data: a device array (torch CUDA tensors export this interface) plans for CUDA
    on_gpu = SimpleNamespace(__cuda_array_interface__={"shape": (1,), "typestr": "<f2", "data": (256, False)})
    # (and where no GPU answers, CUDA's default profile, sm_90, stands in: the Hopper prefill of 128 queries)
    assert A.team_lanes(64, 128, 8, None, (on_gpu,)) == 16 and A.prefill_block(None, (on_gpu,)) == 128
    assert A.team_lanes(64, 128, 8, None, (np.zeros(1),)) == A.TEAM and A.prefill_block(None, (np.zeros(1),)) == 16
    assert [A.keys_in_flight(g, 16) for g in (1, 2)] == [2, 1]
    assert [A.keys_in_flight(g) for g in (1, 2)] == [4, 2]


def test_decode_attention_rejects_bad_out_and_chunk():
    args = _decode_inputs()
    with pytest.raises(iron.LaunchError, match="decode_attention: out has shape"):
        A.decode_attention(*args, out=np.zeros((1, 2, 32), np.float16), backend="interp")
    with pytest.raises(iron.LaunchError, match="chunk must be positive"):
        A.decode_attention(*args, chunk=0, backend="interp")


@pytest.mark.parametrize("change,message", [
    (lambda q, k, v: (q.astype(np.float32), k.astype(np.float32), v.astype(np.float32)), "f16 or bf16"),
    (lambda q, k, v: (q, k[:, :, :5], v), "k: expected shape"),
    (lambda q, k, v: (q, k, v.astype(BF16)), "v is bf16"),
    (lambda q, k, v: (q[0], k, v), "q must be (B, H, S, D)"),
    (lambda q, k, v: (q[:, :, :, :32], k[:, :, :, :32], v[:, :, :, :32]), "D must be 64 or 128"),
])
def test_prefill_attention_rejects_bad_input(change, message):
    q, k, v = (np.zeros((1, 2, 8, 64), np.float16) for _ in range(3))
    with pytest.raises(iron.LaunchError, match=re.escape(message)):
        A.prefill_attention(*change(q, k, v), backend="interp")
    with pytest.raises(iron.LaunchError, match="block must be 16, 64 or 128"):
        A.prefill_attention(q, k, v, block=32, backend="interp")
    wide = np.zeros((1, 2, 8, 256), np.float16)
    with pytest.raises(iron.LaunchError, match="heads of 256 run on the Hopper kernel alone"):
        A.prefill_attention(wide, wide, wide, backend="interp")  # the interpreter's default block is 16
    for scale in (-0.125, 0.0, math.inf, math.nan):  # the Hopper kernel's max before scaling needs scale > 0
        with pytest.raises(iron.LaunchError, match=r"needs 0 < scale < inf"):
            A.prefill_attention(q, k, v, block=128, scale=scale, backend="interp")
        with pytest.raises(iron.LaunchError, match=r"needs 0 < scale < inf"):
            A.prefill_attention(wide, wide, wide, block=128, scale=scale, backend="interp")


# ---------------------------------------------------------------- non-finite inputs

@pytest.mark.parametrize("backend,block", [("interp", 128), ("interp", 64), ("interp", 16), ("vulkan", None)])
def test_prefill_nan_in_v_reaches_the_rows_that_attend_to_it(backend, block):
    """Rows 20.. weight key 20: NaN in its column only.  Earlier rows of a query tile that also walks key
    20's block (of 128 in the Hopper kernel, 32, or 8 in the small kernel) may get it too (0 * NaN); rows of
    tiles that never reach that block (the small kernel's first 16 queries) stay finite."""
    rng = np.random.default_rng(2)
    q, k, v = (_randn(rng, (1, 1, 40, 64), np.float16) for _ in range(3))
    v[0, 0, 20, 3] = np.nan
    out = A.prefill_attention(q, k, v, causal=True, backend=backend, block=block)[0, 0]
    assert np.isnan(out[20:, 3]).all()
    assert not np.isnan(np.delete(out, 3, axis=1)).any()
    if (block or A.prefill_block(backend)) == 16:
        assert not np.isnan(out[:16]).any()


@pytest.mark.parametrize("backend", ["interp", "vulkan"])
def test_decode_non_finite_policy(backend):
    rng = np.random.default_rng(4)
    q, k, v = (_randn(rng, s, np.float16) for s in ((2, 2, 64), (2, 2, 50, 64), (2, 2, 50, 64)))
    k[:, :, 45:] = np.inf           # past both sequences' lengths: never read
    v[:, :, 45:] = np.nan
    q[1, 0, 0] = np.inf             # an infinite query: its head is NaN
    out = A.decode_attention(q, k, v, np.array([45, 30], np.int32), backend=backend, chunk=16)
    assert np.isfinite(out[0]).all() and np.isfinite(out[1, 1]).all()
    assert np.isnan(out[1, 0]).all()


# ---------------------------------------------------------------- the Hopper prefill's binary

@pytest.mark.parametrize("d,binding", [(128, W.FA_DEFAULT), (64, W.FA_DEFAULT), (256, W.FA_WIDE),
                                       (128, {"BK": 128, "STAGES": 2, "OVERLAP": False}),
                                       (128, {**W.FA_DEFAULT, "PERSIST": True}),
                                       (128, {"BK": 64, "STAGES": 3, "OVERLAP": True}),
                                       (64, {"BK": 64, "STAGES": 3, "OVERLAP": True})],
                         ids=["host-128", "host-64", "host-256", "no-turns-128", "persistent-128", "overlap-128",
                              "overlap-64"])
def test_hopper_prefill_keeps_its_registers_budgets_and_pipeline(binding, d, require_toolchain):
    """For sm_90a (NVRTC here): the roles' budgets kept, no serialised multiplies, no spills (the running max and
    sum held per row: written per element they spilled), and a main loop of D/16 HGMMA 64xBKx16 for S and BK/16
    HGMMA 64xDx16 with A from registers for P V, and no block barrier."""
    from iron.codegen.emit import emit_kernel
    from iron.codegen.toolchains import nvrtc, sass

    require_toolchain("nvrtc")
    kern = W.attention_prefill_ws.variant(T=iron.bf16, D=d, **binding)
    built = nvrtc.build(emit_kernel(kern.compiled("cuda"), "cuda").source, arch="sm_90")
    report = built.report
    (kernel,) = report["kernels"].values()
    assert report["arch"] == "sm_90a" and not report["setmaxnreg_ignored"] and report["wgmma_serialized"] == {}
    assert kernel["stack_bytes"] == kernel["spill_stores"] == kernel["spill_loads"] == 0
    if sass.nvdisasm() is None:
        pytest.skip(f"nvdisasm is not installed: {sass.INSTALL}")
    loops = [loop for loop in sass.loops(sass.disassemble(built.binary))
             if any(i.opcode.startswith("HGMMA") for i in loop)]
    bk = binding["BK"]
    # the innermost loop with both products (the mbarrier waits' retries jump back from the function's end, so
    # some "loops" span it whole)
    main = min((loop for loop in loops if len({"tnspB" in i.operands for i in loop if i.opcode.startswith("HGMMA")})
                == 2), key=len)
    multiplies = [i for i in main if i.opcode.startswith("HGMMA")]
    scores = [i.opcode for i in multiplies if "tnspB" not in i.operands]  # A and B from shared memory
    products = [i.opcode for i in multiplies if "tnspB" in i.operands]  # A from registers, V k-by-n
    assert scores == [f"HGMMA.64x{bk}x16.F32.BF16"] * (d // 16)
    assert products == [f"HGMMA.64x{d}x16.F32.BF16"] * (bk // 16)
    assert not [i for i in main if i.opcode.startswith("BAR.")], "a block barrier in the main loop"
