"""Every iron.std host function as a torch op: ``iron::<name>`` returns new tensors, ``iron::<name>_out``
writes the ``out`` tensors it is given.  The Python functions here are what a PyTorch model calls
(``iron.torch.rmsnorm(x, w)``); each fake implementation is the output rule of the std function's contract.

Annotations are real objects here (no ``from __future__ import annotations``): torch reads the op schema off
them.  The backend is never an argument: a launch runs where its tensors live.
"""

from collections.abc import Sequence
from typing import Any, Optional

import torch
from torch import Tensor

from ..std import attention, cast as _cast, conv, elementwise, gemm as _gemm, gemv as _gemv, gguf, norms
from ..std import quant_gemv as _quant_gemv
from ..std import reduce, rope as _rope, softmax as _softmax, transpose as _transpose
from ._ops import LibraryOp, library_op


def _like(x: Tensor, shape: Sequence[int] | None = None, dtype: torch.dtype | None = None) -> Tensor:
    return x.new_empty(tuple(x.shape) if shape is None else tuple(shape), dtype=dtype or x.dtype)


def _same_as(name: str):
    return lambda a: _like(a[name])


# ---------------------------------------------------------------- elementwise


def _unary_op(op: str) -> LibraryOp:
    def fn(x: Tensor, *, out: Optional[Tensor] = None) -> Tensor:
        return elementwise.unary(op, x, out=out)

    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = f"``{op}(x)`` elementwise: :func:`iron.std.elementwise.unary` as ``torch.ops.iron.{op}``."
    return LibraryOp(fn, _same_as("x"))


def _binary_op(op: str) -> LibraryOp:
    def fn(a: Tensor, b: Tensor, *, out: Optional[Tensor] = None) -> Tensor:
        return elementwise.binary(op, a, b, out=out)

    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = f"``a {op} b`` elementwise: :func:`iron.std.elementwise.binary` as ``torch.ops.iron.{op}``."
    return LibraryOp(fn, _same_as("a"))


UNARY = {op: _unary_op(op) for op in elementwise.UNARY_OPS}
BINARY = {op: _binary_op(op) for op in elementwise.BINARY_OPS}


@library_op(_same_as("x"))
def unary(op: str, x: Tensor, *, out: Optional[Tensor] = None) -> Tensor:
    """:func:`iron.std.elementwise.unary`."""
    return elementwise.unary(op, x, out=out)


@library_op(_same_as("a"))
def binary(op: str, a: Tensor, b: Tensor, *, out: Optional[Tensor] = None) -> Tensor:
    """:func:`iron.std.elementwise.binary`."""
    return elementwise.binary(op, a, b, out=out)


@library_op(_same_as("x"))
def clamp(x: Tensor, lo: Optional[float] = None, hi: Optional[float] = None, *,
          out: Optional[Tensor] = None) -> Tensor:
    """:func:`iron.std.elementwise.clamp`."""
    return elementwise.clamp(x, lo, hi, out=out)


@library_op(_same_as("a"))
def fma(a: Tensor, b: Tensor, c: Tensor, *, out: Optional[Tensor] = None) -> Tensor:
    """:func:`iron.std.elementwise.fma`."""
    return elementwise.fma(a, b, c, out=out)


@library_op(_same_as("a"))
def where(cond: Tensor, a: Tensor, b: Tensor, *, out: Optional[Tensor] = None) -> Tensor:
    """:func:`iron.std.elementwise.where`."""
    return elementwise.where(cond, a, b, out=out)


# ---------------------------------------------------------------- layout and type


@library_op(lambda a: _like(a["x"], dtype=a["dtype"]))
def cast(x: Tensor, dtype: torch.dtype, *, out: Optional[Tensor] = None) -> Tensor:
    """:func:`iron.std.cast.cast` (``dtype``: torch.float32, torch.float16 or torch.bfloat16)."""
    return _cast.cast(x, dtype, out=out)


@library_op(_same_as("x"))
def copy(x: Tensor, *, out: Optional[Tensor] = None) -> Tensor:
    """:func:`iron.std.cast.copy`."""
    return _cast.copy(x, out=out)


@library_op(lambda a: _like(a["x"], tuple(reversed(a["x"].shape))))
def transpose(x: Tensor, *, out: Optional[Tensor] = None) -> Tensor:
    """:func:`iron.std.transpose.transpose` of a 2-D tensor."""
    return _transpose.transpose(x, out=out)


# ---------------------------------------------------------------- reductions and rows


def _reduced(a: dict[str, Any], dtype: torch.dtype | None = None) -> Tensor:
    x = a["x"]
    return _like(x, () if a["axis"] is None else tuple(x.shape[:-1]), dtype)


def _reduction(std_fn: Any, dtype: torch.dtype | None = None) -> LibraryOp:
    def fn(x: Tensor, axis: Optional[int] = -1, *, out: Optional[Tensor] = None) -> Tensor:
        return std_fn(x, axis, out=out)

    fn.__name__ = fn.__qualname__ = std_fn.__name__
    fn.__doc__ = f":func:`iron.std.reduce.{std_fn.__name__}` (axis -1 or None)."
    return LibraryOp(fn, lambda a: _reduced(a, dtype))


sum = _reduction(reduce.sum)  # noqa: A001 - the op's name
mean = _reduction(reduce.mean)
max = _reduction(reduce.max)  # noqa: A001
min = _reduction(reduce.min)  # noqa: A001
argmax = _reduction(reduce.argmax, torch.int32)


@library_op(_same_as("x"))
def softmax(x: Tensor, *, out: Optional[Tensor] = None) -> Tensor:
    """:func:`iron.std.softmax.softmax` over the last axis."""
    return _softmax.softmax(x, out=out)


@library_op(_same_as("x"))
def log_softmax(x: Tensor, *, out: Optional[Tensor] = None) -> Tensor:
    """:func:`iron.std.softmax.log_softmax` over the last axis."""
    return _softmax.log_softmax(x, out=out)


@library_op(_same_as("x"))
def layernorm(x: Tensor, weight: Tensor, bias: Optional[Tensor] = None, eps: float = 1e-5, *,
              out: Optional[Tensor] = None) -> Tensor:
    """:func:`iron.std.norms.layernorm`."""
    return norms.layernorm(x, weight, bias, eps, out=out)


@library_op(_same_as("x"))
def rmsnorm(x: Tensor, weight: Tensor, eps: float = 1e-6, *, out: Optional[Tensor] = None) -> Tensor:
    """:func:`iron.std.norms.rmsnorm`."""
    return norms.rmsnorm(x, weight, eps, out=out)


@library_op(lambda a: (_like(a["x"]), _like(a["x"])), outs=("out", "residual_out"))
def add_rmsnorm(x: Tensor, residual: Tensor, weight: Tensor, eps: float = 1e-6, *, out: Optional[Tensor] = None,
                residual_out: Optional[Tensor] = None) -> tuple[Tensor, Tensor]:
    """:func:`iron.std.norms.add_rmsnorm`: ``(rmsnorm(x + residual) * weight, x + residual)``."""
    return norms.add_rmsnorm(x, residual, weight, eps, out=out, residual_out=residual_out)


@library_op(_same_as("x"))
def rope(x: Tensor, positions: Tensor, layout: str = "half", theta: float = 10000.0, *,
         out: Optional[Tensor] = None) -> Tensor:
    """:func:`iron.std.rope.rope` by i32 positions (angles computed in the kernel)."""
    return _rope.rope(x, positions, layout, out=out, theta=theta)


@library_op(_same_as("x"))
def rope_cached(x: Tensor, cos: Tensor, sin: Tensor, layout: str = "half", *,
                out: Optional[Tensor] = None) -> Tensor:
    """:func:`iron.std.rope.rope` by a ``(cos, sin)`` table pair (:func:`iron.std.rope.rope_cache`)."""
    return _rope.rope(x, (cos, sin), layout, out=out)


# ---------------------------------------------------------------- matrix products


@library_op(lambda a: _like(a["x"], (a["A"].shape[1 if a["transpose"] else 0],)))
def gemv(A: Tensor, x: Tensor, transpose: bool = False, *, out: Optional[Tensor] = None) -> Tensor:
    """:func:`iron.std.gemv.gemv`: ``A @ x``, or ``x @ A`` with ``transpose``."""
    return _gemv.gemv(A, x, out=out, transpose=transpose)


@library_op(lambda a: _like(a["a"], (a["a"].shape[0], a["b"].shape[0 if a["transpose_b"] else 1])))
def gemm(a: Tensor, b: Tensor, bias: Optional[Tensor] = None, activation: Optional[str] = None,
         transpose_b: bool = False, *, out: Optional[Tensor] = None) -> Tensor:
    """:func:`iron.std.gemm.gemm`: ``activation(a @ b + bias)``; ``transpose_b`` for an nn.Linear weight."""
    return _gemm.gemm(a, b, bias, activation, out=out, transpose_b=transpose_b)


def _extent(size: int, k: int, stride: int, padding: int, dilation: int) -> int:
    return (size + 2 * padding - dilation * (k - 1) - 1) // stride + 1


def _pairs(*values: Sequence[int]) -> list[tuple[int, int]]:
    return [(v[0], v[0]) if len(v) == 1 else (v[0], v[1]) for v in values]


def _conv2d_out(a: dict[str, Any], depthwise: bool) -> Tensor:
    x, w = a["x"], a["w"]
    nhwc = a["layout"] == "NHWC"
    n, h, wd = (x.shape[0], x.shape[1], x.shape[2]) if nhwc else (x.shape[0], x.shape[2], x.shape[3])
    kh, kw = (w.shape[2], w.shape[3]) if depthwise or not nhwc else (w.shape[1], w.shape[2])
    c_out = w.shape[0]
    (sh, sw), (ph, pw), (dh, dw) = _geometry(a["stride"], a["padding"], a["dilation"])
    ho, wo = _extent(h, kh, sh, ph, dh), _extent(wd, kw, sw, pw, dw)
    return _like(x, (n, ho, wo, c_out) if nhwc else (n, c_out, ho, wo))


@library_op(lambda a: _like(a["x"], (a["x"].shape[0], a["w"].shape[0],
                                     _extent(a["x"].shape[2], a["w"].shape[2], a["stride"], a["padding"],
                                             a["dilation"]))))
def conv1d(x: Tensor, w: Tensor, bias: Optional[Tensor] = None, stride: int = 1, padding: int = 0,
           dilation: int = 1, groups: int = 1, activation: Optional[str] = None, residual: Optional[Tensor] = None, *,
           out: Optional[Tensor] = None) -> Tensor:
    """:func:`iron.std.conv.conv1d` (groups, and activation(conv + bias + residual) fused)."""
    return conv.conv1d(x, w, bias, stride, padding, dilation, out=out, groups=groups, activation=activation,
                       residual=residual)


@library_op(lambda a: _conv2d_out(a, False))
def conv2d(x: Tensor, w: Tensor, bias: Optional[Tensor] = None, stride: Optional[Sequence[int]] = None,
           padding: Optional[Sequence[int]] = None, dilation: Optional[Sequence[int]] = None, layout: str = "NCHW",
           groups: int = 1, activation: Optional[str] = None, residual: Optional[Tensor] = None, *,
           out: Optional[Tensor] = None) -> Tensor:
    """:func:`iron.std.conv.conv2d` (stride, padding, dilation: one int or a pair; None: 1, 0, 1; groups, and
    activation(conv + bias + residual) fused)."""
    s, p, d = _geometry(stride, padding, dilation)
    return conv.conv2d(x, w, bias, s, p, d, layout, out=out, groups=groups, activation=activation, residual=residual)


@library_op(lambda a: _conv2d_out(a, True))
def depthwise_conv2d(x: Tensor, w: Tensor, bias: Optional[Tensor] = None, stride: Optional[Sequence[int]] = None,
                     padding: Optional[Sequence[int]] = None, dilation: Optional[Sequence[int]] = None,
                     layout: str = "NCHW", *,
                     out: Optional[Tensor] = None) -> Tensor:
    """:func:`iron.std.conv.depthwise_conv2d` (stride, padding, dilation: one int or a pair; None: 1, 0, 1)."""
    s, p, d = _geometry(stride, padding, dilation)
    return conv.depthwise_conv2d(x, w, bias, s, p, d, layout, out=out)


def _geometry(stride: Any, padding: Any, dilation: Any) -> list[tuple[int, int]]:
    """Stride, padding and dilation as pairs: one int is both extents, None the default (1, 0, 1)."""
    given = [(d,) if v is None else (v,) if isinstance(v, int) else tuple(v)
             for v, d in ((stride, 1), (padding, 0), (dilation, 1))]
    return _pairs(*given)


# ---------------------------------------------------------------- quantised weights and attention


@library_op(lambda a: _like(a["data"], tuple(a["shape"]), a["dtype"]))
def dequantize(data: Tensor, qtype: str, shape: Sequence[int], dtype: torch.dtype = torch.float32, *,
               out: Optional[Tensor] = None) -> Tensor:
    """:func:`iron.std.gguf.dequantize` of GGUF blocks (uint8 ``data``) to a ``shape`` float tensor."""
    return gguf.dequantize(data, qtype, tuple(shape), dtype, out=out)


@library_op(lambda a: _like(a["x"], (a["M"],)))
def quant_gemv(data: Tensor, qtype: str, x: Tensor, M: int, K: int, *, out: Optional[Tensor] = None) -> Tensor:
    """:func:`iron.std.quant_gemv.quant_gemv`: ``W @ x`` on GGUF-quantised ``W`` (M, K)."""
    return _quant_gemv.quant_gemv(data, qtype, x, M, K, out=out)


@library_op(_same_as("q"))
def decode_attention(q: Tensor, k_cache: Tensor, v_cache: Tensor, seq_lens: Tensor, scale: Optional[float] = None,
                     *, out: Optional[Tensor] = None) -> Tensor:
    """:func:`iron.std.attention.decode_attention` over each sequence's first ``seq_lens[b]`` cached keys."""
    return attention.decode_attention(q, k_cache, v_cache, seq_lens, scale, out=out)


@library_op(_same_as("q"))
def decode_attention_paged(q: Tensor, k_pages: Tensor, v_pages: Tensor, block_table: Tensor, seq_lens: Tensor,
                           scale: Optional[float] = None, *, out: Optional[Tensor] = None) -> Tensor:
    """:func:`iron.std.attention.decode_attention_paged` over a cache of pages."""
    return attention.decode_attention_paged(q, k_pages, v_pages, block_table, seq_lens, scale, out=out)


@library_op(_same_as("q"))
def prefill_attention(q: Tensor, k: Tensor, v: Tensor, causal: bool = True, scale: Optional[float] = None, *,
                      out: Optional[Tensor] = None) -> Tensor:
    """:func:`iron.std.attention.prefill_attention`."""
    return attention.prefill_attention(q, k, v, causal, scale, out=out)


@library_op(_same_as("q"))
def prefill_attention_varlen(q: Tensor, k: Tensor, v: Tensor, cu_seqlens: Tensor, max_seqlen: Optional[int] = None,
                             causal: bool = True, scale: Optional[float] = None, *,
                             out: Optional[Tensor] = None) -> Tensor:
    """:func:`iron.std.attention.prefill_attention_varlen` over packed sequences."""
    return attention.prefill_attention_varlen(q, k, v, cu_seqlens, max_seqlen, causal, scale, out=out)


@library_op(_same_as("q"))
def prefill_attention_paged(q: Tensor, k_pages: Tensor, v_pages: Tensor, block_table: Tensor, cu_seqlens: Tensor,
                            seq_lens: Tensor, max_seqlen: Optional[int] = None, causal: bool = True,
                            scale: Optional[float] = None, *, out: Optional[Tensor] = None) -> Tensor:
    """:func:`iron.std.attention.prefill_attention_paged`: packed queries over a cache of pages."""
    return attention.prefill_attention_paged(q, k_pages, v_pages, block_table, cu_seqlens, seq_lens, max_seqlen,
                                             causal, scale, out=out)


#: Every op by name (``iron::<name>``), the elementwise ones included.
OPS: dict[str, LibraryOp] = {
    **UNARY, **BINARY,
    **{op.name: op for op in (unary, binary, clamp, fma, where, cast, copy, transpose, sum, mean, max, min, argmax,
                              softmax, log_softmax, layernorm, rmsnorm, add_rmsnorm, rope, rope_cached, gemv, gemm,
                              conv1d, conv2d, depthwise_conv2d, dequantize, quant_gemv, decode_attention,
                              decode_attention_paged, prefill_attention, prefill_attention_paged,
                              prefill_attention_varlen)},
}

#: The std host function each op runs, for the completeness test: (module, function).
COVERS = {**{op: ("elementwise", op) for op in (*elementwise.UNARY_OPS, *elementwise.BINARY_OPS)},
          "unary": ("elementwise", "unary"), "binary": ("elementwise", "binary"),
          "clamp": ("elementwise", "clamp"), "fma": ("elementwise", "fma"), "where": ("elementwise", "where"),
          "cast": ("cast", "cast"), "copy": ("cast", "copy"), "transpose": ("transpose", "transpose"),
          "sum": ("reduce", "sum"), "mean": ("reduce", "mean"), "max": ("reduce", "max"), "min": ("reduce", "min"),
          "argmax": ("reduce", "argmax"), "softmax": ("softmax", "softmax"),
          "log_softmax": ("softmax", "log_softmax"), "layernorm": ("norms", "layernorm"),
          "rmsnorm": ("norms", "rmsnorm"), "add_rmsnorm": ("norms", "add_rmsnorm"), "rope": ("rope", "rope"),
          "rope_cached": ("rope", "rope"), "gemv": ("gemv", "gemv"), "gemm": ("gemm", "gemm"),
          "conv1d": ("conv", "conv1d"), "conv2d": ("conv", "conv2d"),
          "depthwise_conv2d": ("conv", "depthwise_conv2d"), "dequantize": ("gguf", "dequantize"),
          "quant_gemv": ("quant_gemv", "quant_gemv"), "decode_attention": ("attention", "decode_attention"),
          "decode_attention_paged": ("attention", "decode_attention_paged"),
          "prefill_attention": ("attention", "prefill_attention"),
          "prefill_attention_varlen": ("attention", "prefill_attention_varlen"),
          "prefill_attention_paged": ("attention", "prefill_attention_paged")}
