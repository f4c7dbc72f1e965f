"""Tests and benches of :mod:`iron.std.attention`: float64 oracles, tolerances from the rounding chain.

Error model (u = one f32 rounding; every count below is a Depth step, relative to the Expect scale
``sum_j w_j |v_j|``, the softmax-weighted magnitude of V, because an output's error is relative to the
terms it averages, not to a result that may cancel):

* a score ``s = scale q.k`` carries an absolute error of at most (dot-product roundings) * u * A,
  ``A = scale sum_i |q_i k_i|``; a weight ``exp(s - m)`` turns it into a relative error of the same
  size; normalising (numerator and denominator) doubles it: ``2 * (dot + a few) * A`` steps.  The
  rescaling factors ``2^(m_old - m_new)`` multiply the accumulator and the sum ``l`` alike, so their
  own error cancels in ``acc / l``; only their multiplications (one rounding each) count;
* the sums: the running ``l`` and the accumulator take one or two roundings per key (or per block);
* f16/bf16: P is rounded to T before P V (its relative error u_T per weight, and l sums the rounded
  values, so the applied weights stay normalised: 2 steps of T) and the output is rounded once (1).
"""

from __future__ import annotations

import math

import numpy as np

from iron import Depth, Expect, Setup, bench, bf16, f16, f32, test_kernel
from iron.std import attention as A
from iron.std import attention_decode as AD
from iron.std import attention_decode_mma as DM
from iron.std import attention_prefill as AP
from iron.std import attention_ws as W

VECTORS = [{"T": f32, "VEC": 4}, {"T": f16, "VEC": 8}, {"T": bf16, "VEC": 8}]
LOG2E = 1.0 / math.log(2.0)


def _extent(case, name: str, default: int) -> int:
    return int(case.shape.get(name, default)) if isinstance(case.shape, dict) else default


def score_magnitude(q: np.ndarray, k: np.ndarray, scale: float) -> float:
    """A = max over query/key pairs of scale * sum_i |q_i k_i|.

    q (B, H, Sq, D); k (B, H_kv, Sk, D) with query head i reading KV head i // (H / H_kv) (or already
    expanded to H heads).  One batch element at a time in float64: no expanded or widened copy of a
    whole KV cache (a 16-sequence Llama cache is 537M elements).
    """
    if not (q.size and k.size):
        return 0.0
    b, h, sq, d = q.shape
    r = h // k.shape[1]
    best = 0.0
    for i in range(b):
        qa = np.abs(q[i].astype(np.float64)).reshape(k.shape[1], r * sq, d)
        best = max(best, float((qa @ np.swapaxes(np.abs(k[i].astype(np.float64)), -1, -2)).max()))
    return float(scale) * best


def expand_kv(x: np.ndarray, h: int) -> np.ndarray:
    """(B, H_kv, ...) -> (B, H, ...): query head i reads KV head i // (H / H_kv)."""
    return np.repeat(x, h // x.shape[1], axis=1)


def attention_reference(q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float, mask: np.ndarray | None
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """float64 softmax(scale q k^T + mask) v, the weighted |v| (Expect scale) and the base-2 LSE.

    q (B, H, Sq, D); k, v (B, H, Sk, D) already expanded to H heads; mask (broadcastable to
    (B, H, Sq, Sk)) True where a key counts.  A row with no key gives 0, 0 and -inf.
    """
    s = scale * (q @ np.swapaxes(k, -1, -2))
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(s - m)
    total = e.sum(axis=-1, keepdims=True)
    w = np.divide(e, total, out=np.zeros_like(e), where=total > 0)
    with np.errstate(divide="ignore"):
        lse2 = (np.log(total[..., 0]) + m[..., 0]) * LOG2E
    return w @ v, w @ np.abs(v), lse2


# ---------------------------------------------------------------- decode, split pass

#: (B, H, H_kv, S_max, D, CH): a single key; GQA 2 with H_kv 2; several chunks, some partial, GQ = 2 of
#: a ratio of 4; D = 128 with a zero length; one chunk of 64 over a shorter sequence (GQ = 2: two blocks
#: of U = 2 keys a team); chunks of 160 keys, one head a group (U = 4: three blocks a team, the last
#: half masked).
DECODE_SHAPES = [
    {"B": 1, "H": 2, "Hkv": 1, "S": 1, "D": 64, "CH": 16},
    {"B": 2, "H": 4, "Hkv": 2, "S": 7, "D": 64, "CH": 16},
    {"B": 2, "H": 4, "Hkv": 1, "S": 33, "D": 64, "CH": 16},
    {"B": 2, "H": 2, "Hkv": 2, "S": 100, "D": 128, "CH": 32},
    {"B": 1, "H": 4, "Hkv": 2, "S": 100, "D": 64, "CH": 64},
    {"B": 2, "H": 2, "Hkv": 2, "S": 300, "D": 64, "CH": 160},
]
DECODE_BENCH = {
    "interp": [{"B": 1, "H": 4, "Hkv": 4, "S": 256, "D": 128}],
    "vulkan": [{"B": 1, "H": 8, "Hkv": 8, "S": 1024, "D": 128}, {"B": 1, "H": 8, "Hkv": 2, "S": 1024, "D": 128}],
    # Llama-2-7B decode (32 heads x 128, a 4K cache), batch 1 and 16; the GQA case with 8 KV heads.
    "*": [{"B": 1, "H": 32, "Hkv": 32, "S": 4096, "D": 128}, {"B": 16, "H": 32, "Hkv": 32, "S": 4096, "D": 128},
          {"B": 1, "H": 32, "Hkv": 8, "S": 4096, "D": 128}, {"B": 16, "H": 32, "Hkv": 8, "S": 4096, "D": 128}],
}


def decode_split_oracle(q, k, v, seq_lens, part_o, part_lse, h, h_kv, s_max, nch, ch, scale, table, page, pages):
    """Per chunk c of each (b, h): softmax over keys [c*CH, min((c+1)*CH, L_b)) of v, and the base-2 LSE.

    One sequence at a time, the H / H_kv query heads of a KV head against its chunks by broadcasting
    (no expanded copy of the cache): float64 throughout, as ``attention_reference``.
    """
    b_, _, d = q.shape
    r = h // h_kv
    pad = nch * ch - s_max
    pos = np.arange(nch * ch).reshape(nch, ch)
    lens = np.clip(seq_lens.astype(np.int64), 0, s_max)
    o, mag = np.empty((b_, h, nch, d)), np.empty((b_, h, nch, d))
    lse2, a2 = np.empty((b_, h, nch)), np.empty((b_, h, nch))
    for i in range(b_):
        kc = np.pad(k[i], ((0, 0), (0, pad), (0, 0))).reshape(h_kv, 1, nch, ch, d)
        vc = np.pad(v[i], ((0, 0), (0, pad), (0, 0))).reshape(h_kv, 1, nch, ch, d)
        qi = q[i].reshape(h_kv, r, 1, 1, d)  # query head g * r + j reads KV head g
        mask = (pos < lens[i])[:, None, :]  # (nch, 1, ch)
        oi, mi, li = attention_reference(qi, kc, vc, float(scale), mask)
        o[i], mag[i], lse2[i] = oi.reshape(h, nch, d), mi.reshape(h, nch, d), li.reshape(h, nch)
        top = (np.abs(qi) @ np.swapaxes(np.abs(kc), -1, -2))[..., 0, :]  # (h_kv, r, nch, ch)
        a2[i] = np.where(mask[:, 0, :], top, 0.0).max(axis=-1, initial=0.0).reshape(h, nch)
    a2 *= float(scale) * LOG2E
    finite = np.isfinite(lse2)
    lse_scale = np.where(finite, a2 + np.abs(np.where(finite, lse2, 0.0)) + 1.0, 0.0)
    return {"part_o": Expect(o, mag), "part_lse": Expect(lse2, lse_scale)}


def decode_depth(d: int, a: float, ch: int, tm: int = AD.TEAM) -> Depth:
    """The split pass's rounding chain (all f32; its outputs are f32), for teams of ``tm`` lanes.

    Score: q * scale*log2(e) (2 roundings), a lane's FMA chain over E = D/TM elements, a log2 TM-step
    butterfly: E + 2 + log2 TM, and |s - m| (1) before exp2 (2): in all (E + 5 + log2 TM) * A relative to
    each weight, twice for the normalisation.  Per key of a team: acc * alpha and the FMA (2), l alike:
    2 * ceil(CH / (128 / TM)) keys; the team butterfly (3 per level, up to 3 levels), the subgroup rounds
    (up to 16 FMAs), the total's sum and division (18): 40.
    """
    e = d // tm
    levels = tm.bit_length() - 1
    return Depth(steps=0, f32_steps=math.ceil(2 * (e + 5 + levels) * a) + 2 * -(-ch // (AD.DECODE_THREADS // tm))
                 + 40)


def _decode_lens(case, b: int, s_max: int) -> np.ndarray:
    """Lengths in [1, S_max] with the last sequence full; a zero length where the shape asks (B=2, D=128)."""
    lens = case.rng.integers(1, s_max + 1, size=b).astype(np.int32)
    lens[-1] = s_max
    if b > 1 and _extent(case, "D", 64) == 128:
        lens[0] = 0
    return lens


def decode_args(case, full: bool) -> tuple[list, dict, float]:
    """Arguments and binding of the split pass as the host plans them on the case's backend, or with the
    case's GQ, U and TM (bindings that a registration fixes, such as ``decode_gq4``'s)."""
    b, h, h_kv, s_max, d = (int(case[n]) for n in ("B", "H", "Hkv", "S", "D"))
    gq = case.binding.get("GQ") or A.heads_per_group(h, h_kv)
    ch = _extent(case, "CH", 0) or A.decode_chunk(b, h // gq, s_max)
    nch = -(-s_max // ch)
    scale = np.float32(1.0 / math.sqrt(d))
    q = case.randn(b, h, d)
    k = case.randn(b, h_kv, s_max, d)
    v = case.randn(b, h_kv, s_max, d)
    lens = np.full(b, s_max, np.int32) if full else _decode_lens(case, b, s_max)
    args = [q, k, v, lens, case.empty(b, h, nch, d, dtype=f32), case.empty(b, h, nch, dtype=f32), h, h_kv, s_max,
            nch, ch, scale, lens, 1, 1]  # a dense cache: the page table (lens) unread
    tm = case.binding.get("TM") or A.team_lanes(ch, d, case.binding["VEC"], case.backend)
    return args, {"D": d, "GQ": gq, "U": case.binding.get("U") or A.keys_in_flight(gq, tm), "TM": tm}, float(scale)


@test_kernel(AD.attention_decode_split, shapes=DECODE_SHAPES, bindings=VECTORS, name="std/attention/decode_split")
def decode_split_setup(case):
    args, binding, scale = decode_args(case, full=False)
    q, k, _, _, _, _, h, _, _, nch, ch, *_ = args
    a = score_magnitude(q[:, :, None, :], k, scale)
    groups = args[0].shape[0] * h // binding["GQ"]
    return Setup(args=args, grid=(nch * AD.DECODE_THREADS, groups), group=(AD.DECODE_THREADS,),
                 oracle=decode_split_oracle, depth=decode_depth(binding["D"], a, ch, binding["TM"]),
                 binding=binding)


def _decode_torch(q, k, v, seq_lens, part_o, part_lse, h, h_kv, s_max, nch, ch, scale, *paging):
    """torch SDPA on the same chunks (every sequence full): KV head i, chunk c is head i*NCH + c."""
    import torch
    import torch.nn.functional as F

    b, _, d = q.shape
    r = h // h_kv
    kc = k.view(b, h_kv * nch, ch, d)
    vc = v.view(b, h_kv * nch, ch, d)
    qc = q.view(b, h_kv, 1, r, 1, d).expand(b, h_kv, nch, r, 1, d).reshape(b, h_kv * nch * r, 1, d)
    if r > 1:
        try:
            out = F.scaled_dot_product_attention(qc, kc, vc, scale=float(scale), enable_gqa=True)
        except TypeError:  # torch < 2.5: expand the KV heads instead
            out = F.scaled_dot_product_attention(qc, kc.repeat_interleave(r, 1), vc.repeat_interleave(r, 1),
                                                 scale=float(scale))
    else:
        out = F.scaled_dot_product_attention(qc, kc, vc, scale=float(scale))
    out = out.view(b, h_kv, nch, r, d).permute(0, 1, 3, 2, 4).reshape(b, h, nch, d)
    return {"part_o": out.float()}


def _decode_numpy(q, k, v, seq_lens, part_o, part_lse, h, h_kv, s_max, nch, ch, scale, *paging):
    """The same chunked softmax in numpy float32."""
    b, _, d = q.shape
    kc = expand_kv(k.astype(np.float32), h).reshape(b, h, nch, ch, d)
    vc = expand_kv(v.astype(np.float32), h).reshape(b, h, nch, ch, d)
    s = np.einsum("bhd,bhcjd->bhcj", q.astype(np.float32), kc) * np.float32(scale)
    w = np.exp(s - s.max(axis=-1, keepdims=True))
    w /= w.sum(axis=-1, keepdims=True)
    return {"part_o": np.einsum("bhcj,bhcjd->bhcd", w, vc)}


@bench(AD.attention_decode_split, shapes=DECODE_BENCH, bindings=VECTORS[1:], name="std/attention/decode",
       reference={"cuda": _decode_torch, "*": _decode_numpy})
def decode_bench_setup(case):
    """The split pass (the whole KV stream; the combine reads B*H*NCH*(D+1) f32 more) at full lengths."""
    args, binding, scale = decode_args(case, full=True)
    q, k, v, _, _, _, h, _, s_max, nch, ch, *_ = args
    b, _, d = q.shape
    a = score_magnitude(q[:, :, None, :], k, scale)
    item = q.itemsize
    # SDPA returns T: both sides are judged at T's tolerance (one rounding to T on top of the f32 chain).
    depth = Depth(steps=1, f32_steps=decode_depth(d, a, ch, binding["TM"]).f32_steps)
    return Setup(args=args, grid=(nch * AD.DECODE_THREADS, b * h // binding["GQ"]), group=(AD.DECODE_THREADS,),
                 oracle=decode_split_oracle, outputs=["part_o"], depth=depth, out_dtype=case.T, binding=binding,
                 flops=4 * b * h * s_max * d, bytes_moved=(q.size + k.size + v.size + b * h * d) * item)


# ---------------------------------------------------------------- decode, four heads a group

#: GQ = 4: one group per KV head of a ratio of 4 reads its rows once for all four query heads (GQ = 2, the
#: host's choice, reads them twice, the second time mostly from L2) at the cost of registers (ptxas: about
#: 195 a thread at U = 2).  Registered to measure against ``std/attention/decode`` (the GQA rows of
#: DECODE_BENCH); the host keeps GQ = 2 until a measurement says otherwise.
GQ4_SHAPES = [{"B": 2, "H": 4, "Hkv": 1, "S": 33, "D": 64, "CH": 16}, {"B": 2, "H": 8, "Hkv": 2, "S": 100, "D": 128,
                                                                     "CH": 32}]
GQ4_BENCH = {"interp": [{"B": 1, "H": 8, "Hkv": 2, "S": 256, "D": 128}], "vulkan": [],
             "*": [{"B": 1, "H": 32, "Hkv": 8, "S": 4096, "D": 128}, {"B": 16, "H": 32, "Hkv": 8, "S": 4096, "D": 128}]}
GQ4_BINDINGS = [{**v, "GQ": 4, "U": u} for v in VECTORS[1:] for u in (1, 2)]


@test_kernel(AD.attention_decode_split, shapes={"vulkan": GQ4_SHAPES[:1], "*": GQ4_SHAPES},
             bindings=[{**VECTORS[0], "GQ": 4, "U": 1}, *GQ4_BINDINGS[1:2]], name="std/attention/decode_split_gq4")
def decode_split_gq4_setup(case):
    return decode_split_setup(case)


@bench(AD.attention_decode_split, shapes=GQ4_BENCH, bindings=GQ4_BINDINGS, name="std/attention/decode_gq4",
       reference={"cuda": _decode_torch, "*": _decode_numpy})
def decode_gq4_bench_setup(case):
    return decode_bench_setup(case)


# ---------------------------------------------------------------- decode on the matrix units

#: (B, H, H_kv, S_max, D, CH): four heads a KV head with partial blocks and chunks; one head a group (15 padding
#: rows) at D = 128 with a zero length and a chunk past most sequences; 32 heads of one KV head (two groups of 16).
MMA_SHAPES = [{"B": 2, "H": 8, "Hkv": 2, "S": 100, "D": 64, "CH": 64},
              {"B": 2, "H": 4, "Hkv": 4, "S": 70, "D": 128, "CH": 256},
              {"B": 1, "H": 32, "Hkv": 1, "S": 40, "D": 64, "CH": 32}]
MMA_BINDINGS = [{"T": f16, "SUBS": 4, "STAGES": 2, "PAGED": False, "PAR": False, "DIRECT": False},
                {"T": bf16, "SUBS": 2, "STAGES": 3, "PAGED": False, "PAR": False, "DIRECT": False},
                {"T": f16, "SUBS": 4, "STAGES": 2, "PAGED": False, "PAR": True, "DIRECT": False}]
#: DIRECT: one chunk a launch (CH at least S), the output in T; a zero length and a length past S among them.
MMA_DIRECT_SHAPES = [{"B": 3, "H": 8, "Hkv": 2, "S": 100, "D": 64, "CH": 128},
                     {"B": 2, "H": 4, "Hkv": 4, "S": 70, "D": 128, "CH": 96}]
MMA_DIRECT_BINDINGS = [{"T": bf16, "SUBS": 2, "STAGES": 3, "PAGED": False, "PAR": False, "DIRECT": True},
                       {"T": f16, "SUBS": 4, "STAGES": 2, "PAGED": False, "PAR": True, "DIRECT": True}]


def decode_mma_depth(d: int, a: float, ch: int) -> Depth:
    """attention_decode_mma's rounding chain.  Score: the unit's D exact products in its order (D steps), times
    scale*log2(e) less m (2), exp2 (2): (D + 5) * A per weight, twice for the normalisation.  Per 16 keys of a
    subgroup: l's block sum (16) and l * alpha + sum (2), the output's P V sum (16) and rescale (2); the
    subgroups' merge (up to four: l 8, the output's factors and adds 8) and the division (2).  T: P's rounding, with l
    summing the unrounded weights (2)."""
    return Depth(steps=2, f32_steps=math.ceil(2 * (d + 5) * a) + 36 * -(-ch // 16) + 18)


@test_kernel(DM.attention_decode_mma, shapes={"vulkan": [], "*": MMA_SHAPES}, bindings=MMA_BINDINGS,
             name="std/attention/decode_mma")
def decode_mma_setup(case):
    b, h, h_kv, s_max, d, ch = (int(case[n]) for n in ("B", "H", "Hkv", "S", "D", "CH"))
    gr = min(h // h_kv, DM.DM_ROWS)
    nch = -(-s_max // ch)
    scale = np.float32(1.0 / math.sqrt(d))
    q = case.randn(b, h, d)
    k = case.randn(b, h_kv, s_max, d)
    v = case.randn(b, h_kv, s_max, d)
    lens = _decode_lens(case, b, s_max)
    a = score_magnitude(q[:, :, None, :], k, scale)
    for i, n in enumerate(lens):  # rows past a sequence's length are never read: Inf and NaN there show it
        k[i, :, n:] = np.inf
        v[i, :, n:] = np.nan
    args = [q, k, v, lens, case.empty(b, h, nch, d, dtype=f32), case.empty(b, h, nch, dtype=f32), case.empty(b, h, d),
            h, h_kv, s_max, nch, ch, gr, scale, lens, 1, 1]
    direct = case.binding["DIRECT"]

    def oracle(q, k, v, seq_lens, part_o, part_lse, o, h, h_kv, s_max, nch, ch, gr, scale, table, page, pages):
        k, v = np.array(k), np.array(v)  # the oracle's sums run over whole rows: what no key may read, zeroed
        for i, n in enumerate(seq_lens):
            k[i, :, max(int(n), 0):] = 0
            v[i, :, max(int(n), 0):] = 0
        parts = decode_split_oracle(q, k, v, seq_lens, part_o, part_lse, h, h_kv, s_max, nch, ch, scale, table, page,
                                    pages)
        if direct:  # one chunk: the combine's output is the chunk's (an empty one's 0)
            return {"o": Expect(parts["part_o"].value[:, :, 0], parts["part_o"].scale[:, :, 0])}
        return parts

    threads = DM.decode_mma_threads(case.binding["SUBS"])
    depth = decode_mma_depth(d, a, ch)  # P's rounding: T's steps (DIRECT: and the output's)
    return Setup(args=args, grid=(nch * threads, b * h // gr), group=(threads,), oracle=oracle,
                 depth=Depth(steps=depth.steps + direct, f32_steps=depth.f32_steps), out_dtype=case.T,
                 binding={"D": d})


@test_kernel(DM.attention_decode_mma, shapes={"vulkan": [], "*": MMA_DIRECT_SHAPES}, bindings=MMA_DIRECT_BINDINGS,
             name="std/attention/decode_mma_direct")
def decode_mma_direct_setup(case):
    return decode_mma_setup(case)


# ---------------------------------------------------------------- decode, teams of 16 lanes

#: TM = 16: a key's row spread over 16 lanes (D/16 elements a lane), so GQ = 4 heads fit in about the
#: registers GQ = 2 takes with teams of 8.  Subgroups of 16 or more only (not lavapipe's 8).
TM16_SHAPES = [{"B": 2, "H": 4, "Hkv": 1, "S": 33, "D": 128, "CH": 16},
               {"B": 2, "H": 8, "Hkv": 2, "S": 100, "D": 128, "CH": 32},
               {"B": 1, "H": 4, "Hkv": 2, "S": 70, "D": 64, "CH": 48}]
TM16_TESTS = [{**VECTORS[0], "GQ": 2, "U": 1, "TM": 16}, {**VECTORS[1], "GQ": 4, "U": 2, "TM": 16},
              {**VECTORS[2], "GQ": 4, "U": 1, "TM": 16}]
TM16_BINDINGS = [{**v, "GQ": g, "U": u, "TM": 16} for v in VECTORS[1:] for g, u in ((4, 1), (4, 2), (2, 1), (2, 2))]


@test_kernel(AD.attention_decode_split, shapes={"vulkan": [], "*": TM16_SHAPES[:2]}, bindings=TM16_TESTS[1:],
             name="std/attention/decode_split_tm16")
def decode_split_tm16_setup(case):
    return decode_split_setup(case)


@test_kernel(AD.attention_decode_split, shapes={"vulkan": [], "*": TM16_SHAPES}, bindings=TM16_TESTS[:1],
             name="std/attention/decode_split_tm16_f32")
def decode_split_tm16_f32_setup(case):
    return decode_split_setup(case)


@bench(AD.attention_decode_split, shapes=GQ4_BENCH, bindings=TM16_BINDINGS, name="std/attention/decode_tm16",
       reference={"cuda": _decode_torch, "*": _decode_numpy})
def decode_tm16_bench_setup(case):
    return decode_bench_setup(case)


#: Keys per chunk at B = 16 with 8 KV heads (the host's decode_chunk gives 1024 at GQ = 2, 512 at GQ = 4:
#: about TARGET_GROUPS groups), and teams of 16 on the MHA shapes: the measurements behind the host's plan.
CHUNK_BENCH = {"interp": [], "vulkan": [],
               "*": [{"B": 16, "H": 32, "Hkv": 8, "S": 4096, "D": 128, "CH": ch}
                     for ch in (4096, 2048, 1024, 512, 256, 128)]}
CHUNK_BINDINGS = [{**VECTORS[1], "GQ": g, "U": u, "TM": tm}
                  for g, u, tm in ((2, 2, 8), (4, 2, 16), (2, 1, 16), (2, 4, 8))]
MHA_TM16_BENCH = {"interp": [], "vulkan": [], "*": DECODE_BENCH["*"][:2]}


@bench(AD.attention_decode_split, shapes=CHUNK_BENCH, bindings=CHUNK_BINDINGS, name="std/attention/decode_chunks",
       reference={"cuda": _decode_torch, "*": _decode_numpy})
def decode_chunks_bench_setup(case):
    return decode_bench_setup(case)


@bench(AD.attention_decode_split, shapes=MHA_TM16_BENCH, bindings=[{**VECTORS[1], "GQ": 1, "U": u, "TM": 16}
                                                                  for u in (2, 4)],
       name="std/attention/decode_mha_tm16", reference={"cuda": _decode_torch, "*": _decode_numpy})
def decode_mha_tm16_bench_setup(case):
    return decode_bench_setup(case)


# ---------------------------------------------------------------- decode, combine pass

#: (B, H, NCH, D): one chunk; several, with empty (-inf) chunks and one all-empty head.
COMBINE_SHAPES = [{"B": 1, "H": 2, "NCH": 1, "D": 64}, {"B": 2, "H": 3, "NCH": 7, "D": 64},
                  {"B": 1, "H": 2, "NCH": 33, "D": 128}]


def combine_oracle(part_o, part_lse, o, h, d, nch):
    b = o.shape[0]
    po = part_o.reshape(b, h, nch, d)
    lse = part_lse.reshape(b, h, nch)
    m = lse.max(axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    w = np.exp2(lse - m)
    den = w.sum(axis=-1, keepdims=True)
    wn = np.divide(w, den, out=np.zeros_like(w), where=den > 0)
    return Expect(np.einsum("bhc,bhcd->bhd", wn, po), np.einsum("bhc,bhcd->bhd", wn, np.abs(po)))


#: (B, H, NCH, D) for the tiled combine: past one tile of chunks (two tiles and a remainder of the unrolled loop).
TILED_COMBINE_SHAPES = [*COMBINE_SHAPES, {"B": 1, "H": 2, "NCH": 2 * AD.COMBINE_GROUP + 11, "D": 64}]


@test_kernel(AD.attention_decode_combine, shapes=COMBINE_SHAPES, name="std/attention/decode_combine",
             bindings=[{"T": t, "TILED": False} for t in (f32, f16, bf16)])
def combine_setup(case):
    b, h, nch, d = (int(case[n]) for n in ("B", "H", "NCH", "D"))
    part_o = case.randn(b, h, nch, d, dtype=f32)
    lse = case.uniform(b, h, nch, low=-20.0, high=5.0, dtype=f32)
    if nch > 1:
        lse[..., 1::3] = -np.inf       # empty chunks
        lse[0, 0, :] = -np.inf         # a head with no keys at all: o = 0
    finite = lse[np.isfinite(lse)]
    spread = float(finite.max() - finite.min()) if finite.size else 0.0
    # exp2(lse - M): the subtraction's rounding, |lse - M| units of u in the exponent, so ln 2 * spread
    # relative to the weight, plus exp2's 2; twice for the normalisation; the two sequential sums over
    # the chunks and the division: 2 * NCH + 1.  Then one rounding to T.
    f32_steps = math.ceil(2 * (math.log(2.0) * spread + 2)) + 2 * nch + 1
    return Setup(args=[part_o, lse, case.empty(b, h, d), h, d, nch],
                 grid=AD.combine_grid(h, d, b, case.binding["TILED"]), group=(AD.COMBINE_GROUP,),
                 oracle=combine_oracle, depth=Depth(steps=1, f32_steps=f32_steps))


@test_kernel(AD.attention_decode_combine, shapes=TILED_COMBINE_SHAPES, name="std/attention/decode_combine_tiled",
             bindings=[{"T": t, "TILED": True} for t in (f32, f16, bf16)])
def combine_tiled_setup(case):
    return combine_setup(case)


# ---------------------------------------------------------------- prefill

#: (B, H, H_kv, S, D, C): one token; 7 keys, MHA, not causal; two query blocks of 16 and a tail of 1,
#: GQA 2, causal; 100 (tails of every block size), not causal; D = 128 once, causal.
PREFILL_SHAPES = [
    {"B": 1, "H": 2, "Hkv": 1, "S": 1, "D": 64, "C": 1},
    {"B": 1, "H": 2, "Hkv": 2, "S": 7, "D": 64, "C": 0},
    {"B": 2, "H": 4, "Hkv": 2, "S": 33, "D": 64, "C": 1},
    {"B": 1, "H": 2, "Hkv": 1, "S": 100, "D": 64, "C": 0},
    {"B": 1, "H": 2, "Hkv": 1, "S": 100, "D": 128, "C": 1},
]
PREFILL_DTYPES = [f16, bf16]


def prefill_oracle(q, k, v, o, cu, s, h, h_kv, causal, scale, *unpaged):
    mask = np.tril(np.ones((s, s), bool)) if causal else None
    out, mag, _ = attention_reference(q, expand_kv(k, h), expand_kv(v, h), float(scale), mask)
    return Expect(out, mag)


def prefill_depth(d: int, s: int, a: float, block: int = 32) -> Depth:
    """The prefill's rounding chain.

    Score: the matrix unit sums D exact products in its own order (D steps), times scale*log2(e) (2),
    |s - m| (1), exp2 (2): (D + 5) * A per weight, twice for the normalisation.  l: the block's sum of
    its P (up to 32 terms) and l * alpha + sum per block; the accumulator: P V's sum over a block (32),
    the rescale and the add per block (2): S + ``block`` (the most keys a kernel's block holds) + 4 per block
    of 8 keys (the smallest block), and the division (1).  T: P's rounding (2: weights and their sum) and the
    output's (1).
    """
    return Depth(steps=3, f32_steps=math.ceil(2 * (d + 5) * a) + s + block + 4 * -(-s // AP.SBK) + 1)


def prefill_args(case) -> tuple[list, float]:
    b, h, h_kv, s, d = (int(case[n]) for n in ("B", "H", "Hkv", "S", "D"))
    causal = _extent(case, "C", 1)
    scale = np.float32(1.0 / math.sqrt(d))
    q = case.randn(b, h, s, d)
    k = case.randn(b, h_kv, s, d)
    v = case.randn(b, h_kv, s, d)
    cu = np.zeros(1, np.int32)  # unread: the tensors are dense
    return [q, k, v, case.empty(b, h, s, d), cu, s, h, h_kv, causal, scale], float(scale)


def _prefill_setup(case, bq: int, threads: int, **bench_fields) -> Setup:
    """The portable kernels' rows: the prefill's arguments and their unread paging (kv_lens, table, P, W, N)."""
    args, scale = prefill_args(case)
    q, k, _, _, cu, s, h, _, _, _ = args
    args = [*args, cu, cu, 1, 1, 1]
    b, d = q.shape[0], q.shape[-1]
    a = score_magnitude(q, k, scale)
    return Setup(args=args, grid=(-(-s // bq) * threads, b * h), group=(threads,), oracle=prefill_oracle,
                 depth=prefill_depth(d, s, a), binding={"D": d}, **bench_fields)


@test_kernel(AP.attention_prefill, shapes={"interp": PREFILL_SHAPES, "cuda": PREFILL_SHAPES, "*": []},
             dtypes=PREFILL_DTYPES, name="std/attention/prefill")
def prefill_setup(case):
    """The tensor-core kernel (64 queries, 48 KB of shared arrays): the interpreter and CUDA."""
    return _prefill_setup(case, 64, 128)


@test_kernel(AP.attention_prefill_small, shapes=PREFILL_SHAPES, dtypes=PREFILL_DTYPES,
             name="std/attention/prefill_small")
def prefill_small_setup(case):
    return _prefill_setup(case, AP.SBQ, AP.SNT)


#: The Hopper kernel on the shapes above and on several query tiles of 128 and key blocks with tails (causal and
#: not, GQA), in both key-block widths.
PREFILL_WS_SHAPES = [*PREFILL_SHAPES, {"B": 1, "H": 2, "Hkv": 1, "S": 300, "D": 128, "C": 1},
                     {"B": 1, "H": 2, "Hkv": 2, "S": 257, "D": 64, "C": 0}]
PREFILL_WS_BINDINGS = [{"BK": 128, "STAGES": 2, "OVERLAP": False}, {"BK": 128, "STAGES": 2, "OVERLAP": True},
                       {"BK": 64, "STAGES": 3, "OVERLAP": True},
                       {"BK": 128, "STAGES": 2, "OVERLAP": False, "PINGPONG": True},
                       {"BK": 64, "STAGES": 2, "OVERLAP": False, "PINGPONG": True}]


def prefill_ws_oracle(q, k, v, o, cu, s, h, h_kv, bh, bh_kv, causal, scale, *unpaged):
    return prefill_oracle(q, k, v, o, cu, s, h, h_kv, causal, scale)


def prefill_ws_args(case) -> tuple[list, float]:
    """attention_prefill_ws's arguments: the prefill's, with B * H and B * H_kv (the tile copies' extents)."""
    args, scale = prefill_args(case)
    b, h, h_kv, cu = args[0].shape[0], args[6], args[7], args[4]
    return [*args[:8], b * h, b * h_kv, *args[8:], cu, cu, W.PAGE_PIECE, 1, 1], scale


def _prefill_ws_setup(case, **bench_fields) -> Setup:
    args, scale = prefill_ws_args(case)
    q, k, s, h = args[0], args[1], args[5], args[6]
    a = score_magnitude(q, k, scale)
    return Setup(args=args, grid=(-(-s // W.FA_BQ) * W.FA_THREADS, q.shape[0] * h), group=(W.FA_THREADS,),
                 oracle=prefill_ws_oracle, depth=prefill_depth(q.shape[-1], s, a, case["BK"]),
                 binding={"D": q.shape[-1]}, **bench_fields)


#: Heads of 256 (the host's binding for them): one token; two query tiles with tails, causal, GQA; 70, not causal.
PREFILL_WS_WIDE = [{"B": 1, "H": 2, "Hkv": 1, "S": 1, "D": 256, "C": 1},
                   {"B": 1, "H": 2, "Hkv": 1, "S": 150, "D": 256, "C": 1},
                   {"B": 1, "H": 1, "Hkv": 1, "S": 70, "D": 256, "C": 0}]


@test_kernel(W.attention_prefill_ws, shapes={"interp": PREFILL_WS_WIDE, "cuda": PREFILL_WS_WIDE, "*": []},
             dtypes=PREFILL_DTYPES, bindings=[dict(W.FA_WIDE)], name="std/attention/prefill_ws_d256")
@test_kernel(W.attention_prefill_ws, shapes={"interp": PREFILL_WS_SHAPES, "cuda": PREFILL_WS_SHAPES, "*": []},
             dtypes=PREFILL_DTYPES, bindings=PREFILL_WS_BINDINGS, name="std/attention/prefill_ws")
def prefill_ws_setup(case):
    """FlashAttention-3's structure on Hopper (warp roles, tile copies, warpgroup multiplies): interp and CUDA."""
    return _prefill_ws_setup(case)


def _prefill_torch(q, k, v, o, cu, s, h, h_kv, causal, scale, *unpaged):
    import torch.nn.functional as F

    if h != h_kv:
        try:
            return F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal), scale=float(scale),
                                                  enable_gqa=True)
        except TypeError:  # torch < 2.5
            k, v = k.repeat_interleave(h // h_kv, 1), v.repeat_interleave(h // h_kv, 1)
    return F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal), scale=float(scale))


def _prefill_numpy(q, k, v, o, cu, s, h, h_kv, causal, scale, *unpaged):
    out = np.empty(o.shape, np.float32)
    kx, vx = expand_kv(k, h), expand_kv(v, h)
    for b in range(q.shape[0]):
        for i in range(h):
            sc = (q[b, i].astype(np.float32) @ kx[b, i].astype(np.float32).T) * np.float32(scale)
            if causal:
                sc[np.triu_indices(s, 1)] = -np.inf
            w = np.exp(sc - sc.max(axis=-1, keepdims=True))
            out[b, i] = (w / w.sum(axis=-1, keepdims=True)) @ vx[b, i].astype(np.float32)
    return out.astype(o.dtype)


def _prefill_bench_fields(case) -> dict:
    b, h, h_kv, s, d = (int(case[n]) for n in ("B", "H", "Hkv", "S", "D"))
    causal = _extent(case, "C", 1)
    flops = 4 * b * h * s * s * d // (2 if causal else 1)
    item = case.T.itemsize
    return {"flops": flops, "matrix": True, "bytes_moved": (2 * b * h + 2 * b * h_kv) * s * d * item}


#: Llama-2-7B prefill: 32 heads x 128, 2K and 4K tokens, causal.
PREFILL_BENCH = {"interp": [{"B": 1, "H": 2, "Hkv": 2, "S": 256, "D": 128, "C": 1}],
                 "cuda": [{"B": 1, "H": 32, "Hkv": 32, "S": 2048, "D": 128, "C": 1},
                          {"B": 1, "H": 32, "Hkv": 32, "S": 4096, "D": 128, "C": 1}]}


@bench(AP.attention_prefill, shapes=PREFILL_BENCH, dtypes=PREFILL_DTYPES, name="std/attention/prefill",
       reference={"cuda": _prefill_torch, "*": _prefill_numpy})
def prefill_bench_setup(case):
    return _prefill_setup(case, 64, 128, **_prefill_bench_fields(case))


@bench(AP.attention_prefill_small, dtypes=PREFILL_DTYPES, name="std/attention/prefill_small",
       shapes={"interp": [{"B": 1, "H": 2, "Hkv": 2, "S": 256, "D": 128, "C": 1}],
               "vulkan": [{"B": 1, "H": 4, "Hkv": 4, "S": 256, "D": 128, "C": 1}]},
       reference={"cuda": _prefill_torch, "*": _prefill_numpy})
def prefill_small_bench_setup(case):
    return _prefill_setup(case, AP.SBQ, AP.SNT, **_prefill_bench_fields(case))


def _prefill_ws_torch(q, k, v, o, cu, s, h, h_kv, bh, bh_kv, causal, scale, *unpaged):
    return _prefill_torch(q, k, v, o, cu, s, h, h_kv, causal, scale)


def _prefill_ws_numpy(q, k, v, o, cu, s, h, h_kv, bh, bh_kv, causal, scale, *unpaged):
    return _prefill_numpy(q, k, v, o, cu, s, h, h_kv, causal, scale)


@bench(W.attention_prefill_ws, shapes={**PREFILL_BENCH, "vulkan": []}, dtypes=PREFILL_DTYPES,
       bindings=[dict(W.FA_DEFAULT)], name="std/attention/prefill_ws",
       reference={"cuda": _prefill_ws_torch, "*": _prefill_ws_numpy})
def prefill_ws_bench_setup(case):
    return _prefill_ws_setup(case, **_prefill_bench_fields(case))
