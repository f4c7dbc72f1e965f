"""iron.std.conv_mma, conv_wg and conv_ws (implicit GEMMs) in several configurations beside cuDNN, a JSON line each.

For the GPU machine (the H200).  Each shape of issue 19 runs through ``torch.nn.functional.conv2d`` (cuDNN) in
both memory formats, contiguous and channels-last, and through :data:`iron.std.conv_mma.conv_mma` on the
channels-last tensors in each configuration (and :data:`iron.std.conv_wg.conv_wg`'s, ``WG*``, and where it runs
:data:`iron.std.conv_ws.conv_ws`'s, ``WS*``), writing NHWC
(and, with ``--nchw``, PyTorch's NCHW by the epilogue's index map).  Kernel times are CUDA-event medians of
``--reps`` runs of ``--batch`` calls back to back (the host hides behind the previous
kernel, unless its launch takes longer), and each side's kernel time alone from the CUDA profiler (``iron_kernel_us``,
``cudnn_kernel_us`` of cuDNN's faster memory format, and their ``kernel_ratio``).
Iron's output is checked against cuDNN's: the largest
|difference| over the largest |cuDNN output| must stay under 2**-7 (both round f32 sums of the same products
once to 16 bits; a wrong tap shows up as O(1)).

Run: ``cd scripts/device && PYTHONPATH=../../src python3 conv_tune.py [--shapes resnet_64_56] [--configs SM80]``.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from cuda_events import kernel_us, median_ms

#: name -> (N, C_in, H, W, C_out, KH, KW, stride, padding, groups): conv1d rows have H = KH = 1.
SHAPES: dict[str, tuple[int, ...]] = {
    "resnet_64_56": (32, 64, 56, 56, 64, 3, 3, 1, 1, 1),
    "resnet_128_s2": (32, 128, 56, 56, 128, 3, 3, 2, 1, 1),
    "resnet_256_14": (32, 256, 14, 14, 256, 3, 3, 1, 1, 1),
    "resnet_512_7": (32, 512, 7, 7, 512, 3, 3, 1, 1, 1),
    "resnet_1x1_64_256": (32, 64, 56, 56, 256, 1, 1, 1, 0, 1),
    "resnet_1x1_256_1024": (32, 256, 14, 14, 1024, 1, 1, 1, 0, 1),
    "unet_320_64": (8, 320, 64, 64, 320, 3, 3, 1, 1, 1),
    "conv1d_512_4096": (8, 512, 1, 4096, 512, 1, 3, 1, 1, 1),
    "whisper_80_384": (8, 80, 1, 3000, 384, 1, 3, 1, 1, 1),
    "whisper_384_s2": (8, 384, 1, 3000, 384, 1, 3, 2, 1, 1),
    "resnext_g32": (32, 256, 28, 28, 256, 3, 3, 1, 1, 32),
    # ResNeXt-50 32x4d's first stage: 4 channels a group
    "resnext_g32_c4": (32, 128, 56, 56, 128, 3, 3, 1, 1, 32),
}


def configs() -> dict[str, dict[str, Any]]:
    from iron.std.conv_mma import CONV_SM80, CONV_SM80_N64, CONV_TUNING

    named = {"SM80": CONV_SM80, "N64": CONV_SM80_N64}
    for cfg in CONV_TUNING:
        named[f"{cfg['WARPS']}_{cfg['WT']}_BK{cfg['BK']}_S{cfg['STAGES']}"] = cfg
    # conv_wg (mma_wg, sm_90's wgmma): 128 x BN tiles, STAGES buffers, PENDING multiplies left running.
    for bn, stages, pending in ((128, 4, 1), (256, 4, 1), (128, 3, 1), (128, 4, 0), (256, 3, 1)):
        named[f"WG{bn}_S{stages}_P{pending}"] = {"BN": bn, "STAGES": stages, "PENDING": pending}
    # conv_ws (warp roles, tile copies of input boxes: one group, stride 1 or 2 along an even W): 128 x BN tiles,
    # STAGES buffers; the patch width is the host's (patch_width).
    for bn, stages in ((128, 4), (128, 5), (128, 6), (256, 3), (64, 4), (64, 6), (160, 4), (192, 4)):
        named[f"WS{bn}_S{stages}"] = {"BN": bn, "STAGES": stages}
        named[f"WS{bn}_S{stages}_P"] = {"BN": bn, "STAGES": stages, "persistent": True}  # a group per SM
        named[f"WS{bn}_S{stages}_R"] = {"BN": bn, "STAGES": stages, "BOX": "rows"}  # a box per patch row
        for split in (2, 3, 4):  # K in SPLIT ranges, then conv_ws_finish: more groups where tiles are few
            named[f"WS{bn}_S{stages}_K{split}"] = {"BN": bn, "STAGES": stages, "SPLIT": split}
        for width in (8, 16, 32, 64):  # the patch width given, not the host's
            named[f"WS{bn}_S{stages}_PW{width}"] = {"BN": bn, "STAGES": stages, "PW": width}
            named[f"WS{bn}_S{stages}_PW{width}_R"] = {"BN": bn, "STAGES": stages, "PW": width, "BOX": "rows"}
    return named


def main(argv: list[str] | None = None) -> int:
    named = configs()
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shapes", nargs="+", default=list(SHAPES), choices=list(SHAPES))
    ap.add_argument("--configs", nargs="+", default=list(named), choices=list(named))
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "f16"])
    ap.add_argument("--nchw", action="store_true", help="also time the NCHW-writing epilogue")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--batch", type=int, default=10)
    ap.add_argument("--check-only", action="store_true",
                    help="one launch per configuration, checked, no timing (for Nsight Compute)")
    args = ap.parse_args(argv)

    import torch
    import torch.nn.functional as F

    from iron import bf16, f16
    from iron.std.conv_mma import conv_grid, conv_mma
    from iron.std.conv_wg import conv_wg, conv_wg_grid
    from iron.std.conv_ws import (conv_ws, conv_ws_finish, conv_ws_finish_geometry, conv_ws_geometry,
                                  conv_ws_part_shape, conv_ws_runs, patch_width)

    dt, tdt = (bf16, torch.bfloat16) if args.dtype == "bf16" else (f16, torch.float16)
    torch.backends.cudnn.benchmark = True
    gen = torch.Generator(device="cuda").manual_seed(0)
    status = 0
    for shape in args.shapes:
        n, c, h, wd, co, kh, kw, s, p, groups = SHAPES[shape]
        sh, ph = (1, 0) if h == 1 else (s, p)
        h_out = (h + 2 * ph - kh) // sh + 1
        w_out = (wd + 2 * p - kw) // s + 1
        n_pix = n * h_out * w_out
        x = torch.randn(n, c, h, wd, device="cuda", dtype=tdt, generator=gen)
        w = torch.randn(co, c // groups, kh, kw, device="cuda", dtype=tdt, generator=gen)
        w /= (c // groups * kh * kw) ** 0.5
        xl, wl = x.to(memory_format=torch.channels_last), w.to(memory_format=torch.channels_last)

        def cudnn(xx: Any, ww: Any) -> Any:
            return F.conv2d(xx, ww, None, (sh, s), (ph, p), 1, groups)

        want = cudnn(x, w).float()
        ref = {"contiguous": 1.0, "channels_last": 1.0}  # --check-only: nothing timed
        cudnn_kernel = 1.0
        if not args.check_only:
            ref = {"contiguous": median_ms(torch, lambda: cudnn(x, w), args.reps, batch=args.batch),
                   "channels_last": median_ms(torch, lambda: cudnn(xl, wl), args.reps, batch=args.batch)}
            faster = (lambda: cudnn(x, w)) if ref["contiguous"] <= ref["channels_last"] else (lambda: cudnn(xl, wl))
            cudnn_kernel = kernel_us(torch, faster, 20)
        best = min(ref.values())
        flops = 2.0 * n_pix * co * (c // groups) * kh * kw
        x_nhwc = xl.permute(0, 2, 3, 1)  # channels-last storage: these views are contiguous NHWC
        w_nhwc = wl.permute(0, 2, 3, 1)
        assert x_nhwc.is_contiguous() and w_nhwc.is_contiguous()
        unread = torch.zeros(8, device="cuda", dtype=tdt)  # bias and residual, not read (has_bias = has_res = 0)
        for name in args.configs:
            cfg = named[name]
            if name.startswith("WS"):
                if not conv_ws_runs((sh, s), groups, wd):
                    continue  # conv_ws: one group, stride 1 or 2 along an even W
                cfg = {"PW": patch_width(h_out, w_out), "BOX": "patch" if s == 1 else "rows", **cfg, "S": s}
                sms = torch.cuda.get_device_properties(0).multi_processor_count if cfg.pop("persistent", False) \
                    else None
            for nchw in ((0, 1) if args.nchw else (0,)):
                y = torch.full((n, co, h_out, w_out) if nchw else (n, h_out, w_out, co), float("nan"), device="cuda",
                               dtype=tdt)
                wg = name.startswith("WG")
                if name.startswith("WS"):
                    kern = conv_ws.variant(T=dt, ACT="none", **cfg)
                    grid, group = conv_ws_geometry(cfg, n, h_out, w_out, co, sms)
                    split = cfg.get("SPLIT", 1)
                    part = torch.empty(conv_ws_part_shape(cfg, n, h_out, w_out, co) if split > 1 else (1,),
                                       device="cuda", dtype=torch.float32)
                    finish = conv_ws_finish.variant(T=dt, ACT="none", SPLIT=split) if split > 1 else None
                    fgrid, fgroup = conv_ws_finish_geometry(n, h_out, w_out, co)

                    def run() -> None:
                        kern.launch(x_nhwc, w_nhwc, unread, unread, y, part, n, c, h, wd // s, co, kh, kw, sh, ph, p,
                                    1, 1, h_out, w_out, nchw, 0, 0, c, grid=grid, group=group, backend="cuda")
                        if finish is not None:
                            finish.launch(part, unread, unread, y, n, h_out, w_out, co, cfg["PW"], part.shape[-1],
                                          nchw, 0, 0, grid=fgrid, group=fgroup, backend="cuda")
                else:
                    kern = (conv_wg if wg else conv_mma).variant(T=dt, ACT="none", **cfg)
                    grid, group = (conv_wg_grid if wg else conv_grid)(cfg, n_pix, co // groups, groups)

                    def run() -> None:
                        kern.launch(x_nhwc, w_nhwc, unread, unread, y, c, h, wd, co, kw, sh, s, ph, p, 1, 1, h_out,
                                    w_out, n_pix, kh * kw, c // groups, co // groups, nchw, 0, 0, grid=grid,
                                    group=group, backend="cuda")

                run()
                torch.cuda.synchronize()
                got = (y if nchw else y.permute(0, 3, 1, 2)).float()
                err = ((got - want).abs().max() / want.abs().max()).item()
                if args.check_only:
                    print(json.dumps({"shape": shape, "config": name, "rel_err": err, "ok": err < 2.0 ** -7}))
                    status |= 0 if err < 2.0 ** -7 else 1
                    continue
                ms = median_ms(torch, run, args.reps, batch=args.batch)
                profiled = kernel_us(torch, run, 20)  # the GPU's time alone: a launch slower than its kernel shows
                ok = err < 2.0 ** -7
                status |= 0 if ok else 1
                print(json.dumps({"shape": shape, "config": name, "out": "NCHW" if nchw else "NHWC",
                                  "dtype": args.dtype, "iron_us": round(ms * 1e3, 2),
                                  "iron_kernel_us": round(profiled, 2),
                                  "cudnn_us": {k: round(v * 1e3, 2) for k, v in ref.items()},
                                  "cudnn_kernel_us": round(cudnn_kernel, 2),
                                  "kernel_ratio": round(cudnn_kernel / profiled, 3),
                                  "iron_tflops": round(flops / ms / 1e9, 1),
                                  "cudnn_tflops": round(flops / best / 1e9, 1), "ratio": round(best / ms, 3),
                                  "rel_err": err, "ok": ok}), flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
