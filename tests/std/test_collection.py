"""Collecting the standard library's tests lowers nothing: compile points come from the bindings alone
(tests/README.md, "Collection"); each specialisation is lowered on first use."""

from __future__ import annotations

import pytest

from std_testing import compile_points


def test_compile_points_do_not_lower_kernels(monkeypatch):
    import importlib

    kernel_module = importlib.import_module("iron.jit.kernel")  # the module: iron.jit.kernel is also a function

    def refuse(*args, **kwargs):
        raise AssertionError("a kernel was lowered while finding compile points")

    monkeypatch.setattr(kernel_module, "lower_kernel", refuse)
    points = compile_points("gemv")
    assert len(points) > 3
    keys = {(p.kernel.name, repr(sorted(p.binding.items(), key=lambda kv: kv[0]))) for _, p in points}
    assert len(keys) == len(points)
    first = points[0][1].kernel
    monkeypatch.setattr(first, "_irs", {})  # as if no other test in this process had lowered it yet
    with pytest.raises(AssertionError, match="lowered"):  # the refusal is live: first use lowers
        first.variant(**{**points[0][1].binding}).ir  # noqa: B018
