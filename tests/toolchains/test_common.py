"""Diagnostics, errors and the inventory shared by every toolchain."""

from __future__ import annotations

import pytest

from iron import config
from iron.codegen import toolchains
from iron.codegen.toolchains import glsl_compilers
from iron.codegen.toolchains.common import (Diagnostic, ToolchainMissing, error_from_diagnostics,
                                            parse_clang_diagnostics)

SOURCE = "line one\n  float4 v = h;\nline three\n"


def test_error_in_a_header_is_located_at_the_line_that_used_it():
    log = ("/x/shim.h:150:20: error: static assertion failed: needs 4 components\n"
           "kernel.metal:2:14: note: in instantiation of function template specialization requested here\n"
           "kernel.metal:3:1: error: second problem\n")
    diags = parse_clang_diagnostics(log)
    assert [d.severity for d in diags] == ["error", "error"] and diags[0].notes[0].line == 2
    err = error_from_diagnostics("clang", diags, SOURCE, "kernel.metal", log)
    assert (err.file, err.line, err.source_line) == ("kernel.metal", 2, "  float4 v = h;")
    assert str(err).splitlines()[:2] == ["kernel.metal:2: clang: static assertion failed: needs 4 components",
                                         "    float4 v = h;"]
    assert "1 more error(s)" in str(err) and err.log == log


def test_an_unlocated_failure_still_says_what_the_tool_printed():
    err = error_from_diagnostics("ptxas", [], SOURCE, "k.cu", "ptxas fatal: something broke\n")
    assert err.line is None and "ptxas fatal: something broke" in str(err)
    err = error_from_diagnostics("nvrtc", [Diagnostic(None, None, "error", "wgmma needs sm_90a")], SOURCE, "k.cu", "")
    assert err.line is None and "wgmma needs sm_90a" in str(err)


def test_missing_toolchain_names_the_tool_and_the_install_command():
    e = ToolchainMissing("glslc", "apt-get install glslc spirv-tools", "glslc not found")
    assert str(e) == "glslc is not available (glslc not found); install it with: apt-get install glslc spirv-tools"


def test_inventory_lists_every_toolchain_with_a_version_or_a_reason():
    inv = toolchains.inventory()
    assert [t.name for t in inv] == ["nvrtc", "hip", "spirv", "metal"]
    for t in inv:
        assert t.install and t.purpose
        assert (t.version is not None) == t.available
        assert (t.reason is None) == t.available


class _Absent:
    """A toolchain module stand-in that is never installed (tests the helper, not a compiler)."""

    TOOL = "imaginary-cc"
    INSTALL = "apt-get install imaginary-cc"

    @staticmethod
    def available() -> bool:
        return False

    @staticmethod
    def unavailable_reason() -> str:
        return "imaginary-cc not found"


def test_missing_toolchain_skips_outside_ci_and_fails_in_ci(monkeypatch, require_toolchain):
    monkeypatch.setitem(toolchains.TOOLCHAINS, "imaginary", _Absent)
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("IRON_REQUIRE_TOOLCHAINS", raising=False)
    config.reload()
    with pytest.raises(pytest.skip.Exception, match="install it with: apt-get install imaginary-cc"):
        require_toolchain("imaginary")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="imaginary-cc not found"):
        require_toolchain("imaginary")
    monkeypatch.delenv("CI")
    monkeypatch.setenv("IRON_REQUIRE_TOOLCHAINS", "1")
    config.reload()
    try:
        with pytest.raises(pytest.fail.Exception):
            require_toolchain("imaginary")
    finally:
        monkeypatch.delenv("IRON_REQUIRE_TOOLCHAINS")
        config.reload()


@pytest.mark.parametrize("name, run", [
    ("hip", lambda m: m.compile_hip("__global__ void k() {}")),
    ("spirv", lambda m: m.compile_glsl("#version 450\nvoid main() {}")),
    ("metal", lambda m: m.check_msl("kernel void k() {}")),
])
def test_a_tool_off_the_path_is_missing_with_its_install_command(monkeypatch, tmp_path, name, run):
    module = toolchains.TOOLCHAINS[name]
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty directory: no compiler can be found
    if name == "spirv":  # the PyPI glslang is found without PATH: hide it too
        monkeypatch.setattr(glsl_compilers, "_pypi_prefix", lambda: None)
    probe = glsl_compilers.probe if name == "spirv" else module._probe
    probe.cache_clear()
    try:
        assert not module.available()
        assert "not found" in module.unavailable_reason()
        with pytest.raises(ToolchainMissing) as info:
            run(module)
        assert info.value.install == module.INSTALL and "apt-get install" in str(info.value)
    finally:
        monkeypatch.undo()
        probe.cache_clear()
