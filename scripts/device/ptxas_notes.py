"""The NVRTC version and ptxas's performance notes (C75xx: serialized wgmma, ignored setmaxnreg) for kernel variants,
compiled by this machine's NVRTC for sm_90a, with their register and spill counts.

Run: ``PYTHONPATH=src python3 scripts/device/ptxas_notes.py iron.std.attention_ws:attention_prefill_ws T=bf16,D=128``
(one MODULE:KERNEL and one or more bindings; values parsed as ints, True/False or dtype names).  With $OUT set,
each variant's source and CUBIN are written there."""

from __future__ import annotations

import importlib
import os
import sys


def _value(text: str):
    import iron

    if text in ("True", "False"):
        return text == "True"
    if text.lstrip("-").isdigit():
        return int(text)
    return getattr(iron, text, text)  # a dtype's name, else the string itself


def main() -> None:
    from iron.codegen.emit import emit_kernel
    from iron.codegen.toolchains import nvrtc

    module, name = sys.argv[1].split(":")
    kern = getattr(importlib.import_module(module), name)
    print("nvrtc", nvrtc.version())
    for spec in sys.argv[2:]:
        binding = {k: _value(v) for k, v in (kv.split("=") for kv in spec.split(","))}
        source = emit_kernel(kern.variant(**binding).compiled("cuda"), "cuda").source
        art = nvrtc.compile_cuda(source, arch="sm_90a")
        notes = [ln.strip() for ln in art.log.splitlines() if "C75" in ln or "Potential" in ln]
        k = next(iter(art.report["kernels"].values()), {})
        print(spec, {key: k.get(key) for key in ("registers", "spill_stores", "spill_loads")}, notes or "no notes",
              flush=True)
        out = os.environ.get("OUT")
        if out:  # the source and the binary, to compare with another machine's
            tag = spec.replace(",", "_").replace("=", "")
            with open(os.path.join(out, f"{name}_{tag}.cu"), "w") as f:
                f.write(source)
            with open(os.path.join(out, f"{name}_{tag}.cubin"), "wb") as f:
                f.write(art.binary)


if __name__ == "__main__":
    main()
