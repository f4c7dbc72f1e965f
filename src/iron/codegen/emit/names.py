"""C identifiers for IR values: the user's names where the IR has them, numbered otherwise.

Names are unique per kernel (not per scope), so a value can be declared in
any block without shadowing, and they never collide with a keyword or a
builtin of the target language, nor with the names Iron itself declares
(``p`` for the parameter block, ``iron_*``).
"""

from __future__ import annotations

import re

from ...core.ir import Value

#: Words no target may use as an identifier (C/C++, GLSL and MSL keywords and builtins
#: an emitted kernel refers to), plus the names the emitters declare themselves.
RESERVED = frozenset(["auto", "bool", "break", "case", "char", "const", "constant", "continue", "default", "device", "do", "double", "else", "enum", "extern", "false", "float", "for", "goto", "half", "if", "inline", "int", "kernel", "long", "main", "namespace", "new", "out", "in", "inout", "operator", "private", "public", "register", "restrict", "return", "sample", "short", "signed", "sizeof", "static", "struct", "switch", "template", "this", "thread", "threadgroup", "true", "typedef", "typename", "uniform", "union", "unsigned", "using", "vec2", "vec3", "vec4", "ivec4", "uvec4", "bvec4", "void", "volatile", "while", "buffer", "shared", "layout", "precision", "highp", "mediump", "lowp", "attribute", "varying", "coherent", "readonly", "writeonly", "invariant", "discard", "active", "filter", "input", "output", "common", "partition", "texture", "sampler", "image", "atomic_uint", "bfloat", "float4", "half4", "uint", "ushort", "uchar", "ulong", "min", "max", "abs", "sign", "exp", "log", "pow", "sqrt", "fma", "select", "clamp", "mix", "step", "round", "floor", "ceil", "trunc", "fract", "mod", "dot", "cross", "length", "distance", "normalize", "all", "any", "not", "equal", "lessThan", "greaterThan", "barrier", "memoryBarrier", "p",
                      # C++ alternative tokens: a short-circuit temporary was once named `and`
                      "and", "and_eq", "bitand", "bitor", "compl", "not_eq", "or", "or_eq", "xor", "xor_eq"])

_IDENT = re.compile(r"[^A-Za-z0-9_]")


def field_ident(name: str, extra_reserved: frozenset[str] = frozenset()) -> str:
    """The parameter block's member for scalar parameter ``name``: the name itself unless the target reserves
    it (a parameter named ``short`` or ``sample``), then ``iron_p_<name>``.  The ABI keeps the Python name."""
    return f"iron_p_{name}" if name in RESERVED or name in extra_reserved else name


class Namer:
    """Gives each value one C identifier, stable for a given kernel."""

    def __init__(self, extra_reserved: frozenset[str] = frozenset()) -> None:
        self._names: dict[Value, str] = {}
        self._used: set[str] = set()
        self._reserved = RESERVED | extra_reserved
        self._counter = 0

    def define(self, v: Value, fallback: str = "v") -> str:
        """A fresh name for ``v`` from its hint (or ``fallback`` + a number)."""
        if v in self._names:
            return self._names[v]
        name = self.fresh(v.hint) if v.hint else self._numbered(fallback)
        self._names[v] = name
        return name

    def fresh(self, base: str) -> str:
        """An unused identifier made from ``base``: ``acc``, ``acc_1``, ``acc_2``..."""
        base = _IDENT.sub("_", base) or "v"
        if base[0].isdigit():
            base = "v" + base
        if base.startswith(("gl_", "iron_")) or "__" in base:
            base = "u_" + base.replace("__", "_")
        if base in self._reserved:
            base += "_"
        name, n = base, 0
        while name in self._used:
            n += 1
            name = f"{base}_{n}"
        self._used.add(name)
        return name

    def _numbered(self, prefix: str) -> str:
        while True:
            name = f"{prefix}{self._counter}"
            self._counter += 1
            if name not in self._used and name not in self._reserved:
                self._used.add(name)
                return name

    def __getitem__(self, v: Value) -> str:
        return self._names[v]

    def __contains__(self, v: Value) -> bool:
        return v in self._names
