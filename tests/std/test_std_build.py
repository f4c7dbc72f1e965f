"""``iron build`` over the library itself (issue 16, item 12): every std module's kernels enumerate exactly the
specialisations that compile (the rules of ``variants(where=...)`` drop the rest), and a representative subset
is emitted for every target and compiled with the toolchains present.

Building everything (``iron build --emit all -m iron.std.<module>``, about 2,000 specialisations, 864 of them
gemm_mma's) takes far longer than a test may; here: the enumeration of all, the frontend of a covering subset
(every value of every parameter, and every gemm_mma tile configuration), the build's sources, manifest and
Swift on one specialisation of every kernel, and the toolchains on the kernels whose variants have rules.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

import iron.std as S
from iron.codegen.toolchains import TOOLCHAINS
from iron.harness.build import build
from iron.harness.discovery import kernels_in
from iron.core.errors import IronCompileError
from iron.lang.annotations import VariantValues
from iron.lang.frontend import lower_kernel
from iron.lang.params import NO_DEFAULT

MODULES = (*S.MODULES, "gemm_wg", "gemm_ws", "gemm_fp8", "conv_mma", "attention_decode", "attention_decode_mma",
           "attention_prefill", "attention_ws")


def _kernels() -> list[tuple[str, str, Any]]:
    return [(m, name, k) for m in MODULES for name, k in kernels_in([f"iron.std.{m}"])
            if k.__module__ == f"iron.std.{m}"]


KERNELS = _kernels()


def test_every_kernel_is_built_ahead_of_time():
    """Each kernel declares every value it needs (no free dtype, no Constexpr without a default): the build
    enumerates it instead of skipping it with a note."""
    for module, name, k in KERNELS:
        assert k.variants, f"{module}.{name} has no variants"
        assert not k.resolver.free_type_vars, f"{module}.{name}: {k.resolver.free_type_vars} left to the launch"
        assert all(s.default is not NO_DEFAULT for s in k.resolver.constexprs.values())


def _lower_raw(k: Any, binding: dict[str, Any]) -> Any:
    """The frontend on ``binding`` without the rules' check: what the kernel itself says."""
    return lower_kernel(k.parsed, k.params, k.resolver.complete(binding), k.name, {})


#: Rules that exclude what the kernel lowers but no device would launch (a configuration the host never picks,
#: a ring larger than the shared memory of every device that runs it), not what its frontend rejects.
DEVICE_RULES = ("mma_config_listed", "wg_ring_fits", "conv_config_listed", "ws_fits", "fp8_fits", "fp8_overlap_folds",
                "decode_mma_fits")
RULED = [(m, n, k) for m, n, k in KERNELS if any(r.__name__ not in DEVICE_RULES for r in k._variants.where)]


@pytest.mark.parametrize("module,name,k", RULED, ids=[n for _, n, _ in RULED])
def test_each_rule_excludes_combinations_the_kernel_rejects(module, name, k):
    """The rules are needed: the first excluded combination fails in the kernel's own frontend (before the
    rules, `iron build` stopped there), and launching it names the kernel and the rule."""
    from iron import LaunchError

    valid = {tuple(sorted(b.items(), key=lambda kv: kv[0])) for b in k.variants}
    excluded = [b for b in k._variants.product() if tuple(sorted(b.items(), key=lambda kv: kv[0])) not in valid]
    assert excluded, f"{name}'s rules exclude nothing"
    structural = [r for r in k._variants.where if r.__name__ not in DEVICE_RULES]
    rejected = next(b for b in excluded if any(not r(VariantValues(b)) for r in structural))
    with pytest.raises(IronCompileError):
        _lower_raw(k, rejected)
    with pytest.raises(LaunchError, match=rf"kernel '{name}' has no variant .*: its rule '?\"?\w+: "):
        k.variant(**rejected)


def _covering(k: Any) -> list[dict[str, Any]]:
    """Valid bindings that between them take every value of every variant parameter."""
    chosen: list[dict[str, Any]] = []
    for param, values in k._variants.params.items():
        for v in values:
            if not any(b[param] == v and type(b[param]) is type(v) for b in chosen):
                hit = next((b for b in k.variants if b[param] == v and type(b[param]) is type(v)), None)
                if hit is not None:
                    chosen.append(hit)
    if k.name == "gemm_mma":  # every tile configuration, both layouts of B
        seen = set()
        for b in k.variants:
            key = (b["FRAG"], b["WARPS"], b["WT"], b["BK"], b["THREADS"], b["STAGES"], b["BT"])
            if key not in seen:
                seen.add(key)
                chosen.append(b)
    return chosen


def test_a_covering_subset_of_every_kernel_lowers():
    start = time.monotonic()
    for module, name, k in KERNELS:
        for binding in _covering(k):
            k.ir(**binding)
    assert time.monotonic() - start < 120


def _one_each(kernels: list[tuple[str, str, Any]]) -> list[tuple[str, Any]]:
    """(name, kernel) with ``variants`` cut to the first valid binding: the build on one of each."""

    class First:
        def __init__(self, k: Any):
            self._k = k
            self.variants = k.variants[:1]

        def ir(self, **binding: Any) -> Any:
            return self._k.ir(**binding)

    return [(name, First(k)) for _, name, k in kernels]


@pytest.mark.parametrize("compiled", [False, True], ids=["every-kernel-sources", "ruled-kernels-compiled"])
def test_build_emits_every_target_and_compiles_with_the_toolchains_here(compiled):
    """Sources, manifest and Swift for one specialisation of every kernel; the toolchains (NVRTC, glslc,
    hip clang) on the kernels whose variants have rules."""
    kinds = ["ir", "cuda", "hip", "glsl", "msl", "swift", "manifest"]
    if compiled:
        kinds += [kind for kind, tool in (("ptx", "nvrtc"), ("spirv", "spirv"), ("hsaco", "hip"))
                  if TOOLCHAINS[tool].available()]
    # The toolchains on the kernels whose variants have rules, the new risk of a build: test_registrations
    # compiles the library's registered specialisations with every toolchain already.
    chosen = RULED if compiled else KERNELS
    assert chosen
    result = build(_one_each(chosen), kinds, strict=False)
    kernels = {k["name"]: k for k in result.manifest["kernels"]}
    assert set(kernels) == {name for _, name, _ in chosen}
    # A target is left out only for a reason of that device: warpgroup multiplies (CUDA sm_90 alone), or a
    # configuration whose shared memory is past the default profile's (the CUDA tiles of gemm_mma and
    # attention_prefill on Metal, lavapipe).
    reasons = ("runs on NVIDIA Hopper's wgmma alone", "shared memory reaches", "does not fit beside")
    unexplained = [note for note in result.notes if not any(r in note for r in reasons)]
    assert not unexplained, "\n".join(unexplained)
    for name, entry in kernels.items():
        (variant,) = entry["variants"]
        missing = {t for t in ("cuda", "hip", "spirv", "metal")
                   if any(note.startswith(f"{name} [") and f"no {t} source" in note for note in result.notes)}
        targets = {"cuda", "hip", "spirv", "metal"} - missing
        assert set(variant["targets"]) == targets and "cuda" in targets, name
        for kind in kinds:
            target = {"glsl": "spirv", "msl": "metal", "ptx": "cuda", "hsaco": "hip"}.get(kind, kind)
            if kind not in ("ir", "manifest", "swift") and target in targets:
                assert any(f.startswith(f"{kind}/") for f in variant["files"]), (name, kind)
    swift = result.files["swift/IronKernels.swift"].decode()
    for name, entry in kernels.items():  # a typed Swift entry point exactly where there is Metal source
        (variant,) = entry["variants"]
        assert (f"public func {variant['entry']}(" in swift) == ("metal" in variant["targets"]), name
