"""Llama GGUF files of random weights, written through the ``gguf`` package's writer like a converted model: what
the tests, the benches and ``python -m iron.models random`` give a user who has no weights at hand.  Projections
are N(0, 1/in) (activations stay O(1) through the blocks), norms near 1, embeddings N(0, 1)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .gguf_file import LlamaConfig, write_llama

#: Shapes by name: the tests' tiny model (the interpreter runs it in seconds) and Llama-3-8B's block shape with
#: fewer blocks (hidden 4096, 32 query heads, 8 KV heads, MLP 14336; vocabulary 32000), for a GPU.
PRESETS = {
    "tiny": LlamaConfig(vocab=96, hidden=128, layers=2, heads=2, kv_heads=1, ffn=256, rope_theta=10000.0, eps=1e-5,
                        context=64),
    "llama-4l": LlamaConfig(vocab=32000, hidden=4096, layers=4, heads=32, kv_heads=8, ffn=14336,
                            rope_theta=500000.0, eps=1e-5, context=4096),
}

#: The projections of every block (llama.cpp's names).
PROJECTIONS = ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")


def random_weights(config: LlamaConfig, seed: int = 0, dtype: type = np.float32) -> dict[str, np.ndarray]:
    """Every tensor of a Llama GGUF by llama.cpp's names: projections and embeddings in ``dtype``, norms f32."""
    rng = np.random.default_rng(seed)
    c, d = config, config.head_dim

    def linear(out: int, inp: int) -> np.ndarray:
        return (rng.standard_normal((out, inp), dtype=np.float32) / np.float32(np.sqrt(inp))).astype(dtype)

    def norm(n: int) -> np.ndarray:
        return (1.0 + 0.1 * rng.standard_normal(n, dtype=np.float32)).astype(np.float32)

    w = {"token_embd.weight": rng.standard_normal((c.vocab, c.hidden), dtype=np.float32).astype(dtype),
         "output_norm.weight": norm(c.hidden), "output.weight": linear(c.vocab, c.hidden)}
    for i in range(c.layers):
        p = f"blk.{i}."
        w.update({p + "attn_norm.weight": norm(c.hidden), p + "attn_q.weight": linear(c.heads * d, c.hidden),
                  p + "attn_k.weight": linear(c.kv_heads * d, c.hidden),
                  p + "attn_v.weight": linear(c.kv_heads * d, c.hidden),
                  p + "attn_output.weight": linear(c.hidden, c.heads * d), p + "ffn_norm.weight": norm(c.hidden),
                  p + "ffn_gate.weight": linear(c.ffn, c.hidden), p + "ffn_up.weight": linear(c.ffn, c.hidden),
                  p + "ffn_down.weight": linear(c.hidden, c.ffn)})
    return w


def write_random(path: str | Path, config: LlamaConfig, qtype: str | None = None, seed: int = 0) -> None:
    """A GGUF file at ``path`` of random weights: f16 tensors, or every block projection quantised as ``qtype``
    (Q8_0, Q4_0, Q4_K, Q6_K)."""
    if qtype:
        from iron import LaunchError
        from iron.std.gguf import format_of

        block = format_of(qtype).block
        if config.hidden % block or config.ffn % block:
            raise LaunchError(f"{qtype} stores rows in blocks of {block} weights; this model's rows hold "
                              f"{config.hidden} and {config.ffn}: take Q8_0 or Q4_0 (blocks of 32)")
    quant = {f"blk.{i}.{n}.weight": qtype for i in range(config.layers) for n in PROJECTIONS} if qtype else {}
    write_llama(path, config, random_weights(config, seed, np.float16), qtypes=quant)


__all__ = ["PRESETS", "PROJECTIONS", "random_weights", "write_random"]
