"""A Llama-architecture GGUF file read for :mod:`iron.models.llama`: the hyper-parameters from its metadata (the
``llama.*`` keys llama.cpp's converters write) and its tensors by llama.cpp's names, through the ``gguf`` package's
reader (memory-mapped: a tensor is read when it is used).

Float tensors (F32, F16, BF16) come back as numpy arrays in row-major order (GGUF lists a tensor's extents fastest
first; the reader gives them slowest first, a weight as (out_features, in_features), an ``nn.Linear`` weight);
quantised ones (Q8_0, Q4_0, Q4_K, Q6_K) as :class:`QuantTensor`, the rows' blocks as bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from iron import LaunchError

#: GGUF tensor types Iron's kernels read (iron.std.quant_gemv, iron.std.gguf), beside the float ones.
QUANTISED = ("Q8_0", "Q4_0", "Q4_K", "Q6_K")
FLOATS = ("F32", "F16", "BF16")


@dataclass(frozen=True)
class LlamaConfig:
    """A Llama decoder's shape: vocabulary, hidden size, blocks, query and KV heads, head size, MLP width, RoPE
    base, RMSNorm epsilon and the context it was trained for."""

    vocab: int
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    ffn: int
    rope_theta: float = 10000.0
    eps: float = 1e-5
    context: int = 4096

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


@dataclass(frozen=True)
class QuantTensor:
    """A quantised (rows, cols) weight: ``data`` (rows, bytes a row) u8 blocks of ``qtype``."""

    qtype: str
    rows: int
    cols: int
    data: np.ndarray


def _field(reader: Any, key: str, default: Any = None) -> Any:
    field = reader.fields.get(key)
    if field is None:
        if default is None:
            raise LaunchError(f"GGUF: the metadata has no {key!r}; is this a Llama-architecture file?")
        return default
    value = field.parts[field.data[0]]
    return value.tobytes().decode() if value.dtype == np.uint8 else value.item()


def read_llama(path: str | Path) -> tuple[LlamaConfig, dict[str, Any]]:
    """The configuration and the tensors (by llama.cpp's names) of the Llama GGUF file at ``path``."""
    import gguf

    path = Path(path)
    if not path.is_file():
        raise LaunchError(f"GGUF: no file {str(path)!r}")
    try:
        reader = gguf.GGUFReader(str(path))
    except (ValueError, OSError) as exc:
        raise LaunchError(f"GGUF: {path} is not a GGUF file it can read: {exc}") from None
    arch = _field(reader, "general.architecture", "llama")
    if arch != "llama":
        raise LaunchError(f"GGUF: {path} holds a {arch!r} model; iron.models.llama runs 'llama' files")
    tensors: dict[str, Any] = {}
    for t in reader.tensors:
        kind = t.tensor_type.name
        shape = tuple(int(n) for n in reversed(t.shape))  # slowest first
        if kind in FLOATS:
            data = np.asarray(t.data)
            if kind == "BF16":
                import ml_dtypes

                data = data.view(ml_dtypes.bfloat16)
            tensors[t.name] = data.reshape(shape)
        elif kind in QUANTISED:
            rows = int(np.prod(shape[:-1]))
            tensors[t.name] = QuantTensor(kind, rows, shape[-1], np.asarray(t.data).reshape(rows, -1))
        else:
            raise LaunchError(f"GGUF: tensor {t.name!r} is {kind}; Iron reads {', '.join(FLOATS + QUANTISED)}")
    embd = tensors.get("token_embd.weight")
    if embd is None:
        raise LaunchError(f"GGUF: {path} has no token_embd.weight")
    vocab, hidden = (embd.rows, embd.cols) if isinstance(embd, QuantTensor) else embd.shape
    config = LlamaConfig(
        vocab=vocab, hidden=hidden, layers=int(_field(reader, "llama.block_count")),
        heads=int(_field(reader, "llama.attention.head_count")),
        kv_heads=int(_field(reader, "llama.attention.head_count_kv", _field(reader, "llama.attention.head_count"))),
        ffn=int(_field(reader, "llama.feed_forward_length")),
        rope_theta=float(_field(reader, "llama.rope.freq_base", 10000.0)),
        eps=float(_field(reader, "llama.attention.layer_norm_rms_epsilon", 1e-5)),
        context=int(_field(reader, "llama.context_length", 4096)))
    return config, tensors


def write_llama(path: str | Path, config: LlamaConfig, tensors: dict[str, np.ndarray],
                qtypes: dict[str, str] | None = None) -> None:
    """A Llama GGUF file at ``path`` through the ``gguf`` package's writer (the writer a user's file came from):
    ``config`` as llama.cpp's metadata keys, ``tensors`` (float, by llama.cpp's names) stored as their dtype or,
    for the names in ``qtypes``, quantised to that GGUF type (Q8_0 and Q4_0 by the package's own quantisers; Q4_K
    and Q6_K, which gguf 0.19 cannot quantise, by iron.std.suite.gguf's absmax packers)."""
    import gguf

    from iron.std.suite.gguf import quantize

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_context_length(config.context)
    writer.add_embedding_length(config.hidden)
    writer.add_block_count(config.layers)
    writer.add_feed_forward_length(config.ffn)
    writer.add_head_count(config.heads)
    writer.add_head_count_kv(config.kv_heads)
    writer.add_rope_freq_base(config.rope_theta)
    writer.add_layer_norm_rms_eps(config.eps)
    writer.add_vocab_size(config.vocab)
    for name, array in tensors.items():
        qtype = (qtypes or {}).get(name)
        if qtype is None:
            writer.add_tensor(name, np.ascontiguousarray(array))
            continue
        kind = getattr(gguf.GGMLQuantizationType, qtype)
        data = quantize(np.ascontiguousarray(array, dtype=np.float32), qtype)
        writer.add_tensor(name, data, raw_dtype=kind)  # the logical shape follows from the bytes
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


__all__ = ["FLOATS", "LlamaConfig", "QUANTISED", "QuantTensor", "read_llama", "write_llama"]
