"""How the next token is chosen from a step's logits: the argmax (greedy), or top-k sampling with a temperature
(:class:`Sampling`, the ``topk_sample`` kernel), both on the device, so a step copies one token a sequence back."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from iron import LaunchError, i32
from iron.std import reduce
from iron.std._host import dtype_of, empty_like

from .kernels import GROUP, topk_sample


@dataclass(frozen=True)
class Sampling:
    """Draw each token from the ``top_k`` most likely (all of them for 0), with probabilities softmax(logits /
    ``temperature``); ``seed`` fixes the uniform numbers (numpy's generator, one a sequence a step)."""

    top_k: int = 40
    temperature: float = 1.0
    seed: int | None = None

    def __post_init__(self) -> None:
        if self.top_k < 0:
            raise LaunchError(f"sampling: top_k must be 0 (every token) or more, got {self.top_k}")
        if not self.temperature > 0:
            raise LaunchError(f"sampling: the temperature must be above 0, got {self.temperature} (greedy "
                              f"decoding: no sampling)")


def choose(logits: Any, uniform: Any, sampling: Sampling | None, backend: str | None) -> Any:
    """The (rows,) i32 tokens of logits (rows, vocab): the argmax without ``sampling`` (``uniform`` unread, may be
    None), else topk_sample at the (rows,) f32 ``uniform`` numbers in [0, 1)."""
    if sampling is None:
        return reduce.argmax(logits, backend=backend)
    rows, vocab = logits.shape
    out = empty_like(logits, (rows,), i32)
    k = sampling.top_k if 0 < sampling.top_k < vocab else vocab
    inv_temp = np.float32(1 / sampling.temperature)
    topk_sample.variant(T=dtype_of(logits)).launch(logits, uniform, out, vocab, k, inv_temp, grid=(rows * GROUP,),
                                                   group=(GROUP,), backend=backend)
    return out


__all__ = ["Sampling", "choose"]
