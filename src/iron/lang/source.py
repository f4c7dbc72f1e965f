"""Reading a decorated function's source: its AST, real source positions and namespace.

Kernels and helpers are parsed once, when decorated.  Every AST node maps
back to the user's file, line and column (the source is dedented before
parsing, so columns are shifted back), which is what every compile error
reports.
"""

from __future__ import annotations

import ast
import builtins
import inspect
from dataclasses import dataclass, field
from typing import Any, Callable

from ..core.errors import SourceLoc, UnsupportedSyntaxError

_MISSING = object()


@dataclass
class ParsedFunction:
    """A Python function's AST with the means to locate nodes and resolve free names."""

    fn: Callable[..., Any]
    tree: ast.FunctionDef
    file: str
    #: File line of the first parsed line, minus one.
    line_offset: int
    #: Columns removed from each parsed line (1-based) by dedenting.
    col_shift: dict[int, int]
    #: The dedented source lines, to turn AST byte offsets into characters.
    lines: list[str]
    closure: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.tree.name

    @property
    def first_line(self) -> int:
        """The file line of the ``def`` itself (after any decorators)."""
        return self.tree.lineno + self.line_offset

    @property
    def docstring(self) -> str | None:
        return ast.get_docstring(self.tree)

    def loc(self, node: ast.AST | None) -> SourceLoc:
        """The user's file position of ``node`` (the function itself when ``node`` is None)."""
        if node is None or not hasattr(node, "lineno"):
            node = self.tree
        line = node.lineno
        col = node.col_offset
        if 1 <= line <= len(self.lines):
            text = self.lines[line - 1]
            col = len(text.encode("utf-8")[:col].decode("utf-8", errors="replace"))
        return SourceLoc(self.file, line + self.line_offset, col + self.col_shift.get(line, 0))

    def lookup(self, name: str) -> Any:
        """A free name of the body: closure cell, then module global, then Python builtin; _MISSING if none."""
        if name in self.closure:
            return self.closure[name]
        g = self.fn.__globals__
        if name in g:
            return g[name]
        b = g.get("__builtins__", builtins)
        b = b if isinstance(b, dict) else vars(b)
        return b.get(name, _MISSING)

    def known_names(self) -> list[str]:
        """Every name the body could refer to, for "did you mean" suggestions."""
        names = set(self.closure) | set(self.fn.__globals__)
        names |= {n for n in dir(builtins) if not n.startswith("_")}
        return sorted(names)


def is_missing(value: Any) -> bool:
    return value is _MISSING


def parse_function(fn: Callable[..., Any], what: str) -> ParsedFunction:
    """Parse ``fn`` (a kernel or helper; ``what`` names which, for errors)."""
    fn = inspect.unwrap(fn)
    code = getattr(fn, "__code__", None)
    if code is None:
        raise TypeError(f"@iron.{what} decorates a Python function, got {fn!r}")
    file = code.co_filename
    try:
        raw_lines, first = inspect.getsourcelines(fn)
    except (OSError, TypeError) as e:
        raise UnsupportedSyntaxError(
            f"cannot read the source of {what} '{fn.__name__}' ({e})", SourceLoc(file, code.co_firstlineno),
            hint="define kernels in a .py file (Iron parses their source; code typed at a prompt has none)",
        ) from None
    lines, shift = _dedent(raw_lines)
    try:
        module = ast.parse("".join(lines), filename=file)
    except SyntaxError as e:
        loc = SourceLoc(file, (e.lineno or 1) + first - 1, max(0, (e.offset or 1) - 1))
        raise UnsupportedSyntaxError(f"cannot parse the source of {what} '{fn.__name__}': {e.msg}", loc) from None
    tree = next((n for n in module.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
    if tree is None or tree.name != fn.__name__:
        raise UnsupportedSyntaxError(f"@iron.{what} needs a function defined with 'def'",
                                     SourceLoc(file, code.co_firstlineno),
                                     hint="lambdas and generated functions have no source Iron can parse")
    closure = {}
    if fn.__closure__:
        for name, cell in zip(code.co_freevars, fn.__closure__):
            try:
                closure[name] = cell.cell_contents
            except ValueError:  # an empty cell: the name is assigned after the function was defined
                continue
    parsed = ParsedFunction(fn, tree, file, first - 1, shift, lines, closure)
    if isinstance(tree, ast.AsyncFunctionDef):
        raise UnsupportedSyntaxError(f"an {what} cannot be 'async'", parsed.loc(tree))
    return parsed


def _dedent(raw: list[str]) -> tuple[list[str], dict[int, int]]:
    """Strip the ``def`` line's indentation from every line that has it.

    Lines indented less (continuations inside brackets or strings) are left
    alone; the map records what was removed so columns can be restored.
    """
    first = raw[0]
    indent = first[: len(first) - len(first.lstrip())]
    out: list[str] = []
    shift: dict[int, int] = {}
    for i, line in enumerate(raw, start=1):
        if indent and line.startswith(indent):
            out.append(line[len(indent):])
            shift[i] = len(indent)
        else:
            out.append(line)
    return out, shift
