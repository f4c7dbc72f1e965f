"""Finding a snippet's line and column in a test file, so error-location tests never hard-code numbers."""

from __future__ import annotations


def where(path: str, snippet: str, occurrence: int = 1) -> tuple[int, int]:
    """The 1-based line and 0-based column of the ``occurrence``-th line containing ``snippet``."""
    seen = 0
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            col = line.find(snippet)
            if col >= 0:
                seen += 1
                if seen == occurrence:
                    return lineno, col
    raise AssertionError(f"{snippet!r} not found {occurrence} time(s) in {path}")


def compile_error(k, cls, **binding):
    """The error ``cls`` that lowering ``k`` for ``binding`` raises (the test fails if none does)."""
    import pytest

    with pytest.raises(cls) as info:
        k.ir(**binding)
    return info.value


def assert_located(err, path: str, snippet: str, occurrence: int = 1, at: str | None = None) -> None:
    """``err`` points at ``snippet`` in ``path`` (or at ``at`` on that line): file, line, column, source line."""
    line, col = where(path, snippet, occurrence)
    with open(path, encoding="utf-8") as f:
        text = f.read().splitlines()[line - 1]
    if at is not None:
        col = text.index(at)
    assert (err.file, err.line, err.col) == (path, line, col), f"error at {err.loc}, expected {path}:{line}:{col + 1}"
    assert err.source_line == text
    rendered = str(err)
    assert f"{path}:{line}:{col + 1}" in rendered and text in rendered
