"""The parts of checking MSL that C++ cannot express, done on the source text.

Two things, both on a copy of the source whose comments and literals are blanked out (so a
word inside a comment is never touched):

- :func:`prepare_for_clang` renames ``threadgroup`` where Metal's meaning cannot be a C++
  qualifier: a threadgroup variable declared in a function body (C++ forbids automatic variables
  in an address space; Metal's are per threadgroup) and the ``[[threadgroup(n)]]`` attribute.
  The replacements have the same length, so every line and column stays where it was.
- :func:`check_kernel_signatures` applies Metal's rules for kernel functions: they return void,
  and each pointer or reference parameter names its address space (device, constant or
  threadgroup); a missing one is the classic mistake that C++ would accept as a plain pointer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_TOKEN = re.compile(r"//[^\n]*|/\*.*?\*/|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'", re.S)


def mask_comments_and_literals(source: str) -> str:
    """``source`` with comments and string/char literals replaced by spaces (newlines kept)."""
    return _TOKEN.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), source)


# Same length as "threadgroup": columns in the compiler's messages stay valid.
_LOCAL_THREADGROUP = "iron_tg_loc"
_THREADGROUP_ATTRIBUTE = "iron_tg_buf"


#: ``alignas(16)`` opening a statement, just before a function-scope ``threadgroup`` declaration.
_ALIGNED_DECLARATION = re.compile(r"[{};]\s*alignas\s*\(\s*\d+\s*\)\s*$")


def prepare_for_clang(source: str) -> str:
    """The source with function-scope threadgroup declarations and [[threadgroup(n)]] renamed for the shim."""
    masked = mask_comments_and_literals(source)
    out = list(source)
    braces = parens = 0
    last_significant = ";"
    pos = 0
    for m in re.finditer(r"\bthreadgroup\b|[{}();]", masked):
        for ch in masked[pos:m.start()]:
            if not ch.isspace():
                last_significant = ch
        pos = m.end()
        tok = m.group(0)
        if tok == "{":
            braces += 1
        elif tok == "}":
            braces -= 1
        elif tok == "(":
            parens += 1
        elif tok == ")":
            parens -= 1
        elif tok == "threadgroup":
            following = masked[m.end():].lstrip()
            if following.startswith("("):
                out[m.start():m.end()] = _THREADGROUP_ATTRIBUTE
            elif braces > 0 and parens == 0 and (last_significant in "{};"
                                                 or _ALIGNED_DECLARATION.search(masked, 0, m.start())):
                out[m.start():m.end()] = _LOCAL_THREADGROUP
        last_significant = tok[-1]
    return "".join(out)


@dataclass(frozen=True)
class SignatureProblem:
    line: int
    message: str


_KERNEL = re.compile(r"\bkernel\s+([A-Za-z_][\w:<>]*)\s+([A-Za-z_]\w*)\s*\(")
_ADDRESS_SPACES = re.compile(r"\b(device|constant|threadgroup)\b")
_OPEN = "([{<"
_CLOSE = ")]}>"


def kernel_names(source: str) -> list[str]:
    """The names of the kernel functions ``source`` defines or declares."""
    return [m.group(2) for m in _KERNEL.finditer(mask_comments_and_literals(source))]


def check_kernel_signatures(source: str) -> list[SignatureProblem]:
    """Metal's kernel-signature rules that the C++ check cannot see; empty when all hold."""
    masked = mask_comments_and_literals(source)
    problems = []
    for m in _KERNEL.finditer(masked):
        if m.group(1) != "void":
            problems.append(SignatureProblem(_line_of(masked, m.start()),
                                             f"kernel '{m.group(2)}' must return void, not {m.group(1)}"))
        for start, text in _parameters(masked, m.end()):
            plain = re.sub(r"\[\[.*?\]\]", " ", text, flags=re.S)
            if ("*" in plain or "&" in plain) and not _ADDRESS_SPACES.search(plain):
                name = re.findall(r"[A-Za-z_]\w*", plain)
                problems.append(SignatureProblem(
                    _line_of(masked, start),
                    f"kernel '{m.group(2)}': pointer or reference parameter '{name[-1] if name else plain.strip()}' "
                    f"needs an address space: device, constant or threadgroup"))
    return problems


def _parameters(masked: str, start: int) -> list[tuple[int, str]]:
    """(offset, text) of each top-level parameter of the list opening just before ``start``."""
    params = []
    depth = 0
    begin = start
    for i in range(start, len(masked)):
        ch = masked[i]
        if ch in _OPEN:
            depth += 1
        elif ch in _CLOSE:
            if depth == 0:  # the list's closing parenthesis
                if masked[begin:i].strip():
                    params.append((begin + len(masked[begin:i]) - len(masked[begin:i].lstrip()), masked[begin:i]))
                break
            depth -= 1
        elif ch == "," and depth == 0:
            params.append((begin + len(masked[begin:i]) - len(masked[begin:i].lstrip()), masked[begin:i]))
            begin = i + 1
    return params


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1
