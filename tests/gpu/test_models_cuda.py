"""iron.models.llama on CUDA: the tiny GGUF of tests/models (two projections quantised) decoded with torch CUDA
tensors against the float64 PyTorch reference at every step: f32 in lock step (batch 2: the dequantised copies;
batch 1: quant_gemv on the bytes), and bf16 / f16 through the packed prefill, then decode at each sequence's own
position."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("torch sees no CUDA device", allow_module_level=True)

sys.path.insert(0, str(Path(__file__).parents[1] / "models"))

from test_llama import QUANTISED, TINY, tiny_weights  # noqa: E402

from iron.models.gguf_file import read_llama, write_llama  # noqa: E402
from iron.models.llama import Llama  # noqa: E402
from iron.models.reference import TorchLlama  # noqa: E402


@pytest.fixture(scope="module")
def tiny_file(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("gguf") / "tiny-llama.gguf"
    write_llama(path, TINY, tiny_weights(TINY), qtypes=QUANTISED)
    return str(path)


def _reference_logits(path: str, prompt: list[int], new: list[int]) -> list[np.ndarray]:
    """The reference's logits after each prompt token and each new token but the last, one sequence alone."""
    config, tensors = read_llama(path)
    ref = TorchLlama(config, tensors)
    fed = prompt + new[:-1]
    return [ref.step(np.array([t]), pos)[0] for pos, t in enumerate(fed)]


@pytest.mark.parametrize("prompts", [[[1, 5, 7, 9], [3]], [[2, 8]]], ids=["batch-2", "batch-1"])
def test_f32_on_cuda_matches_the_reference_at_every_step(tiny_file, prompts):
    model = Llama.from_gguf(tiny_file, device="cuda", backend="cuda")
    seen: list[np.ndarray] = []
    new = model.generate(prompts, 3, on_step=lambda pos, logits: seen.append(logits))
    for i, prompt in enumerate(prompts):
        want = _reference_logits(tiny_file, prompt, new[i])
        for pos, w in enumerate(want):
            # f32 throughout (tests/models: seen 6.5e-7 on the interpreter)
            np.testing.assert_allclose(seen[pos][i], w, rtol=0, atol=1e-5 * np.abs(w).max())
            if pos >= len(prompt) - 1:
                assert new[i][pos - len(prompt) + 1] == int(np.argmax(w)), f"sequence {i}, position {pos}"


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_prefill_then_decode_on_cuda(tiny_file, dtype):
    import ml_dtypes

    np_dtype = np.float16 if dtype == "float16" else ml_dtypes.bfloat16
    model = Llama.from_gguf(tiny_file, device="cuda", backend="cuda", dtype=np_dtype)
    prompts, max_new = [[1, 5, 7, 9], [3], [4, 4, 2]], 4
    seen: list[np.ndarray] = []
    new = model.generate(prompts, max_new, on_step=lambda step, logits: seen.append(logits))
    for i, prompt in enumerate(prompts):
        want = _reference_logits(tiny_file, prompt, new[i])[len(prompt) - 1:]
        for j, w in enumerate(want):
            # rounded after every op: 1e-2 (f16) / 4e-2 (bf16, 8 bits of mantissa) of the largest logit
            tol = (1e-2 if dtype == "float16" else 4e-2) * np.abs(w).max()
            np.testing.assert_allclose(seen[j][i], w, rtol=0, atol=tol)


@pytest.mark.parametrize("dtype,sampling", [("float32", None), ("bfloat16", None), ("bfloat16", (8, 0.9, 3))],
                         ids=["f32", "bf16", "bf16-top-8"])
def test_decode_steps_replayed_as_a_cuda_graph_equal_the_eager_steps(tiny_file, dtype, sampling):
    """The same kernels on the same inputs: every step's logits bit for bit, so every token too (f32: lock step
    through the prompts; bf16: prefill, then graph replays at each sequence's own position; top-k sampling with
    one seed draws the same tokens)."""
    import ml_dtypes

    from iron.models.sampling import Sampling

    model = Llama.from_gguf(tiny_file, device="cuda", backend="cuda",
                            dtype=np.float32 if dtype == "float32" else ml_dtypes.bfloat16)
    prompts = [[1, 5, 7, 9], [3], [4, 4, 2]]
    runs = []
    for graphs in (False, True):
        seen: list[np.ndarray] = []
        new = model.generate(prompts, 5, on_step=lambda step, logits: seen.append(logits), graphs=graphs,
                             sampling=Sampling(*sampling) if sampling else None)
        runs.append((new, seen))
    (eager_new, eager_seen), (graph_new, graph_seen) = runs
    assert graph_new == eager_new
    for step, (a, b) in enumerate(zip(eager_seen, graph_seen)):
        np.testing.assert_array_equal(a, b, err_msg=f"step {step}")


def test_graphs_on_the_cpu_are_a_clear_error(tiny_file):
    from iron import LaunchError

    model = Llama.from_gguf(tiny_file, backend="interp")
    with pytest.raises(LaunchError, match="CUDA graphs need the model on a CUDA device"):
        model.generate([[1, 2]], 2, graphs=True)
