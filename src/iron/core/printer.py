"""A stable, readable text form of the IR.

The same kernel always prints the same text: values are named after the
user's variables where possible (``%idx``, ``%idx.1``), otherwise numbered
in order of definition; attributes are sorted.  Golden tests compare this
text and the content hash is taken over it.
"""

from __future__ import annotations

from typing import Any

from .dtypes import DType
from .ir import Block, Kernel, Op, Value


class _Namer:
    def __init__(self) -> None:
        self.names: dict[Value, str] = {}
        self.used: set[str] = set()
        self.counter = 0

    def define(self, v: Value) -> str:
        if v.hint:
            base = _sanitize(v.hint)
            name = base
            n = 0
            while name in self.used:
                n += 1
                name = f"{base}.{n}"
        else:
            while str(self.counter) in self.used:
                self.counter += 1
            name = str(self.counter)
            self.counter += 1
        self.used.add(name)
        self.names[v] = name
        return "%" + name

    def ref(self, v: Value) -> str:
        name = self.names.get(v)
        return "%" + name if name is not None else f"%<undefined#{v.id}>"


def _sanitize(s: str) -> str:
    return "".join(c if c.isalnum() or c == "_" else "_" for c in s) or "v"


def format_attr(v: Any) -> str:
    if isinstance(v, DType):
        return v.name
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, (tuple, list)):
        return "[" + ", ".join(format_attr(x) for x in v) + "]"
    if isinstance(v, str):
        return v
    return str(v)


def print_kernel(k: Kernel, with_locs: bool = False) -> str:
    namer = _Namer()
    params = ", ".join(f"{namer.define(p.value)}: {p.value.type}" for p in k.params)
    meta = {key: val for key, val in k.meta.items() if key in ("variant",)}
    variant = meta.get("variant") or {}
    vtxt = (" [" + ", ".join(f"{n} = {format_attr(v)}" for n, v in sorted(variant.items())) + "]") if variant else ""
    lines = [f"kernel @{k.name}({params}){vtxt} {{"]
    _print_block(k.body, namer, lines, 1, with_locs)
    lines.append("}")
    for name in sorted(k.functions):
        f = k.functions[name]
        fparams = ", ".join(f"{namer.define(p.value)}: {p.value.type}" for p in f.params)
        res = f" -> {f.result_type}" if f.result_type is not None else ""
        lines.append(f"func @{f.name}({fparams}){res} {{")
        _print_block(f.body, namer, lines, 1, with_locs)
        lines.append("}")
    return "\n".join(lines) + "\n"


def _print_block(b: Block, namer: _Namer, lines: list[str], depth: int, with_locs: bool) -> None:
    for op in b.ops:
        _print_op(op, namer, lines, depth, with_locs)


def _print_op(op: Op, namer: _Namer, lines: list[str], depth: int, with_locs: bool) -> None:
    ind = "  " * depth
    loc = f"  // line {op.loc.line}" if with_locs and op.loc else ""
    ops = ", ".join(namer.ref(v) for v in op.operands)
    if op.opcode == "if":
        lines.append(f"{ind}if {ops} {{{loc}")
        _print_block(op.regions[0], namer, lines, depth + 1, with_locs)
        if op.regions[1].ops:
            lines.append(f"{ind}}} else {{")
            _print_block(op.regions[1], namer, lines, depth + 1, with_locs)
        lines.append(f"{ind}}}")
        return
    if op.opcode == "for":
        lo, hi, st = (namer.ref(v) for v in op.operands)
        iv = namer.define(op.regions[0].args[0])
        hint = f" {{unroll = {op.attrs['unroll']}}}" if op.attrs.get("unroll") else ""
        lines.append(f"{ind}for {iv} = {lo} to {hi} step {st}{hint} {{{loc}")
        _print_block(op.regions[0], namer, lines, depth + 1, with_locs)
        lines.append(f"{ind}}}")
        return
    if op.opcode == "loop":
        lines.append(f"{ind}loop {{{loc}")
        _print_block(op.regions[0], namer, lines, depth + 1, with_locs)
        lines.append(f"{ind}}}")
        return
    if op.opcode == "const":
        text = f"const {format_attr(op.attrs['value'])}"
    else:
        attrs = {k: v for k, v in op.attrs.items() if v is not None and k != "type"}
        atxt = (" {" + ", ".join(f"{k} = {format_attr(v)}" for k, v in sorted(attrs.items())) + "}") if attrs else ""
        if op.opcode == "var":
            atxt = f" {op.attrs['type']}"
        elif op.opcode == "call":
            ops = f"@{op.attrs['callee']}({ops})"
            atxt = ""
        text = f"{op.opcode}{' ' + ops if ops else ''}{atxt}"
    if op.result is not None:
        lines.append(f"{ind}{namer.define(op.result)} = {text} : {op.result.type}{loc}")
    else:
        lines.append(f"{ind}{text}{loc}")
