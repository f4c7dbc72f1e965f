"""How far a row-wise gemv or Q8_0 gemv unrolls its lane loop, next to torch (cuBLAS) on the same shapes.

For the GPU machine (the H200): one JSON line per (kernel, shape, dtype, unroll) with the kernel's time,
its bandwidth over the bytes it must read, and torch's time: ``torch.mv`` on the same matrix for
``gemv_rows``, on the dequantised f16/bf16 matrix for ``gemv_q8_0`` (what the registered bench compares
with).  The unrolled copies are the library's module with the loop's ``unroll=`` edited (the tests'
``edited_module``); each copy's output must equal the shipped kernel's bit for bit (the unroll does not
change a lane's order) and be close to torch's.  Times: CUDA events around 20 back-to-back launches, each on the next of
rotated copies of the matrix (together past twice the L2).
**Rank with care, decide with the bench**: on 2026-11-30 this script's times disagreed with the
registered bench for these 12-60 us kernels (x @ A at 4096^2, both passes: 61 us here, 19.8 us in
``iron bench``; torch.mv at 4096^2 29 us here, 14.5 us there): back-to-back launches from Python wait on
the host's launch cost, so short kernels time the host.  Its unroll ranking for ``gemv_rows`` held in the
bench; its split-target ranking did not.
Run: ``PYTHONPATH=src:tests python3 scripts/device/gemv_tune.py [--cols]`` (``--cols``: x @ A only).
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from cuda_events import median_ms
from std.std_testing import edited_module

from iron import bf16, f16
from iron.std import gemv as gemv_mod
from iron.std import quant_gemv as q_mod

SHAPES = [(4096, 11008), (11008, 4096), (4096, 4096)]
ROWS_SITE = "for c in range(lane * VEC, k, w * VEC, unroll="
Q8_SITE = "for p in range(lane + w * piece_slice, nb * 4, w * sp, unroll="
COLS_SITE = "                for r in range(r0 + s, r1, slices, unroll="


#: Rotated copies of the matrix add up to at least this much (past twice the H200's L2), so no timed
#: launch finds its matrix in L2 from the previous one, as in the registered benches (harness.timing).
ROTATION_BYTES = 256 << 20


def rotation(tensor) -> list:
    """``tensor`` and clones of it, enough to outgrow the L2 together."""
    copies = max(2, -(-ROTATION_BYTES // (tensor.numel() * tensor.element_size())))
    return [tensor] + [tensor.clone() for _ in range(copies - 1)]


def rotated(fn, copies: list):
    """A no-argument call of ``fn(copy)`` that moves to the next copy each time."""
    state = {"i": 0}

    def call():
        state["i"] = (state["i"] + 1) % len(copies)
        return fn(copies[state["i"]])
    return call


def variants(module, prefix: str, unrolls: list[int], tmp: Path) -> dict[int, object]:
    """The module as shipped (under its own unroll) and copies whose loops ``prefix<N>):`` unroll by each
    of ``unrolls`` instead."""
    source = Path(module.__file__).read_text()
    at = source.index(prefix) + len(prefix)
    base = int(source[at:source.index(")", at)])
    site = f"{prefix}{base}):"
    out = {base: module}
    for u in unrolls:
        if u != base:
            out[u] = edited_module(module, tmp, (site, f"{prefix}{u}):"), unique=False)
    return out


def sweep(torch, name: str, mods: dict, make, copies: list, nbytes: int, ref_ms: float, want, dt, m: int,
          k: int) -> None:
    """Time ``make(mod)`` (a one-matrix launch writing ``y``, returned with it) for each unroll's module and
    print one JSON line each; outputs must match the shipped module's bit for bit."""
    base_y = None
    for u, mod in mods.items():
        one, y = make(mod)
        one(copies[0])
        torch.cuda.synchronize()
        base_y = y.clone() if base_y is None else base_y
        ms = median_ms(torch, rotated(one, copies), 10, batch=20)
        err = ((y.float() - want).abs().max() / want.abs().max()).item()
        print(json.dumps({"kernel": name, "M": m, "K": k, "dtype": dt.name, "unroll": u,
                          "us": round(ms * 1e3, 2), "gbps": round(nbytes / ms / 1e6),
                          "torch_us": round(ref_ms * 1e3, 2), "ratio": round(ref_ms / ms, 3),
                          "same_as_shipped": bool(torch.equal(y, base_y)), "rel_err": err}), flush=True)


def tune_cols(torch, gen, tmp: Path) -> None:
    """x @ A split over K: the unroll of a thread's rows, group size and items per split pass, f16."""
    mods = variants(gemv_mod, COLS_SITE, [4, 8], tmp)
    for k, n in SHAPES:
        a = torch.randn(k, n, device="cuda", dtype=torch.float16, generator=gen)
        x = torch.randn(k, device="cuda", dtype=torch.float16, generator=gen)
        copies = rotation(a)
        ref_ms = median_ms(torch, rotated(lambda m: torch.matmul(x, m), copies), 10, batch=20)
        want = torch.matmul(x.float(), a.float())
        base_y = None
        for u, mod in mods.items():
            for threads in (256,):
                for target in (264, 528, 792, 1056, 1584):
                    blocks = -(-n // 256)
                    splits = max(1, min(-(-target // blocks), k // mod.MIN_SPLIT_ROWS))
                    kstep = -(-k // splits)
                    splits = -(-k // kstep)
                    y = torch.empty(n, device="cuda", dtype=torch.float16)
                    part = torch.empty(splits, n, device="cuda", dtype=torch.float32)
                    main_k = mod.gemv_cols.variant(T=f16, VEC=8, THREADS=threads)
                    sum_k = mod.gemv_cols_sum.variant(T=f16)

                    def pass_(mat):
                        main_k.launch(mat, x, y, part, k, n, 32, kstep, True,
                                      grid=(mod.cols_grid(n, 8, 32, threads, splits),), group=(threads,),
                                      backend="cuda")
                        if splits > 1:
                            sum_k.launch(part, y, n, splits, grid=(mod.sum_grid(n),), group=(mod.GROUP,),
                                         backend="cuda")
                    run = rotated(pass_, copies)
                    pass_(a)
                    torch.cuda.synchronize()
                    base_y = y.clone() if base_y is None else base_y
                    ms = median_ms(torch, run, 10, batch=20)
                    err = ((y.float() - want).abs().max() / want.abs().max()).item()
                    print(json.dumps({"kernel": "gemv_cols_split", "K": k, "N": n, "dtype": "f16", "unroll": u,
                                      "threads": threads, "target": target, "splits": splits,
                                      "us": round(ms * 1e3, 2), "gbps": round(a.numel() * 2 / ms / 1e6),
                                      "torch_us": round(ref_ms * 1e3, 2), "ratio": round(ref_ms / ms, 3),
                                      "rel_err": err}), flush=True)
        del a, copies


def main() -> int:
    import torch

    gen = torch.Generator(device="cuda").manual_seed(0)
    tmp = Path(tempfile.mkdtemp())
    tune_cols(torch, gen, tmp)
    if "--cols" in sys.argv:
        return 0
    rows_mods = variants(gemv_mod, ROWS_SITE, [4, 8, 16], tmp)
    q8_mods = variants(q_mod, Q8_SITE, [2, 4], tmp)
    for dt, tdt in ((f16, torch.float16), (bf16, torch.bfloat16)):
        for m, k in SHAPES:
            x = torch.randn(k, device="cuda", dtype=tdt, generator=gen)
            # gemv_rows: y = A x
            a = torch.randn(m, k, device="cuda", dtype=tdt, generator=gen)
            copies = rotation(a)
            ref_ms = median_ms(torch, rotated(lambda mat: torch.mv(mat, x), copies), 10, batch=20)
            want = torch.mv(a.float(), x.float())

            def rows(mod):
                y = torch.empty(m, device="cuda", dtype=tdt)
                kern = mod.gemv_rows.variant(T=dt, VEC=8)
                return (lambda mat: kern.launch(mat, x, y, m, k, True, grid=(mod.rows_grid(m),),
                                                group=(mod.GROUP,), backend="cuda")), y
            sweep(torch, "gemv_rows", rows_mods, rows, copies, a.numel() * a.element_size(), ref_ms, want, dt, m, k)
            del a, copies
            # gemv_q8_0: 34-byte blocks, scale 2**-6 (f16 0x2400), random i8 weights
            nb = k // 32
            data = torch.randint(0, 256, (m, nb, 34), device="cuda", dtype=torch.uint8, generator=gen)
            data[:, :, 0] = 0x00
            data[:, :, 1] = 0x24
            wq = data[:, :, 2:].contiguous().view(torch.int8).to(torch.float32) * 2.0 ** -6
            wd = wq.reshape(m, k).to(tdt)
            ref_ms = median_ms(torch, rotated(lambda mat: torch.mv(mat, x), rotation(wd)), 10, batch=20)
            want = torch.mv(wq.reshape(m, k), x.float())
            flat = data.reshape(-1)
            copies = rotation(flat)

            def q8(mod):
                y = torch.empty(m, device="cuda", dtype=tdt)
                kern = mod.gemv_q8_0.variant(T=dt)
                split = mod.split_for(m, k, "Q8_0")
                return (lambda mat: kern.launch(mat, x, y, m, k, split, grid=(mod.grid_for(m, split),),
                                                group=(mod.GROUP,), backend="cuda")), y
            sweep(torch, "gemv_q8_0", q8_mods, q8, copies, flat.numel(), ref_ms, want, dt, m, k)
            del data, wq, wd, copies
    return 0


if __name__ == "__main__":
    sys.exit(main())
