"""The random-kernel differential fuzzer in CI: a fixed set of seeds on the interpreter against lavapipe
(and against CUDA where an NVIDIA GPU answers).  Larger runs: scripts/fuzz.py (docs/fuzzing.md)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fuzz import differential, kernelgen
from fuzz.kernelgen import Domain, generate

#: Small programs, so that compiling them for lavapipe stays within CI's time (about 2 s each here).
#: ``atan`` is in: the GLSL emitter prints it as ``iron_atan2(x, 1.0)`` (4 ulp), where lavapipe's own atan was
#: ~30 ulp off.
CI_DOMAIN = Domain(statements=(4, 9))
#: Chosen once to cover every construct of the domain between them (see test_ci_seeds_cover_the_domain).
CI_SEEDS = [9, 20, 0, 24, 17, 36]


def _require(backend: str) -> None:
    if backend == "vulkan":
        from runner_testing import require_vulkan

        require_vulkan()
        return
    ok, why = differential.available(backend)
    if not ok:
        pytest.skip(f"no {backend} device here: {why}")


@pytest.mark.parametrize("backend", ["vulkan", "cuda"])
@pytest.mark.parametrize("seed", CI_SEEDS)
def test_backend_agrees_with_the_interpreter(seed, backend):
    _require(backend)
    outcome = differential.check_program(generate(seed, CI_DOMAIN), ["interp", backend])
    assert outcome.invalid is None, f"seed {seed}: the generator made an invalid program: {outcome.invalid}\n" \
                                    f"{outcome.source}"
    problems = [f"{b} raised: {e}" for b, e in outcome.errors] + [m.report(with_source=False)
                                                                   for m in outcome.mismatches]
    assert not problems, "\n".join(problems) + "\n--- program ---\n" + outcome.source


def test_ci_seeds_cover_the_domain():
    sources = "\n".join(generate(s, CI_DOMAIN).source() for s in CI_SEEDS)
    for construct in ("barrier()", "simd_", "for ", "while ", "if ", "f16(", "u32(", " // ", "break", "fma(",
                      "sqrt(", "exp", "atan(", "i32(u32(", "& 511]"):
        assert construct in sources, f"no CI program uses {construct!r}: choose other CI_SEEDS"


def test_a_program_is_a_function_of_its_seed_and_domain():
    a, b = generate(7), generate(7)
    assert a.source() == b.source() and a.approx == b.approx
    assert generate(8).source() != a.source()
    small = generate(7, Domain(loops=False, shared=False, subgroups=False, f16=False, ints=False))
    text = small.source().split("def fuzz_kernel")[1]
    for absent in ("for ", "while ", "barrier()", "simd_", "ah = ", "au = "):
        assert absent not in text
    inputs = kernelgen.make_inputs(7)
    assert all(np.array_equal(v, kernelgen.make_inputs(7)[k]) for k, v in inputs.items())


def test_domain_switches_parse_from_text():
    d = Domain.parse("loops=0,max_trip=3,signed_zero=1")
    assert (d.loops, d.max_trip, d.signed_zero) == (False, 3, True)
    assert d.describe() == "loops=0,max_trip=3,signed_zero=1"
    with pytest.raises(ValueError, match="unknown domain switch 'nope'"):
        Domain.parse("nope=1")


def test_a_difference_is_reported_with_seed_program_and_elements():
    """The comparison itself: one wrong bit in an exact output, a signed zero, and an approximate output
    past its tolerance are each found; a difference within the tolerance is not."""
    program = generate(5, Domain(approx=True))
    ref = {k: v.copy() for k, v in kernelgen.make_inputs(5).items() if k in kernelgen.OUTPUTS}
    ref["to"][:] = 0.5
    got = {k: v.copy() for k, v in ref.items()}
    got["io"][kernelgen.SLOTS * 3 + 2] ^= 1
    found = differential.compare_outputs(program, "SOURCE", "vulkan", 8, got, ref)
    assert [m.output for m in found] == ["io"]
    text = found[0].report()
    assert "seed 5" in text and "thread 3 slot 2" in text and "SOURCE" in text

    got = {k: v.copy() for k, v in ref.items()}
    got["fo"][0], ref["fo"][0] = -0.0, 0.0
    assert not differential.compare_outputs(program, "", "vulkan", 8, got, ref)
    signed = dataclasses.replace(program, domain=Domain(signed_zero=True))
    assert [m.output for m in differential.compare_outputs(signed, "", "vulkan", 8, got, ref)] == ["fo"]

    got = {k: v.copy() for k, v in ref.items()}
    got["to"][1] = np.float32(0.5 * (1 + 1e-7))  # within every function's allowance
    assert not differential.compare_outputs(program, "", "vulkan", 8, got, ref)
    got["to"][1] = np.float32(0.5 * (1 + 1e-4))
    found = differential.compare_outputs(program, "", "vulkan", 8, got, ref)
    assert [m.output for m in found] == ["to"] and found[0].elements[0][:2] == (0, 1)


def test_minimize_keeps_the_disagreement_and_drops_the_rest(monkeypatch):
    """A fake device that is wrong in 'io' whenever the program has a barrier: the minimised program still
    has one (and still disagrees), and has fewer statements."""
    from fuzz.minimize import minimize

    seen = {}
    real_load = differential.load_kernel

    def load(source):
        seen["source"] = source
        return real_load(source)

    def device(kernel, backend, inputs):
        out = differential.run_interp(kernel, inputs, 32)
        if "barrier()" in seen["source"]:
            out["io"][3] += 1
        return out

    monkeypatch.setattr(differential, "load_kernel", load)
    monkeypatch.setattr(differential, "run_device", device)
    program = generate(0, Domain(statements=(3, 4), loops=False, approx=False, f16=False, subgroups=False))
    assert "barrier()" in program.source()
    outcome = minimize(program, ["interp", "fake"], max_tries=40)
    assert outcome is not None and [m.output for m in outcome.mismatches] == ["io"]
    assert "barrier()" in outcome.source
    assert len(outcome.source.splitlines()) < len(program.source().splitlines())


def test_replay_reports_failure_only_when_the_program_disagrees(monkeypatch, tmp_path, capsys):
    """scripts/fuzz.py --replay: exit status 0 and 'ok' for a saved program every backend agrees on, 1 and the
    mismatch when one does not (it once reported every replay as failed)."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("fuzz_script", Path(__file__).parents[2] / "scripts" / "fuzz.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    wrong = {"on": False}

    def device(kernel, backend, inputs):
        out = differential.run_interp(kernel, inputs, 32)
        if wrong["on"]:
            out["io"][3] += 1
        return out

    monkeypatch.setattr(differential, "run_device", device)
    monkeypatch.setattr(differential, "available", lambda backend: (True, ""))
    domain = "loops=0,approx=0,f16=0,subgroups=0"
    saved = tmp_path / "seed_0.py"
    saved.write_text(generate(0, Domain(statements=(3, 4), loops=False, approx=False, f16=False,
                                        subgroups=False)).source())
    argv = ["--replay", str(saved), "--seed", "0", "--backends", "interp,fake", "--domain", domain]
    assert script.main(argv) == 0
    assert "fuzz: 0 of 1 programs failed" in capsys.readouterr().out
    wrong["on"] = True
    assert script.main(argv) == 1
    out = capsys.readouterr().out
    assert "MISMATCH" in out and "fake differs from interp" in out and "fuzz: 1 of 1 programs failed" in out
