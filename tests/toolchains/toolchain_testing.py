"""Helpers shared by the toolchain tests."""

from __future__ import annotations


def line_of(source: str, text: str) -> int:
    """The 1-based line of the only occurrence of ``text`` in ``source``."""
    assert source.count(text) == 1, f"{text!r} must occur exactly once"
    return source[: source.index(text)].count("\n") + 1


def mutate(source: str, old: str, new: str) -> tuple[str, int]:
    """``source`` with its only ``old`` replaced by ``new``, and the line of the change."""
    line = line_of(source, old)
    return source.replace(old, new), line
