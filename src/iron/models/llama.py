"""A Llama-architecture decoder on iron.std: token embedding, N blocks of RMSNorm -> Q/K/V projections -> RoPE ->
attention over a paged KV cache with grouped-query heads -> output projection -> residual add + RMSNorm -> SwiGLU
MLP -> residual, the final norm and the LM head; greedy decoding.

Every step is an iron.std call (``norms.rmsnorm`` / ``add_rmsnorm``, ``gemm.gemm`` (gemv at one row) or
``quant_gemv.quant_gemv`` and ``gguf.dequantize`` on quantised weights, ``rope.rope``,
``attention.append_paged_kv`` and ``decode_attention_paged``, ``elementwise.binary``) or one of two Iron kernels
of this package (the embedding's gather and SwiGLU, :mod:`iron.models.kernels`).  On the CPU the
arrays are numpy (the interpreter, or Vulkan through ``backend``); with ``device="cuda"`` they are torch CUDA
tensors and the kernels run on CUDA.

Sequences of a batch run in lock step, one position a step: sequence b feeds its prompt's tokens while it has
any, then its own greedy tokens, so prompts of different lengths need no padding (each sequence's first new token
comes from the step of its prompt's last).  RoPE rotates adjacent pairs (llama.cpp's LLAMA_ROPE_TYPE_NORM, which
its converters permute Q and K weights for).  Quantised GGUF projections stay quantised: a step of one sequence
multiplies their bytes directly (``quant_gemv.quant_gemv``: a decode reads 4-8 bits a weight, not 16), a batch
multiplies a float copy that ``gguf.dequantize`` makes on the device the first time one is needed; a quantised
embedding table is dequantised when the model loads (the gather reads floats).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from iron import LaunchError
from iron.std import attention, elementwise, gemm, gguf, norms, quant_gemv, rope
from iron.std._host import ceil_div, dtype_of, empty_like

from .gguf_file import LlamaConfig, QuantTensor, read_llama
from .kernels import GROUP, embedding_rows, swiglu

#: Keys a page of the KV cache holds.
PAGE = 16


@dataclass
class Linear:
    """A projection's (out, in) weight: a float array, or ``data`` quantised as ``qtype`` (its float copy made on
    the device when a batch first needs it)."""

    rows: int
    cols: int
    weight: Any = None
    data: Any = None
    qtype: str = ""

    def __call__(self, h: Any, backend: str | None) -> Any:
        """h (batch, in) @ W^T: (batch, out)."""
        batch = h.shape[0]
        if self.data is not None and batch == 1:
            return quant_gemv.quant_gemv(self.data, self.qtype, h.reshape(self.cols), self.rows, self.cols,
                                         backend=backend).reshape(1, self.rows)
        if self.weight is None:
            self.weight = gguf.dequantize(self.data, self.qtype, (self.rows, self.cols), dtype_of(h),
                                          backend=backend)
        return gemm.gemm(h, self.weight, transpose_b=True, backend=backend)


@dataclass
class Block:
    """One decoder block's norms and projections."""

    attn_norm: Any
    wq: Linear
    wk: Linear
    wv: Linear
    wo: Linear
    ffn_norm: Any
    w_gate: Linear
    w_up: Linear
    w_down: Linear


def _dequantised(t: Any) -> np.ndarray:
    if not isinstance(t, QuantTensor):
        return np.asarray(t)
    import gguf.quants

    return gguf.quants.dequantize(t.data, getattr(gguf.GGMLQuantizationType, t.qtype)).reshape(t.rows, t.cols)


class Llama:
    """A Llama decoder's weights on a device and its greedy decoding (:meth:`generate`)."""

    def __init__(self, config: LlamaConfig, tensors: dict[str, Any], dtype: Any = np.float32, device: str = "cpu",
                 backend: str | None = None) -> None:
        if config.hidden % config.heads or config.heads % config.kv_heads:
            raise LaunchError(f"llama: {config.heads} heads must divide the hidden size {config.hidden} and be a "
                              f"multiple of the {config.kv_heads} KV heads")
        if config.head_dim not in (64, 128):
            raise LaunchError(f"llama: iron.std.attention takes heads of 64 or 128; this model's are {config.head_dim}")
        self.config, self.device, self.backend = config, device, backend
        self.dtype = np.dtype(dtype)

        def weight(name: str) -> Any:
            if name not in tensors:
                raise LaunchError(f"llama: the weights have no {name!r}")
            return self._to_device(_dequantised(tensors[name]).astype(self.dtype))

        def linear(name: str) -> Linear:
            t = tensors.get(name)
            if isinstance(t, QuantTensor):
                return Linear(t.rows, t.cols, data=self._to_device(np.ascontiguousarray(t.data)), qtype=t.qtype)
            w = weight(name)
            return Linear(w.shape[0], w.shape[1], weight=w)

        self.embedding = weight("token_embd.weight")
        self.blocks = [Block(weight(f"blk.{i}.attn_norm.weight"), *(linear(f"blk.{i}.{n}.weight") for n in (
            "attn_q", "attn_k", "attn_v", "attn_output")), weight(f"blk.{i}.ffn_norm.weight"),
            *(linear(f"blk.{i}.{n}.weight") for n in ("ffn_gate", "ffn_up", "ffn_down"))) for i in range(config.layers)]
        self.output_norm = weight("output_norm.weight")
        tied = "output.weight" not in tensors
        self.output = (Linear(config.vocab, config.hidden, weight=self.embedding) if tied  # tied to the embedding
                       else linear("output.weight"))

    @classmethod
    def from_gguf(cls, path: str | Path, **kwargs: Any) -> "Llama":
        """The model of a Llama GGUF file (:func:`iron.models.gguf_file.read_llama`)."""
        config, tensors = read_llama(path)
        return cls(config, tensors, **kwargs)

    # ------------------------------------------------------------ arrays

    def _to_device(self, x: np.ndarray) -> Any:
        if self.device == "cpu":
            return np.ascontiguousarray(x)
        import torch

        if x.dtype.name == "bfloat16":
            return torch.from_numpy(x.view(np.uint16).astype(np.int16)).view(torch.bfloat16).to(self.device)
        return torch.from_numpy(np.ascontiguousarray(x)).to(self.device)

    def _empty(self, shape: tuple[int, ...], like: Any) -> Any:
        return empty_like(like, shape, dtype_of(like))

    def _host(self, x: Any) -> np.ndarray:
        if isinstance(x, np.ndarray):
            return x
        return x.float().cpu().numpy()

    # ------------------------------------------------------------ one step

    def new_cache(self, batch: int, positions: int) -> tuple[list[tuple[Any, Any]], Any]:
        """A paged KV cache for ``batch`` sequences of up to ``positions`` tokens: per block (k_pages, v_pages)
        (pages, PAGE, H_kv, D), and the block table (batch, pages a sequence), sequence b on pages b W .. ."""
        c = self.config
        width = ceil_div(positions, PAGE)
        pools = [tuple(self._to_device(np.zeros((batch * width, PAGE, c.kv_heads, c.head_dim), self.dtype))
                       for _ in range(2)) for _ in range(c.layers)]
        table = self._to_device(np.arange(batch * width, dtype=np.int32).reshape(batch, width))
        return pools, table

    def step(self, tokens: np.ndarray, position: int, cache: tuple[list[tuple[Any, Any]], Any]) -> Any:
        """The logits (batch, vocab) after feeding ``tokens`` (batch,) at ``position`` of every sequence, whose
        keys and values go into ``cache`` (:meth:`new_cache`)."""
        c, be = self.config, self.backend
        pools, table = cache
        b = len(tokens)
        ids = self._to_device(np.asarray(tokens, np.int32))
        pos = self._to_device(np.full(b, position, np.int32))
        lens = self._to_device(np.full(b, position + 1, np.int32))
        x = self._empty((b, c.hidden), self.embedding)
        n = b * c.hidden
        embedding_rows.variant(T=dtype_of(x)).launch(self.embedding, ids, x, c.vocab, c.hidden, n,
                                                     grid=(ceil_div(n, GROUP) * GROUP,), group=(GROUP,), backend=be)
        d = c.head_dim
        for blk, (k_pages, v_pages) in zip(self.blocks, pools):
            h = norms.rmsnorm(x, blk.attn_norm, eps=c.eps, backend=be)
            q = blk.wq(h, be).reshape(b, c.heads, d)
            k = blk.wk(h, be).reshape(b, c.kv_heads, d)
            v = blk.wv(h, be).reshape(b, c.kv_heads, d)
            q = rope.rope(q, pos, layout="interleaved", theta=c.rope_theta, out=q, backend=be)
            k = rope.rope(k, pos, layout="interleaved", theta=c.rope_theta, out=k, backend=be)
            attention.append_paged_kv(k, v, k_pages, v_pages, table, pos, backend=be)
            a = attention.decode_attention_paged(q, k_pages, v_pages, table, lens, backend=be)
            o = blk.wo(a.reshape(b, c.heads * d), be)
            h, x = norms.add_rmsnorm(o, x, blk.ffn_norm, eps=c.eps, backend=be)
            gate = blk.w_gate(h, be)
            up = blk.w_up(h, be)
            m = b * c.ffn
            swiglu.variant(T=dtype_of(gate)).launch(gate, up, gate, m, grid=(ceil_div(m, GROUP) * GROUP,),
                                                     group=(GROUP,), backend=be)
            x = elementwise.binary("add", blk.w_down(gate, be), x, backend=be)
        return self.output(norms.rmsnorm(x, self.output_norm, eps=c.eps, backend=be), be)

    # ------------------------------------------------------------ decoding

    def generate(self, prompts: list[list[int]], max_new: int,
                 on_step: Callable[[int, np.ndarray], None] | None = None) -> list[list[int]]:
        """Greedy continuations of ``max_new`` tokens for each prompt (token ids, at least one each), the
        sequences in lock step (module docstring).  ``on_step(position, logits)`` sees every step's logits
        (batch, vocab) as numpy f32."""
        if not prompts or any(len(p) == 0 for p in prompts):
            raise LaunchError("llama: give every sequence a prompt of at least one token")
        if any(t < 0 or t >= self.config.vocab for p in prompts for t in p):
            raise LaunchError(f"llama: prompt tokens must lie in [0, {self.config.vocab})")
        total = max(len(p) for p in prompts) + max_new - 1
        cache = self.new_cache(len(prompts), total)
        new: list[list[int]] = [[] for _ in prompts]
        fed = [p[0] for p in prompts]
        for position in range(total):
            logits = self._host(self.step(np.asarray(fed, np.int32), position, cache)).astype(np.float32)
            if on_step is not None:
                on_step(position, logits)
            for i, p in enumerate(prompts):
                if position + 1 < len(p):
                    fed[i] = p[position + 1]
                    continue
                if len(new[i]) < max_new:
                    new[i].append(int(np.argmax(logits[i])))
                fed[i] = new[i][-1]
        return new


__all__ = ["Block", "Linear", "Llama", "PAGE"]
