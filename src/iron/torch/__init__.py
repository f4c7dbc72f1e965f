"""iron.torch: Iron as a PyTorch citizen.

Importing it registers every :mod:`iron.std` host function as a ``torch.library`` custom op
(``torch.ops.iron.rmsnorm``, ``torch.ops.iron.rmsnorm_out``, ...) with a fake implementation from its contract,
so ``torch.compile(model, fullgraph=True)`` traces a model that calls them with no graph break, and
:func:`kernel_op` makes a user's kernel an op with one decorator.  The functions here take torch tensors and
run where they live (a CUDA tensor on its GPU, a CPU tensor on the interpreter)::

    import iron.torch as it
    y = it.rmsnorm(x, w)                       # eager: iron.std.norms.rmsnorm, no op dispatch
    f = torch.compile(model, fullgraph=True)   # traced: torch.ops.iron.rmsnorm

docs/torch.md ("Iron in PyTorch") has a complete example.
"""

from .kernels import KernelOp, kernel_op, kernel_schema
from .std_ops import (BINARY, OPS, UNARY, add_rmsnorm, argmax, binary, cast, clamp, conv1d, conv2d, copy,
                      decode_attention, decode_attention_paged, depthwise_conv2d, dequantize, fma, gemm, gemv,
                      layernorm, log_softmax, max, mean, min, prefill_attention, prefill_attention_paged,
                      prefill_attention_varlen, quant_gemv, rmsnorm, rope, rope_cached, softmax, sum, transpose, unary,
                      where)

globals().update(UNARY)
globals().update(BINARY)

__all__ = ["KernelOp", "OPS", "kernel_op", "kernel_schema", *sorted(OPS)]
