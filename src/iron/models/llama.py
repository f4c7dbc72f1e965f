"""A Llama-architecture decoder on iron.std: token embedding, N blocks of RMSNorm -> Q/K/V projections -> RoPE ->
attention over a paged KV cache with grouped-query heads -> output projection -> residual add + RMSNorm -> SwiGLU
MLP -> residual, the final norm and the LM head; greedy decoding.

Every step is an iron.std call (``norms.rmsnorm`` / ``add_rmsnorm``, ``gemm.gemm`` (gemv at one row),
``rope.rope``, ``attention.append_paged_kv`` and ``decode_attention_paged``, ``elementwise.binary``) or one of
two Iron kernels of this package (the embedding's gather and SwiGLU, :mod:`iron.models.kernels`).  On the CPU the
arrays are numpy (the interpreter, or Vulkan through ``backend``); with ``device="cuda"`` they are torch CUDA
tensors and the kernels run on CUDA.

Sequences of a batch run in lock step, one position a step: sequence b feeds its prompt's tokens while it has
any, then its own greedy tokens, so prompts of different lengths need no padding (each sequence's first new token
comes from the step of its prompt's last).  RoPE rotates adjacent pairs (llama.cpp's LLAMA_ROPE_TYPE_NORM, which
its converters permute Q and K weights for).  Quantised GGUF weights are dequantised to the activations' dtype
when the model loads (``gguf.quants``); products on the quantised bytes (iron.std.quant_gemv) are the next step.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from iron import LaunchError
from iron.std import attention, elementwise, gemm, norms, rope
from iron.std._host import ceil_div, dtype_of, empty_like

from .gguf_file import LlamaConfig, QuantTensor, read_llama
from .kernels import GROUP, embedding_rows, swiglu

#: Keys a page of the KV cache holds.
PAGE = 16


@dataclass
class Block:
    """One decoder block's weights, (out, in) each."""

    attn_norm: Any
    wq: Any
    wk: Any
    wv: Any
    wo: Any
    ffn_norm: Any
    w_gate: Any
    w_up: Any
    w_down: Any


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

        self.embedding = weight("token_embd.weight")
        self.blocks = [Block(*(weight(f"blk.{i}.{n}.weight") for n in (
            "attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_up", "ffn_down")))
            for i in range(config.layers)]
        self.output_norm = weight("output_norm.weight")
        self.output = weight("output.weight") if "output.weight" in tensors else self.embedding  # tied

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
            q = gemm.gemm(h, blk.wq, transpose_b=True, backend=be).reshape(b, c.heads, d)
            k = gemm.gemm(h, blk.wk, transpose_b=True, backend=be).reshape(b, c.kv_heads, d)
            v = gemm.gemm(h, blk.wv, transpose_b=True, backend=be).reshape(b, c.kv_heads, d)
            q = rope.rope(q, pos, layout="interleaved", theta=c.rope_theta, out=q, backend=be)
            k = rope.rope(k, pos, layout="interleaved", theta=c.rope_theta, out=k, backend=be)
            attention.append_paged_kv(k, v, k_pages, v_pages, table, pos, backend=be)
            a = attention.decode_attention_paged(q, k_pages, v_pages, table, lens, backend=be)
            o = gemm.gemm(a.reshape(b, c.heads * d), blk.wo, transpose_b=True, backend=be)
            h, x = norms.add_rmsnorm(o, x, blk.ffn_norm, eps=c.eps, backend=be)
            gate = gemm.gemm(h, blk.w_gate, transpose_b=True, backend=be)
            up = gemm.gemm(h, blk.w_up, transpose_b=True, backend=be)
            m = b * c.ffn
            swiglu.variant(T=dtype_of(gate)).launch(gate, up, gate, m, grid=(ceil_div(m, GROUP) * GROUP,),
                                                     group=(GROUP,), backend=be)
            x = elementwise.binary("add", gemm.gemm(gate, blk.w_down, transpose_b=True, backend=be), x, backend=be)
        h = norms.rmsnorm(x, self.output_norm, eps=c.eps, backend=be)
        return gemm.gemm(h, self.output, transpose_b=True, backend=be)

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


__all__ = ["Block", "Llama", "PAGE"]
