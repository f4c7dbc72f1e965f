"""Prototype: attention decode's split pass with U keys per team in flight, chunk sizes swept, next to SDPA.

For the GPU machine (the H200): one JSON line per (shape, U, chunk) with the split pass's time, its
bandwidth over the K/V bytes and the ratio to torch SDPA on the same chunks (the bench's reference) and
to a whole-cache SDPA decode; the split output is checked against SDPA's.
Run: ``PYTHONPATH=src python3 scripts/device/decode_tune.py``.
"""

from __future__ import annotations

import json
import math
import sys

from cuda_events import median_ms

from iron import bf16, f16, f32, i32, In, T, Tensor, kernel, variants
from iron.lang import (barrier, exp2, fma, group_id, lane_id, local, log2, num_simd_groups, select, shared,
                       simd_group_id, simd_shuffle_xor, simd_size, static_range, thread_id)
from iron.std.attention import DECODE_THREADS, LOG2E, NEG, decode_chunk, heads_per_group


@kernel(variants(T=[f32, f16, bf16], VEC=[4, 8], D=[64, 128], GQ=[1, 2, 4], U=[1, 2, 4], TEAM=[8, 16], BLK=[0, 1]))
def decode_split_u(q: In[T], k: In[T], v: In[T], seq_lens: In[i32], part_o: Tensor[f32],
                           part_lse: Tensor[f32], H: int, H_kv: int, S_max: int, NCH: int, CH: int, scale: f32):

    NV = D // (TEAM * VEC)
    E = NV * VEC
    TEAMS = DECODE_THREADS // TEAM
    ml_s = shared(f32, TEAMS * GQ * 2)
    acc_s = shared(f32, GQ * D)
    t = thread_id(0)
    team = t // TEAM
    lt = t % TEAM
    c = group_id(0)
    hg = group_id(1)
    b = hg // (H // GQ)
    h0 = (hg % (H // GQ)) * GQ
    kvh = h0 // (H // H_kv)
    seq = min(max(seq_lens[b], 0), S_max)
    start = c * CH
    end = min(start + CH, seq)
    obase = (b * H + h0) * NCH + c
    if start >= end:
        for i in range(t, GQ * D, DECODE_THREADS):
            part_o[(obase + (i // D) * NCH) * D + i % D] = 0.0
        if t < GQ:
            part_lse[obase + t * NCH] = NEG
        return
    qv = local(f32, GQ * E)
    for g in static_range(GQ):
        for jv in static_range(NV):
            x = f32(q.load((b * H + h0 + g) * D + (lt + jv * TEAM) * VEC, width=VEC))
            for i in static_range(VEC):
                qv[g * E + jv * VEC + i] = x[i] * (scale * LOG2E)
    m = local(f32, GQ)
    l = local(f32, GQ)
    acc = local(f32, GQ * E)
    for g in static_range(GQ):
        m[g] = NEG
    row0 = (b * H_kv + kvh) * S_max
    for j0 in range(start + team, end, U * TEAMS):
        kf = local(f32, U * E)
        vf = local(f32, U * E)
        for u in static_range(U):
            base = (row0 + min(j0 + u * TEAMS, end - 1)) * D
            for jv in static_range(NV):
                kx = f32(k.load(base + (lt + jv * TEAM) * VEC, width=VEC))
                vx = f32(v.load(base + (lt + jv * TEAM) * VEC, width=VEC))
                for i in static_range(VEC):
                    kf[u * E + jv * VEC + i] = kx[i]
                    vf[u * E + jv * VEC + i] = vx[i]
        if BLK == 0:
            for u in static_range(U):
                for g in static_range(GQ):
                    s = 0.0
                    for e in static_range(E):
                        s = fma(qv[g * E + e], kf[u * E + e], s)
                    if TEAM == 16:
                        s += simd_shuffle_xor(s, 8)
                    s += simd_shuffle_xor(s, 4)
                    s += simd_shuffle_xor(s, 2)
                    s += simd_shuffle_xor(s, 1)
                    s = select(j0 + u * TEAMS < end, s, NEG)
                    up = s > m[g]
                    ex = exp2(-abs(s - m[g]))
                    alpha = select(up, ex, 1.0)
                    p = select(up, 1.0, ex)
                    m[g] = select(up, s, m[g])
                    l[g] = l[g] * alpha + p
                    for e in static_range(E):
                        acc[g * E + e] = fma(p, vf[u * E + e], acc[g * E + e] * alpha)
        else:
            # The U keys' scores first, then one rescale of (m, l, acc) for all of them.
            sc = local(f32, U * GQ)
            for u in static_range(U):
                for g in static_range(GQ):
                    s = 0.0
                    for e in static_range(E):
                        s = fma(qv[g * E + e], kf[u * E + e], s)
                    sc[u * GQ + g] = s
            for u in static_range(U):
                for g in static_range(GQ):
                    if TEAM == 16:
                        sc[u * GQ + g] += simd_shuffle_xor(sc[u * GQ + g], 8)
                    sc[u * GQ + g] += simd_shuffle_xor(sc[u * GQ + g], 4)
                    sc[u * GQ + g] += simd_shuffle_xor(sc[u * GQ + g], 2)
                    sc[u * GQ + g] += simd_shuffle_xor(sc[u * GQ + g], 1)
                    sc[u * GQ + g] = select(j0 + u * TEAMS < end, sc[u * GQ + g], NEG)
            for g in static_range(GQ):
                mx = m[g]
                for u in static_range(U):
                    mx = max(mx, sc[u * GQ + g])
                alpha = exp2(m[g] - mx)
                m[g] = mx
                tot = l[g] * alpha
                for e in static_range(E):
                    acc[g * E + e] = acc[g * E + e] * alpha
                for u in static_range(U):
                    p = exp2(sc[u * GQ + g] - mx)
                    tot += p
                    for e in static_range(E):
                        acc[g * E + e] = fma(p, vf[u * E + e], acc[g * E + e])
                l[g] = tot
    # Teams of one subgroup: an xor butterfly over the team index.
    mask = TEAM
    while mask < simd_size():
        for g in static_range(GQ):
            mo = simd_shuffle_xor(m[g], mask)
            lo = simd_shuffle_xor(l[g], mask)
            mn = max(m[g], mo)
            mu = select(mn == NEG, 0.0, mn)
            a0 = exp2(m[g] - mu)
            a1 = exp2(mo - mu)
            l[g] = l[g] * a0 + lo * a1
            m[g] = mn
            for e in static_range(E):
                acc[g * E + e] = acc[g * E + e] * a0 + simd_shuffle_xor(acc[g * E + e], mask) * a1
        mask = mask * 2
    # Subgroups, in id order: (m, l) first, then each subgroup's lead team adds its rescaled, normalised acc.
    sg = simd_group_id()
    nsg = num_simd_groups()
    lead = lane_id() < TEAM
    if lane_id() == 0:
        for g in static_range(GQ):
            ml_s[(sg * GQ + g) * 2] = m[g]
            ml_s[(sg * GQ + g) * 2 + 1] = l[g]
    barrier()
    f = local(f32, GQ)
    big_m = local(f32, GQ)
    big_l = local(f32, GQ)
    for g in static_range(GQ):
        mx = NEG
        for r in range(nsg):
            mx = max(mx, ml_s[(r * GQ + g) * 2])
        mu = select(mx == NEG, 0.0, mx)
        tot = 0.0
        for r in range(nsg):
            tot += ml_s[(r * GQ + g) * 2 + 1] * exp2(ml_s[(r * GQ + g) * 2] - mu)
        f[g] = exp2(m[g] - mu) / tot
        big_m[g] = mx
        big_l[g] = tot
    for r in range(nsg):
        if sg == r and lead:
            for g in static_range(GQ):
                for jv in static_range(NV):
                    for i in static_range(VEC):
                        idx = g * D + (lt + jv * TEAM) * VEC + i
                        if r == 0:
                            acc_s[idx] = acc[g * E + jv * VEC + i] * f[g]
                        else:
                            acc_s[idx] = fma(acc[g * E + jv * VEC + i], f[g], acc_s[idx])
        barrier()
    for i in range(t, GQ * D, DECODE_THREADS):
        part_o[(obase + (i // D) * NCH) * D + i % D] = acc_s[i]
    for g in static_range(GQ):
        if t == g:
            part_lse[obase + g * NCH] = big_m[g] + log2(big_l[g])


def main() -> int:
    import torch
    import torch.nn.functional as F

    gen = torch.Generator(device="cuda").manual_seed(0)
    # (GQ, TEAM, U) configurations; the shipped ones are (2, 8, 1) for H/H_kv = 4 and (1, 8, 2) for 1.
    configs = {8: [(2, 8, 1, 0), (2, 8, 2, 1), (2, 8, 4, 1), (4, 16, 2, 1), (4, 16, 4, 1), (4, 8, 2, 1)],
               32: [(1, 8, 2, 0), (1, 8, 2, 1), (1, 8, 4, 1)]}
    for b, h, hkv in ((16, 32, 8), (16, 32, 32)):
        s, d = 4096, 128
        q = torch.randn(b, h, d, device="cuda", dtype=torch.float16, generator=gen)
        kc = torch.randn(b, hkv, s, d, device="cuda", dtype=torch.float16, generator=gen)
        vc = torch.randn(b, hkv, s, d, device="cuda", dtype=torch.float16, generator=gen)
        lens = torch.full((b,), s, device="cuda", dtype=torch.int32)
        scale = 1.0 / math.sqrt(d)
        q4 = q.view(b, h, 1, d)
        full = lambda: F.scaled_dot_product_attention(q4, kc, vc, scale=scale, enable_gqa=hkv != h)
        want_full = full().float()
        full_ms = median_ms(torch, full, 10, batch=20)
        nbytes = 2 * kc.numel() * 2
        r = h // hkv
        for gq, team, u, blk in configs[hkv]:
            for ch in (512, 1024, 2048):
                nch = -(-s // ch)
                kern = decode_split_u.variant(T=f16, VEC=8, D=d, GQ=gq, U=u, TEAM=team, BLK=blk)
                po = torch.full((b, h, nch, d), float("nan"), device="cuda")
                pl = torch.empty((b, h, nch), device="cuda")
                run = lambda: kern.launch(q, kc, vc, lens, po, pl, h, hkv, s, nch, ch, f32(scale),
                                          grid=(nch * DECODE_THREADS, b * h // gq), group=(DECODE_THREADS,),
                                          backend="cuda")
                run()
                torch.cuda.synchronize()
                # combine the chunks here (base-2 LSE) and compare with SDPA over the whole cache
                w = torch.softmax(pl * math.log(2.0), dim=-1)
                got = (po * w[..., None]).sum(2)
                err = ((got - want_full.view(b, h, d)).abs().max() / want_full.abs().max()).item()
                ms = median_ms(torch, run, 10, batch=20)
                print(json.dumps({"B": b, "H": h, "Hkv": hkv, "GQ": gq, "TEAM": team, "U": u, "BLK": blk, "CH": ch,
                                  "groups": nch * b * h // gq, "iron_us": round(ms * 1e3, 1),
                                  "full_sdpa_us": round(full_ms * 1e3, 1), "iron_GBs": round(nbytes / ms / 1e6),
                                  "vs_full": round(full_ms / ms, 3), "err": err, "ok": err < 4e-3}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
