"""A Llama-architecture decoder on iron.std: token embedding, N blocks of RMSNorm -> Q/K/V projections -> RoPE ->
attention over a paged KV cache with grouped-query heads -> output projection -> residual add + RMSNorm -> SwiGLU
MLP -> residual, the final norm and the LM head; greedy decoding.

Every step is an iron.std call (``norms.rmsnorm`` / ``add_rmsnorm``, ``gemm.gemm`` (gemv at one row) or
``quant_gemv.quant_gemv`` and ``gguf.dequantize`` on quantised weights, ``decode_attention_paged``,
``reduce.argmax``) or an Iron kernel of this package (:mod:`iron.models.kernels`: the embedding's gather, RoPE of
the stacked Q/K/V projection fused with the cache's append, SwiGLU, top-k sampling). On the CPU the arrays are numpy
(the interpreter, or Vulkan through ``backend``); with ``device="cuda"`` they are torch CUDA tensors and the kernels
run on CUDA.

With f16 / bf16 activations the prompts run as one prefill (every prompt's tokens packed, attention by
``prefill_attention_paged`` over the cache they were just written to), then each sequence decodes at its own
position. With f32 (which the prefill kernels do not take) the sequences run in lock step, one position a step:
sequence b feeds its prompt's tokens while it has any, then its own greedy tokens (each sequence's first new token
comes from the step of its prompt's last). Either way prompts of different lengths need no padding. RoPE rotates
adjacent pairs (llama.cpp's LLAMA_ROPE_TYPE_NORM, which its converters permute Q and K weights for). Quantised GGUF
projections stay quantised: a step of one sequence multiplies their bytes directly (``quant_gemv.quant_gemv``: a
decode reads 4-8 bits a weight, not 16), and so does a batch of up to 16 in Q4_0 with f16 / bf16 activations where
``mma.sync`` runs (``quant_few.quant_few``: the bytes dequantised in shared memory, multiplied on the matrix units;
Q8_0 too on the interpreter); other batches multiply a float copy that ``gguf.dequantize`` makes on the device the
first time one is needed; a quantised embedding table is dequantised when the model loads (the gather reads floats)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from iron import LaunchError, bf16, f16
from iron.codegen.mma import CUDA_MMA_SYNC_M16N8K16
from iron.jit.device import device_traits
from iron.std import attention, gemm, gguf, norms, quant_few, quant_gemv, rope
from iron.std._host import ceil_div, dtype_of, empty_like

from .gguf_file import LlamaConfig, QuantTensor, read_llama
from .kernels import GROUP, embedding_rows, rope_qkv_append, swiglu
from .sampling import Sampling, choose

#: Keys a page of the KV cache holds.
PAGE = 16


@dataclass
class Linear:
    """A projection's (out, in) weight, possibly several stacked along the rows (Q, K and V; gate and up): a float
    array, or ``parts`` of quantised bytes, (qtype, rows, data) in row order, multiplied as bytes by one row
    (quant_gemv) and by batches quant_few takes, else through a float copy made on the device when a batch first
    needs it."""

    rows: int
    cols: int
    weight: Any = None
    parts: tuple[tuple[str, int, Any], ...] = ()

    def __call__(self, h: Any, backend: str | None) -> Any:
        """h (batch, in) @ W^T: (batch, out)."""
        if self.parts and h.shape[0] == 1:
            out = empty_like(h, (1, self.rows), dtype_of(h))
            flat, x, at = out.reshape(self.rows), h.reshape(self.cols), 0
            for qtype, rows, data in self.parts:
                quant_gemv.quant_gemv(data, qtype, x, rows, self.cols, out=flat[at:at + rows], backend=backend)
                at += rows
            return out
        if self.parts and self._reads_bytes(h, backend):
            out = empty_like(h, (h.shape[0], self.rows), dtype_of(h))
            at = 0
            for qtype, rows, data in self.parts:
                quant_few.quant_few(data, qtype, h, rows, out, col0=at, backend=backend)
                at += rows
            return out
        if self.weight is None:
            self.weight = empty_like(h, (self.rows, self.cols), dtype_of(h))
            at = 0
            for qtype, rows, data in self.parts:
                gguf.dequantize(data, qtype, (rows, self.cols), dtype_of(h), out=self.weight[at:at + rows],
                                backend=backend)
                at += rows
        return gemm.gemm(h, self.weight, transpose_b=True, backend=backend)

    def _reads_bytes(self, h: Any, backend: str | None) -> bool:
        """Whether a batch of up to 16 rows multiplies the quantised bytes themselves (quant_few, f16 / bf16) instead
        of a float copy of the weight: Q4_0 where ``mma.sync`` runs (on an H100 1.04-1.37x the copy's product time, and
        no copy of 2 bytes a weight beside Q4_0's 0.56; Q8_0 took 1.3-1.6x there and keeps the copy: docs/models.md),
        both formats on the interpreter (the tests)."""
        if not (2 <= h.shape[0] <= quant_few.FEW_ROWS and dtype_of(h) in (f16, bf16)
                and all(q in quant_few.QTYPES for q, _, _ in self.parts)):
            return False
        traits = device_traits(backend, (h,))
        if traits.interpreted:
            return True
        return traits.matrix_unit is CUDA_MMA_SYNC_M16N8K16 and all(q == "Q4_0" for q, _, _ in self.parts)


@dataclass
class Block:
    """One decoder block's norms and projections: ``qkv`` is one Linear of Q, K and V stacked (one product, then
    rope_qkv_append) or, where the file mixes float and quantised ones, the three; ``gate_up`` likewise."""

    attn_norm: Any
    qkv: list[Linear]
    wo: Linear
    ffn_norm: Any
    gate_up: list[Linear]
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

        def linear(*names: str) -> Linear | None:
            """The named projections stacked along the rows as one; None where float and quantised ones mix."""
            for name in names:
                if name not in tensors:
                    raise LaunchError(f"llama: the weights have no {name!r}")
            ts = [tensors[n] for n in names]
            quantised = [isinstance(t, QuantTensor) for t in ts]
            if all(quantised):
                parts: list[tuple[str, int, Any]] = []
                for t in ts:  # neighbours of one type share a launch
                    if parts and parts[-1][0] == t.qtype:
                        qtype, rows, data = parts.pop()
                        parts.append((qtype, rows + t.rows, np.concatenate([data, t.data])))
                    else:
                        parts.append((t.qtype, t.rows, t.data))
                return Linear(sum(t.rows for t in ts), ts[0].cols,
                              parts=tuple((q, r, self._to_device(np.ascontiguousarray(d))) for q, r, d in parts))
            if any(quantised):
                return None
            w = np.concatenate([_dequantised(t) for t in ts]).astype(self.dtype)
            return Linear(w.shape[0], w.shape[1], weight=self._to_device(w))

        def linears(prefix: str, *names: str) -> list[Linear]:
            full = [f"{prefix}{n}.weight" for n in names]
            stacked = linear(*full)
            return [stacked] if stacked is not None else [linear(n) for n in full]

        self.embedding = weight("token_embd.weight")
        self.blocks = [Block(weight(f"blk.{i}.attn_norm.weight"), linears(f"blk.{i}.", "attn_q", "attn_k", "attn_v"),
                             linear(f"blk.{i}.attn_output.weight"), weight(f"blk.{i}.ffn_norm.weight"),
                             linears(f"blk.{i}.", "ffn_gate", "ffn_up"), linear(f"blk.{i}.ffn_down.weight"))
                       for i in range(config.layers)]
        self.output_norm = weight("output_norm.weight")
        tied = "output.weight" not in tensors
        self.output = (Linear(config.vocab, config.hidden, weight=self.embedding) if tied  # tied to the embedding
                       else linear("output.weight"))
        self.log2_theta = np.float32(math.log2(config.rope_theta))

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
        x = np.ascontiguousarray(x)
        return torch.from_numpy(x if x.flags.writeable else x.copy()).to(self.device)  # broadcasts are read-only

    def _empty(self, shape: tuple[int, ...], like: Any) -> Any:
        return empty_like(like, shape, dtype_of(like))

    def _host(self, x: Any) -> np.ndarray:
        if isinstance(x, np.ndarray):
            return x
        return (x.float() if x.is_floating_point() else x).cpu().numpy()

    # ------------------------------------------------------------ the forward pass

    def new_cache(self, batch: int, positions: int) -> "Cache":
        """A paged KV cache for ``batch`` sequences of up to ``positions`` tokens (sequence b on pages b W ..)."""
        c = self.config
        width = ceil_div(positions, PAGE)
        pools = [tuple(self._to_device(np.zeros((batch * width, PAGE, c.kv_heads, c.head_dim), self.dtype))
                       for _ in range(2)) for _ in range(c.layers)]
        rows = np.arange(batch * width, dtype=np.int32).reshape(batch, width)
        return Cache(pools, rows, self._to_device(rows))

    def _forward(self, ids: Any, pos: Any, rows: Any, cache: "Cache", attend: Callable[[Any, Any, Any], Any]) -> Any:
        """The final norm's output (T, hidden) for the device arrays ``ids`` (T,) of tokens at ``pos`` (T,), token
        t of the sequence whose block table row is ``rows[t]``; their keys and values go into ``cache``, and
        ``attend(q, k_pages, v_pages)`` reads it.  Each block's last residual add is the next norm's
        (``add_rmsnorm``), the last block's the final norm's."""
        c, be = self.config, self.backend
        t = ids.shape[0]
        x = self._empty((t, c.hidden), self.embedding)
        self._gather(self.embedding, ids, x)
        down = None
        for blk, (k_pages, v_pages) in zip(self.blocks, cache.pools):
            if down is None:
                h = norms.rmsnorm(x, blk.attn_norm, eps=c.eps, backend=be)
            else:
                h, x = norms.add_rmsnorm(down, x, blk.attn_norm, eps=c.eps, backend=be)
            q = self._qkv(blk, h, pos, rows, k_pages, v_pages)
            o = blk.wo(attend(q, k_pages, v_pages).reshape(t, c.heads * c.head_dim), be)
            h, x = norms.add_rmsnorm(o, x, blk.ffn_norm, eps=c.eps, backend=be)
            down = blk.w_down(self._swiglu(blk, h), be)
        return norms.add_rmsnorm(down, x, self.output_norm, eps=c.eps, backend=be)[0]

    def _qkv(self, blk: Block, h: Any, pos: Any, rows: Any, k_pages: Any, v_pages: Any) -> Any:
        """The rotated queries (T, heads, D); the rotated keys and the values written into the pages."""
        c, be = self.config, self.backend
        t, d = h.shape[0], c.head_dim
        if len(blk.qkv) == 1:
            qkv = blk.qkv[0](h, be)
            q = self._empty((t, c.heads, d), qkv)
            n = t * (c.heads + 2 * c.kv_heads) * d // 2
            pages, page = k_pages.shape[0], k_pages.shape[1]
            rope_qkv_append.variant(T=dtype_of(qkv)).launch(
                qkv, pos, rows, q, k_pages, v_pages, c.heads, c.kv_heads, d, page, rows.shape[1], pages, n,
                self.log2_theta, grid=(ceil_div(n, GROUP) * GROUP,), group=(GROUP,), backend=be)
            return q
        wq, wk, wv = blk.qkv
        q = wq(h, be).reshape(t, c.heads, d)
        k = wk(h, be).reshape(t, c.kv_heads, d)
        v = wv(h, be).reshape(t, c.kv_heads, d)
        q = rope.rope(q, pos, layout="interleaved", theta=c.rope_theta, out=q, backend=be)
        k = rope.rope(k, pos, layout="interleaved", theta=c.rope_theta, out=k, backend=be)
        attention.append_paged_kv(k, v, k_pages, v_pages, rows, pos, backend=be)
        return q

    def _swiglu(self, blk: Block, h: Any) -> Any:
        """silu(h W_gate^T) * (h W_up^T): (T, ffn)."""
        ffn, t = self.config.ffn, h.shape[0]
        if len(blk.gate_up) == 1:
            gate = up = blk.gate_up[0](h, self.backend)
            ld, up_at = 2 * ffn, ffn
        else:
            gate, up = (w(h, self.backend) for w in blk.gate_up)
            ld, up_at = ffn, 0
        out = self._empty((t, ffn), gate)
        n = t * ffn
        swiglu.variant(T=dtype_of(gate)).launch(gate, up, out, n, ffn, ld, up_at, grid=(ceil_div(n, GROUP) * GROUP,),
                                                group=(GROUP,), backend=self.backend)
        return out

    def _gather(self, table: Any, rows: Any, out: Any) -> None:
        """out[i] = table[rows[i]] (the embedding_rows kernel)."""
        count, width = out.shape
        n = count * width
        embedding_rows.variant(T=dtype_of(out)).launch(table, rows, out, table.shape[0], width, n,
                                                       grid=(ceil_div(n, GROUP) * GROUP,), group=(GROUP,),
                                                       backend=self.backend)

    def _logits(self, h: Any) -> Any:
        return self.output(h, self.backend)

    def step(self, tokens: np.ndarray, positions: Any, cache: "Cache") -> Any:
        """The logits (batch, vocab) after feeding sequence b its token ``tokens[b]`` at ``positions[b]`` (an int:
        the same for all), attending over its cache up to there."""
        b = len(tokens)
        positions = np.broadcast_to(np.asarray(positions, np.int32), (b,))
        # one copy to the device a step: the rows of one (3, batch) array are the tokens, positions and lengths
        ids, pos, lens = self._to_device(np.stack([np.asarray(tokens, np.int32), positions, positions + 1]))
        return self.decode(ids, pos, lens, cache)

    def decode(self, ids: Any, pos: Any, lens: Any, cache: "Cache") -> Any:
        """:meth:`step` on device arrays (batch,) int32: tokens, positions and lengths (positions + 1); every
        shape is fixed by the batch and the cache, so a CUDA graph can hold it (:class:`DecodeGraph`)."""

        def attend(q: Any, k_pages: Any, v_pages: Any) -> Any:
            return attention.decode_attention_paged(q, k_pages, v_pages, cache.table, lens, backend=self.backend)

        return self._logits(self._forward(ids, pos, cache.table, cache, attend))

    def prefill(self, prompts: list[list[int]], cache: "Cache") -> Any:
        """Every prompt's tokens at once (packed, from position 0; f16 / bf16, which prefill_attention_paged
        takes): their keys and values into ``cache`` and the logits (batch, vocab) of each prompt's last token."""
        lens = np.array([len(p) for p in prompts], np.int32)
        cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
        seqs = np.repeat(np.arange(len(prompts)), lens)
        positions = np.arange(int(cu[-1]), dtype=np.int32) - cu[seqs]
        cu_dev, lens_dev = self._to_device(cu), self._to_device(lens)

        def attend(q: Any, k_pages: Any, v_pages: Any) -> Any:
            return attention.prefill_attention_paged(q, k_pages, v_pages, cache.table, cu_dev, lens_dev,
                                                     max_seqlen=int(lens.max()), causal=True, backend=self.backend)

        ids = self._to_device(np.concatenate(prompts).astype(np.int32))
        rows = self._to_device(np.ascontiguousarray(cache.rows[seqs]))  # each token's table row
        x = self._forward(ids, self._to_device(positions), rows, cache, attend)
        last = self._empty((len(prompts), self.config.hidden), x)
        self._gather(x, self._to_device(cu[1:] - 1), last)
        return self._logits(last)

    # ------------------------------------------------------------ decoding

    @property
    def prefills(self) -> bool:
        """Whether :meth:`generate` runs the prompts as one prefill (f16 / bf16) rather than a position a step."""
        return self.dtype.name in ("float16", "bfloat16")

    def generate(self, prompts: list[list[int]], max_new: int,
                 on_step: Callable[[int, np.ndarray], None] | None = None, graphs: bool = False,
                 on_tokens: Callable[[int, list[int]], None] | None = None,
                 sampling: Sampling | None = None) -> list[list[int]]:
        """Continuations of ``max_new`` tokens for each prompt (token ids, at least one each): greedy (the argmax
        on the device), or drawn as ``sampling`` says (:class:`~iron.models.sampling.Sampling`: top-k with a
        temperature).  ``on_step(step, logits)`` sees every step's logits (batch, vocab) as numpy f32: with
        :attr:`prefills` step 0 is the prefill's (each prompt's last token) and step j the j-th token's;
        otherwise the sequences run in lock step (module docstring) and step j is position j.  ``on_tokens(step,
        tokens)`` sees each step's chosen tokens (one a sequence) without copying the logits.  ``graphs`` (CUDA):
        every decode step replays one captured CUDA graph (:class:`DecodeGraph`)."""
        if not prompts or any(len(p) == 0 for p in prompts):
            raise LaunchError("llama: give every sequence a prompt of at least one token")
        if any(t < 0 or t >= self.config.vocab for p in prompts for t in p):
            raise LaunchError(f"llama: prompt tokens must lie in [0, {self.config.vocab})")
        if max_new < 1:
            return [[] for _ in prompts]
        total = max(len(p) for p in prompts) + max_new - 1
        cache = self.new_cache(len(prompts), total)
        rng = np.random.default_rng(sampling.seed if sampling else None)

        def uniform() -> np.ndarray | None:
            """The step's uniform numbers, one a sequence; none for greedy decoding (no copy to the device)."""
            return rng.random(len(prompts), dtype=np.float32) if sampling else None

        def on_device(u: np.ndarray | None) -> Any:
            return None if u is None else self._to_device(u)

        if graphs:
            run: Callable[[np.ndarray, np.ndarray, np.ndarray], tuple[Any, Any]] = DecodeGraph(self, cache, sampling)
        else:
            def run(tokens: np.ndarray, positions: np.ndarray, u: np.ndarray | None) -> tuple[Any, Any]:
                logits = self.step(tokens, positions, cache)
                return logits, choose(logits, on_device(u), sampling, self.backend)

        def chosen(logits: Any, tokens: Any, step: int) -> list[int]:
            if on_step is not None:
                on_step(step, self._host(logits).astype(np.float32))
            picked = self._host(tokens).tolist()
            if on_tokens is not None:
                on_tokens(step, picked)
            return picked

        if self.prefills:
            logits = self.prefill(prompts, cache)
            new = [[t] for t in chosen(logits, choose(logits, on_device(uniform()), sampling, self.backend), 0)]
            positions = np.array([len(p) for p in prompts], np.int32)
            for j in range(1, max_new):
                for seq, t in zip(new, chosen(*run(np.array([n[-1] for n in new], np.int32), positions, uniform()), j)):
                    seq.append(t)
                positions += 1
            return new
        new = [[] for _ in prompts]
        fed = [p[0] for p in prompts]
        for position in range(total):
            step = run(np.asarray(fed, np.int32), np.full(len(prompts), position, np.int32), uniform())
            picked = chosen(*step, position)
            for i, p in enumerate(prompts):
                if position + 1 < len(p):
                    fed[i] = p[position + 1]
                    continue
                if len(new[i]) < max_new:
                    new[i].append(picked[i])
                fed[i] = new[i][-1]
        return new


class DecodeGraph:
    """:meth:`Llama.decode` and the choice of the next tokens (argmax or top-k sampling) of one batch over one
    cache, captured once as a CUDA graph (``torch.cuda.CUDAGraph``) and replayed each step: a step costs one
    graph launch instead of one launch a kernel (ten a block).  Its inputs (tokens, positions, lengths and the
    uniform numbers' bits) live in one static device array, filled from pinned host memory before each replay;
    its outputs (logits, tokens) are static arrays that the next replay overwrites.  The first call runs the step
    eagerly twice on a side stream (compiling and planning every launch, and making the dequantised copies),
    then captures and replays it: the same keys and values written three times."""

    def __init__(self, model: Llama, cache: "Cache", sampling: Sampling | None = None) -> None:
        if model.device == "cpu":
            raise LaunchError("llama: CUDA graphs need the model on a CUDA device (device='cuda')")
        import torch

        self.torch, self.model, self.cache, self.sampling = torch, model, cache, sampling
        batch = cache.rows.shape[0]
        self.host = torch.zeros((4, batch), dtype=torch.int32, pin_memory=True)
        self.inputs = torch.zeros((4, batch), dtype=torch.int32, device=model.device)
        self.graph: Any = None
        self.outputs: tuple[Any, Any] = ()

    def _eager(self) -> tuple[Any, Any]:
        ids, pos, lens, bits = self.inputs
        logits = self.model.decode(ids, pos, lens, self.cache)
        return logits, choose(logits, bits.view(self.torch.float32), self.sampling, self.model.backend)

    def _capture(self) -> None:
        torch = self.torch
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):
                self._eager()
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.outputs = self._eager()

    def __call__(self, tokens: np.ndarray, positions: np.ndarray, uniform: np.ndarray | None) -> tuple[Any, Any]:
        """(logits, tokens) after feeding ``tokens`` at ``positions`` (``uniform``: the sampling's numbers); the
        caller reads them (a synchronising copy) before the next call, which reuses the pinned inputs."""
        host = self.host.numpy()
        host[0], host[1], host[2] = tokens, positions, np.asarray(positions) + 1
        if uniform is not None:
            host[3] = np.asarray(uniform, np.float32).view(np.int32)
        self.inputs.copy_(self.host, non_blocking=True)
        if self.graph is None:
            self._capture()
        self.graph.replay()
        return self.outputs


@dataclass
class Cache:
    """A paged KV cache: per block (k_pages, v_pages) (pages, PAGE, H_kv, D), the block table (batch, pages a
    sequence) on the host (``rows``) and on the device (``table``)."""

    pools: list[tuple[Any, Any]]
    rows: np.ndarray
    table: Any


__all__ = ["Block", "Cache", "DecodeGraph", "Linear", "Llama", "PAGE"]
