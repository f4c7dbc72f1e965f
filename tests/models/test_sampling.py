"""iron.models' top-k sampling kernel against its definition (numpy): the exact top-k set (ties at the k-th value
kept, NaN never drawn), then the inverse of the distribution softmax(x / temperature) over it, in index order, at
the given uniform number.  Rows of every shape the kernel's slices meet (a vocabulary under one group, one not a
multiple of it), k from 1 (the argmax) to past the vocabulary; and sampling through the model."""

from __future__ import annotations

import numpy as np
import pytest

from iron import LaunchError, f32
from iron.models.kernels import GROUP, topk_sample
from iron.models.sampling import Sampling, choose


def _bracket(x: np.ndarray, u: float, k: int, temperature: float) -> tuple[np.ndarray, np.ndarray, float]:
    """(kept mask, cumulative weights, target) of one row by the definition, in float64."""
    x = x.astype(np.float64)
    valid = ~np.isnan(x)
    kth = np.sort(x[valid])[::-1][min(k, valid.sum()) - 1]
    keep = valid & (x >= kth)
    w = np.where(keep, np.exp((np.where(valid, x, 0) - x[valid].max()) / temperature), 0.0)
    c = np.cumsum(w)
    return keep, c, u * c[-1]


def _draw(logits: np.ndarray, uniform: np.ndarray, k: int, temperature: float, backend: str = "interp"):
    out = np.full(len(logits), -1, np.int32)
    topk_sample.variant(T=f32).launch(logits, uniform, out, logits.shape[1], k, np.float32(1 / temperature),
                                      grid=(len(logits) * GROUP,), group=(GROUP,), backend=backend)
    return out


@pytest.mark.parametrize("vocab,k,temperature,backend", [
    (96, 5, 1.0, "interp"), (1000, 40, 0.7, "interp"), (1000, 1, 1.0, "interp"), (700, 700, 2.0, "interp"),
    (300, 1000, 1.0, "interp"), (1000, 40, 0.7, "vulkan")])
def test_each_draw_is_the_inverse_distribution_of_the_top_k_at_its_uniform(vocab, k, temperature, backend):
    rng = np.random.default_rng(vocab + k)
    rows = 6
    logits = (rng.standard_normal((rows, vocab)) * 3).astype(np.float32)
    logits[1, 10:20] = logits[1].max()          # a tie at the top, wider than k = 5
    logits[2, ::7] = np.nan                     # NaNs are never drawn
    logits[3] = np.round(logits[3])             # many ties at the k-th value
    uniform = np.array([0.0, 0.31, 0.5, 0.77, 0.9999, 0.05], np.float32)
    got = _draw(logits, uniform, k, temperature, backend)
    for r in range(rows):
        keep, c, target = _bracket(logits[r], float(uniform[r]), k, temperature)
        t = int(got[r])
        assert keep[t], f"row {r}: token {t} is not among the top {k}"
        before = c[t - 1] if t else 0.0
        # f32 weights and sums against float64: the target falls inside the token's step of the distribution
        assert before - 1e-5 * c[-1] <= target <= c[t] + 1e-5 * c[-1], (r, t, before, target, c[t])
    if k == 1:  # the argmax, where the largest value is unique (ties at the top are all kept)
        unique = [r for r in range(rows) if (logits[r] == np.nanmax(logits[r])).sum() == 1]
        assert len(unique) >= 4
        np.testing.assert_array_equal(got[unique], np.nanargmax(logits, axis=1)[unique])


def test_a_row_of_nan_draws_token_0_and_sampling_checks_its_settings():
    logits = np.full((1, 50), np.nan, np.float32)
    assert _draw(logits, np.array([0.5], np.float32), 3, 1.0).tolist() == [0]
    with pytest.raises(LaunchError, match="temperature must be above 0"):
        Sampling(temperature=0.0)
    with pytest.raises(LaunchError, match="top_k must be 0"):
        Sampling(top_k=-1)


def test_draws_follow_the_distribution():
    """2000 rows of one distribution over 8 tokens with evenly spaced uniforms: each token's share is its
    probability within 1 / 2000 (the inverse CDF at a grid of points)."""
    x = np.log(np.array([1, 2, 3, 4, 5, 6, 7, 8], np.float64) / 36).astype(np.float32)
    rows = 2000
    logits = np.tile(x, (rows, 1))
    uniform = ((np.arange(rows) + 0.5) / rows).astype(np.float32)
    got = choose(logits, uniform, Sampling(top_k=6, temperature=1.0), "interp")
    share = np.bincount(got, minlength=8) / rows
    p = np.exp(x.astype(np.float64))
    p[:2] = 0  # outside the top 6
    p /= p.sum()
    np.testing.assert_allclose(share, p, atol=1.5 / rows)


def test_the_model_samples_reproducibly_and_top_1_is_greedy(tmp_path, capsys):
    from iron.models.__main__ import main
    from iron.models.llama import Llama
    from iron.models.random_model import PRESETS, write_random

    path = tmp_path / "tiny.gguf"
    write_random(path, PRESETS["tiny"], seed=2)
    model = Llama.from_gguf(path, backend="interp", dtype=np.float16)
    prompts = [[1, 5, 7], [3]]
    greedy = model.generate(prompts, 3)
    assert model.generate(prompts, 3, sampling=Sampling(top_k=1, seed=9)) == greedy
    drawn = model.generate(prompts, 3, sampling=Sampling(top_k=0, temperature=1.5, seed=4))
    assert model.generate(prompts, 3, sampling=Sampling(top_k=0, temperature=1.5, seed=4)) == drawn
    assert all(0 <= t < PRESETS["tiny"].vocab for seq in drawn for t in seq) and drawn != greedy
    assert main(["generate", str(path), "--prompt", "1,5,7", "--prompt", "3", "--max-new", "3", "--dtype", "f16",
                 "--device", "cpu", "--backend", "interp", "--top-k", "0", "--temperature", "1.5",
                 "--seed", "4"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [f"1,5,7 -> {','.join(map(str, drawn[0]))}", f"3 -> {','.join(map(str, drawn[1]))}"]
    assert main(["generate", str(path), "--prompt", "1", "--device", "cpu", "--top-k", "4",
                 "--temperature", "0"]) == 1
    assert "temperature must be above 0" in capsys.readouterr().err
