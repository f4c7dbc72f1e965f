"""Which part of a kernel makes NVRTC 13.0 leave out ptxas's -v report (a probe for the GPU machine)."""
import subprocess
import sys

from iron.codegen.toolchains import nvrtc

src = subprocess.run([sys.executable, "-m", "iron", "inspect", "examples/quickstart.py:group_sum", "--variant",
                      "T=f16", "--emit", "cuda"], capture_output=True, text=True).stdout
variants = {
    "as_emitted": src,
    "no_static_assert": src.replace('static_assert(sizeof(IronParams) == 16, "parameter block layout (abi.py)");', ""),
    "no_comments": "\n".join(l for l in src.splitlines() if not l.lstrip().startswith("//")),
    "no_fp16_header": src.replace("#include <cuda_fp16.h>", "#include <cuda_fp16.h>\n").replace("__half2float(v1)", "(float)v1"),
}
for name, text in variants.items():
    for opts in ((), ("-lineinfo",), ("--ptxas-options=--warn-on-spills",)):
        art = nvrtc.compile_cuda(text, arch="sm_90", want="cubin", options=opts)
        print(name, opts, "report:", bool(art.report["kernels"]), "log bytes:", len(art.log), repr(art.log[:80]))
