"""iron.models.llama: a tiny Llama GGUF written with the gguf package's writer (random weights, two projections
quantised: Q4_0 and Q8_0) and read back by the real loader; Iron's greedy decoding on the interpreter against the
PyTorch reference's logits at every step: two prompts of different lengths in one batch (the quantised weights
dequantised on the device), and one alone (products on the quantised bytes); the batch on Vulkan (lavapipe)
too."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from iron import LaunchError
from iron.models.gguf_file import LlamaConfig, QuantTensor, read_llama, write_llama
from iron.models.llama import Llama
from iron.models.random_model import PRESETS, PROJECTIONS, random_weights

TINY = PRESETS["tiny"]


def tiny_weights(config: LlamaConfig, seed: int = 0) -> dict[str, np.ndarray]:
    """Random f32 weights of llama.cpp's names and shapes (iron.models.random_model)."""
    return random_weights(config, seed, np.float32)


#: The projections the tiny file stores quantised, one of each format the loader takes (rows of 128 weights:
#: whole blocks of 32; the K-quants' super-blocks of 256 need ffn_down's rows of 256).  Block 0's Q, K and V are
#: all quantised (one stacked projection of two parts: Q4_0 rows, then Q8_0) and its gate and up all float (one
#: stacked float projection); block 1 mixes float and quantised in both (three and two separate projections).
QUANTISED = {"blk.0.attn_q.weight": "Q4_0", "blk.0.attn_k.weight": "Q4_0", "blk.0.attn_v.weight": "Q8_0",
             "blk.0.ffn_down.weight": "Q4_K", "blk.1.attn_k.weight": "Q8_0", "blk.1.ffn_gate.weight": "Q8_0",
             "blk.1.ffn_down.weight": "Q6_K"}


@pytest.fixture(scope="module")
def tiny_file(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("gguf") / "tiny-llama.gguf"
    write_llama(path, TINY, tiny_weights(TINY), qtypes=QUANTISED)
    return str(path)


def test_the_loader_reads_what_the_writer_wrote(tiny_file):
    config, tensors = read_llama(tiny_file)
    # GGUF keeps the base and the epsilon as f32
    assert config == replace(TINY, eps=float(np.float32(TINY.eps)), rope_theta=float(np.float32(TINY.rope_theta)))
    weights = tiny_weights(TINY)
    np.testing.assert_array_equal(tensors["blk.1.attn_q.weight"], weights["blk.1.attn_q.weight"])
    v = tensors["blk.0.attn_v.weight"]
    assert isinstance(v, QuantTensor) and (v.qtype, v.rows, v.cols) == ("Q8_0", TINY.head_dim, TINY.hidden)
    assert v.data.shape == (TINY.head_dim, TINY.hidden // 32 * 34)  # 32 values a block: an f16 scale, 32 int8
    assert tensors["blk.0.attn_q.weight"].qtype == "Q4_0"
    down = tensors["blk.0.ffn_down.weight"]
    assert (down.qtype, down.data.shape) == ("Q4_K", (TINY.hidden, 144))  # one super-block of 256 a row
    assert (tensors["blk.1.ffn_down.weight"].qtype, tensors["blk.1.ffn_down.weight"].data.shape[1]) == ("Q6_K", 210)


def test_projections_are_stacked_where_their_storage_allows(tiny_file):
    model = Llama.from_gguf(tiny_file, backend="interp")
    first, second = model.blocks
    (qkv,) = first.qkv
    assert [(q, r) for q, r, _ in qkv.parts] == [("Q4_0", 3 * TINY.head_dim), ("Q8_0", TINY.head_dim)]
    (gate_up,) = first.gate_up
    assert gate_up.weight.shape == (2 * TINY.ffn, TINY.hidden) and not gate_up.parts
    assert len(second.qkv) == 3 and len(second.gate_up) == 2


@pytest.mark.parametrize("backend,prompts", [("interp", [[1, 5, 7, 9], [3]]), ("interp", [[2, 8]]),
                                             ("vulkan", [[1, 5, 7, 9], [3]])],
                         ids=["interp-batch-2", "interp-batch-1", "vulkan-batch-2"])
def test_greedy_decoding_matches_the_pytorch_reference_at_every_step(tiny_file, backend, prompts):
    torch = pytest.importorskip("torch")
    from iron.models.reference import TorchLlama

    model = Llama.from_gguf(tiny_file, backend=backend)
    max_new = 3
    seen: list[np.ndarray] = []
    new = model.generate(prompts, max_new, on_step=lambda pos, logits: seen.append(logits))
    assert [len(n) for n in new] == [max_new] * len(prompts)
    config, tensors = read_llama(tiny_file)
    ref = TorchLlama(config, tensors)
    full = [p + n for p, n in zip(prompts, new)]
    assert len(seen) == max(map(len, prompts)) + max_new - 1
    for pos, logits in enumerate(seen):
        fed = np.array([f[min(pos, len(f) - 1)] for f in full], np.int32)
        want = ref.step(fed, pos)
        # f32 throughout: each logit ends a chain of a few hundred roundings (dot products of 128-256 terms in
        # two blocks); 1e-5 of the largest logit is about 80 f32 epsilons (seen: 6.4e-7; RoPE on the other pairs
        # gives 0.35).
        np.testing.assert_allclose(logits, want, rtol=0, atol=1e-5 * np.abs(want).max())
        for i, f in enumerate(full):
            if len(prompts[i]) - 1 <= pos < len(prompts[i]) - 1 + max_new:
                assert f[pos + 1] == int(np.argmax(want[i])), f"sequence {i}, position {pos}"
    del torch


def test_f16_prefill_then_decode_matches_the_pytorch_reference(tiny_file):
    """f16 activations: both prompts as one packed prefill (prefill_attention_paged over the pages just written),
    then each sequence decodes at its own position; the reference runs each sequence alone, a token a step."""
    pytest.importorskip("torch")
    from iron.models.reference import TorchLlama

    model = Llama.from_gguf(tiny_file, backend="interp", dtype=np.float16)
    assert model.prefills
    prompts, max_new = [[1, 5, 7, 9], [3]], 3
    seen: list[np.ndarray] = []
    new = model.generate(prompts, max_new, on_step=lambda step, logits: seen.append(logits))
    assert len(seen) == max_new and all(len(n) == max_new for n in new)
    config, tensors = read_llama(tiny_file)
    for i, prompt in enumerate(prompts):
        ref = TorchLlama(config, tensors)
        for pos, token in enumerate(prompt):
            want = ref.step(np.array([token]), pos)[0]
        for j in range(max_new):
            if j:
                want = ref.step(np.array([new[i][j - 1]]), len(prompt) + j - 1)[0]
            # f16 activations rounded after every op of two blocks: 1e-2 of the largest logit is about 20 f16
            # epsilons (seen: 1.1e-3)
            tol = 1e-2 * np.abs(want).max()
            np.testing.assert_allclose(seen[j][i], want, rtol=0, atol=tol)
            top = np.sort(want)
            if top[-1] - top[-2] > 2 * tol:  # a clear winner: the same greedy token
                assert new[i][j] == int(np.argmax(want)), f"sequence {i}, token {j}"


def test_bad_input_is_a_clear_error(tiny_file, tmp_path):
    model = Llama.from_gguf(tiny_file, backend="interp")
    with pytest.raises(LaunchError, match="prompt of at least one token"):
        model.generate([[1], []], 2)
    with pytest.raises(LaunchError, match=r"prompt tokens must lie in \[0, 96\)"):
        model.generate([[96]], 1)
    with pytest.raises(LaunchError, match="no file"):
        read_llama(tmp_path / "missing.gguf")
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"not a gguf file at all")
    with pytest.raises(LaunchError, match="not a GGUF file"):
        read_llama(junk)


def test_the_command_line_generates_and_reports(tiny_file, capsys):
    from iron.cli.main import main as iron_main
    from iron.models.__main__ import main

    assert main(["generate", tiny_file, "--prompt", "1,5", "--prompt", "3", "--max-new", "2",
                 "--device", "cpu", "--backend", "interp"]) == 0
    out, err = capsys.readouterr()
    model = Llama.from_gguf(tiny_file, backend="interp")
    want = model.generate([[1, 5], [3]], 2)
    assert out.splitlines() == [f"1,5 -> {','.join(map(str, want[0]))}", f"3 -> {','.join(map(str, want[1]))}"]
    assert "time to first token" in err and "tokens/s" in err
    assert "\r" not in err  # not a terminal: progress as whole lines, not carriage returns
    # `iron run` is the same command
    assert iron_main(["run", tiny_file, "--prompt", "1,5", "--prompt", "3", "--max-new", "2", "--device", "cpu",
                      "--backend", "interp"]) == 0
    assert capsys.readouterr().out.splitlines() == out.splitlines()
    assert main(["generate", tiny_file, "--prompt", "1,x"]) == 2
    assert "comma-separated integer token ids" in capsys.readouterr().err
    assert main(["generate", tiny_file, "--prompt", "1", "--device", "cpu", "--graphs"]) == 2
    assert "--graphs replays CUDA graphs" in capsys.readouterr().err


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_the_command_line_checks_its_logits_against_pytorch(tiny_file, dtype, capsys):
    """--check: every position that chose a token (two sequences, three new tokens each) against the PyTorch model
    in f32, in lock step (f32) and after a prefill (f16); a bad step past the dtype's bound exits 1."""
    pytest.importorskip("torch")
    from iron.models import __main__ as cli

    args = ["generate", tiny_file, "--prompt", "1,5", "--prompt", "3", "--max-new", "3", "--device", "cpu",
            "--backend", "interp", "--dtype", dtype, "--check"]
    assert cli.main(args) == 0
    err = capsys.readouterr().err
    assert f"check: logits within {cli.CHECK_BOUNDS[dtype]:g} of the PyTorch f32 model's at 6 positions" in err


def test_the_logit_check_catches_a_step_off_by_a_percent(tiny_file):
    """logit_error over a generation's own logits, then with one sequence's logits at one step moved by 1% of
    their largest: the error follows (what --check's bound of 1e-4 in f32 would refuse)."""
    pytest.importorskip("torch")
    from iron.models.reference import logit_error

    model = Llama.from_gguf(tiny_file, backend="interp")
    prompts, seen = [[1, 5], [3]], []
    new = model.generate(prompts, 3, on_step=lambda step, logits: seen.append(logits))
    config, tensors = read_llama(tiny_file)
    error, positions = logit_error(config, tensors, prompts, new, seen, model.prefills)
    assert positions == 6 and error < 1e-5
    seen[-1] = seen[-1].copy()
    seen[-1][0, 7] += 0.01 * np.abs(seen[-1][0]).max()  # the longer prompt's last token (lock step)
    bad, _ = logit_error(config, tensors, prompts, new, seen, model.prefills)
    assert 0.009 < bad < 0.011


def test_the_random_command_writes_a_whole_file_or_none(tmp_path, capsys):
    from iron.models.__main__ import main

    out = tmp_path / "random.gguf"
    assert main(["random", str(out), "--preset", "tiny", "--qtype", "Q4_K"]) == 2  # rows of 128: no K-quant
    assert "blocks of 256 weights" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
    assert main(["random", str(out), "--preset", "tiny", "--qtype", "Q8_0", "--seed", "3"]) == 0
    config, tensors = read_llama(out)
    assert config.hidden == TINY.hidden and config.layers == TINY.layers
    assert all(isinstance(tensors[f"blk.{i}.{n}.weight"], QuantTensor) for i in range(2) for n in PROJECTIONS)
    assert tensors["token_embd.weight"].dtype == np.float16
    assert main(["random", str(tmp_path / "missing" / "x.gguf")]) == 2
