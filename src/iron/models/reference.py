"""The same Llama decoder in plain PyTorch, from the same GGUF tensors.  :class:`TorchLlama` (float64 on the CPU by
default, a growing list of keys) is the reference :mod:`iron.models.llama` is checked against, step by step;
:class:`EagerLlama` is what a PyTorch user would run instead (any device and dtype, a preallocated KV cache, SDPA,
static shapes so ``torch.compile(mode="reduce-overhead")`` can capture a step): the speed baseline.  Nothing here
calls Iron."""

from __future__ import annotations

from typing import Any

import numpy as np

from .gguf_file import LlamaConfig
from .llama import _dequantised


class TorchLlama:
    """Greedy decoding with an explicit KV cache; :meth:`step` returns the logits of one position."""

    def __init__(self, config: LlamaConfig, tensors: dict[str, Any], dtype: Any = None) -> None:
        import torch

        self.torch, self.config = torch, config
        self.dtype = dtype or torch.float64
        self.w = {name: torch.from_numpy(_dequantised(t).astype(np.float64)).to(self.dtype)
                  for name, t in tensors.items()}
        self.w.setdefault("output.weight", self.w["token_embd.weight"])
        self.k: list[list[Any]] = [[] for _ in range(config.layers)]
        self.v: list[list[Any]] = [[] for _ in range(config.layers)]

    def _rms(self, x: Any, weight: Any) -> Any:
        return x * self.torch.rsqrt((x * x).mean(-1, keepdim=True) + self.config.eps) * weight

    def _rope(self, x: Any, position: int) -> Any:
        """Adjacent pairs (2i, 2i + 1) rotated by position * theta^(-2i / d)."""
        d = x.shape[-1]
        freq = self.config.rope_theta ** (-self.torch.arange(0, d, 2, dtype=self.torch.float64) / d)
        cos, sin = self.torch.cos(position * freq).to(x.dtype), self.torch.sin(position * freq).to(x.dtype)
        even, odd = x[..., 0::2], x[..., 1::2]
        out = self.torch.empty_like(x)
        out[..., 0::2] = even * cos - odd * sin
        out[..., 1::2] = even * sin + odd * cos
        return out

    def step(self, tokens: np.ndarray, position: int) -> np.ndarray:
        """Logits (batch, vocab) of feeding ``tokens`` at ``position`` (every sequence at the same one)."""
        torch, c, w = self.torch, self.config, self.w
        b, d = len(tokens), c.head_dim
        x = w["token_embd.weight"][torch.from_numpy(np.asarray(tokens, np.int64))]
        for i in range(c.layers):
            p = f"blk.{i}."
            h = self._rms(x, w[p + "attn_norm.weight"])
            q = self._rope((h @ w[p + "attn_q.weight"].T).view(b, c.heads, d), position)
            k = self._rope((h @ w[p + "attn_k.weight"].T).view(b, c.kv_heads, d), position)
            v = (h @ w[p + "attn_v.weight"].T).view(b, c.kv_heads, d)
            self.k[i].append(k)
            self.v[i].append(v)
            keys = torch.stack(self.k[i], 2).repeat_interleave(c.heads // c.kv_heads, 1)  # (b, H, t, d)
            values = torch.stack(self.v[i], 2).repeat_interleave(c.heads // c.kv_heads, 1)
            weights = torch.softmax((keys @ q[..., None])[..., 0] / d ** 0.5, -1)  # (b, H, t)
            a = (weights[:, :, None, :] @ values)[:, :, 0, :].reshape(b, c.heads * d)
            x = x + a @ w[p + "attn_output.weight"].T
            h = self._rms(x, w[p + "ffn_norm.weight"])
            gate, up = h @ w[p + "ffn_gate.weight"].T, h @ w[p + "ffn_up.weight"].T
            x = x + (torch.nn.functional.silu(gate) * up) @ w[p + "ffn_down.weight"].T
        return (self._rms(x, w["output_norm.weight"]) @ w["output.weight"].T).numpy()


class EagerLlama:
    """Decoding with a static KV cache (batch, H_kv, positions, D) per block: :meth:`step` takes each sequence's
    token and position as device tensors and attends over the cache under a mask of the positions up to its own,
    so every step has the same shapes (no recompilation, graph-capturable)."""

    def __init__(self, config: LlamaConfig, tensors: dict[str, Any], batch: int, positions: int,
                 device: str = "cuda", dtype: Any = None) -> None:
        import torch

        self.torch, self.config = torch, config
        self.dtype = dtype or torch.bfloat16

        def put(t: Any) -> Any:
            return torch.from_numpy(np.array(_dequantised(t), np.float32)).to(device, self.dtype)

        self.w = {name: put(t) for name, t in tensors.items()}
        self.w.setdefault("output.weight", self.w["token_embd.weight"])
        c, d = config, config.head_dim
        shape = (batch, c.kv_heads, positions, d)
        self.k = [torch.zeros(shape, device=device, dtype=self.dtype) for _ in range(c.layers)]
        self.v = [torch.zeros(shape, device=device, dtype=self.dtype) for _ in range(c.layers)]
        freq = c.rope_theta ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
        angle = torch.arange(positions, dtype=torch.float64)[:, None] * freq
        self.cos, self.sin = angle.cos().float().to(device), angle.sin().float().to(device)
        self.keys = torch.arange(positions, device=device)

    def _rms(self, x: Any, weight: Any) -> Any:
        f = x.float()
        return (f * self.torch.rsqrt((f * f).mean(-1, keepdim=True) + self.config.eps)).to(x.dtype) * weight

    def _rope(self, x: Any, cos: Any, sin: Any) -> Any:
        """x (batch, heads, D), adjacent pairs rotated; cos / sin (batch, 1, D / 2)."""
        f = x.float()
        even, odd = f[..., 0::2], f[..., 1::2]
        return self.torch.stack((even * cos - odd * sin, even * sin + odd * cos), -1).flatten(-2).to(x.dtype)

    def step(self, tokens: Any, positions: Any) -> Any:
        """Logits (batch, vocab) after feeding ``tokens[b]`` at ``positions[b]`` (int64 device tensors)."""
        torch, c, w = self.torch, self.config, self.w
        b, d = tokens.shape[0], c.head_dim
        F = torch.nn.functional
        cos, sin = self.cos[positions][:, None], self.sin[positions][:, None]
        mask = (self.keys[None, :] <= positions[:, None])[:, None, None, :]  # (b, 1, 1, positions)
        rows = torch.arange(b, device=tokens.device)
        x = w["token_embd.weight"][tokens]
        for i in range(c.layers):
            p = f"blk.{i}."
            h = self._rms(x, w[p + "attn_norm.weight"])
            q = self._rope((h @ w[p + "attn_q.weight"].T).view(b, c.heads, d), cos, sin)
            k = self._rope((h @ w[p + "attn_k.weight"].T).view(b, c.kv_heads, d), cos, sin)
            v = (h @ w[p + "attn_v.weight"].T).view(b, c.kv_heads, d)
            self.k[i][rows, :, positions] = k
            self.v[i][rows, :, positions] = v
            a = F.scaled_dot_product_attention(q[:, :, None], self.k[i], self.v[i], attn_mask=mask,
                                               enable_gqa=c.heads != c.kv_heads)
            x = x + a.reshape(b, c.heads * d) @ w[p + "attn_output.weight"].T
            h = self._rms(x, w[p + "ffn_norm.weight"])
            gate, up = h @ w[p + "ffn_gate.weight"].T, h @ w[p + "ffn_up.weight"].T
            x = x + (F.silu(gate) * up) @ w[p + "ffn_down.weight"].T
        return self._rms(x, w["output_norm.weight"]) @ w["output.weight"].T


__all__ = ["EagerLlama", "TorchLlama"]


def logit_error(config: LlamaConfig, tensors: dict[str, Any], prompts: list[list[int]], new: list[list[int]],
                logits: list[np.ndarray], prefills: bool, device: str = "cpu") -> tuple[float, int]:
    """How far a generation's logits are from :class:`EagerLlama`'s in f32 on ``device``, fed the same tokens: the
    largest |difference| over the largest |reference logit|, per position, maximised over every position whose
    logits chose a new token; and how many positions that was.  ``logits`` are what ``Llama.generate``'s
    ``on_step`` saw: with ``prefills`` step j is token len(prompt) - 1 + j of each sequence (the prefill's last
    token, then decode), else the sequences ran in lock step and step j is position j."""
    import torch

    fed = [p + n for p, n in zip(prompts, new)]
    lens = [len(p) for p in prompts]
    ref = EagerLlama(config, tensors, len(prompts), max(map(len, fed)), device=device, dtype=torch.float32)
    worst, compared = 0.0, 0
    for pos in range(max(map(len, fed)) - 1):
        toks = torch.tensor([f[min(pos, len(f) - 1)] for f in fed], device=device)
        out = ref.step(toks, torch.full((len(prompts),), pos, device=device)).float().cpu().numpy()
        for i, f in enumerate(fed):
            step = pos - (lens[i] - 1) if prefills else pos
            if pos < lens[i] - 1 or pos >= len(f) - 1 or step >= len(logits):
                continue  # a prompt token's logits choose nothing; past the sequence's last fed token
            worst = max(worst, float(np.abs(logits[step][i] - out[i]).max() / np.abs(out[i]).max()))
            compared += 1
    return worst, compared
