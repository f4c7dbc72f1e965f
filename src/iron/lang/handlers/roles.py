"""Warp roles: a group split into roles of consecutive threads (producer and consumer warpgroups), each with
its own register budget, and a barrier among the threads of one role (docs/language.md, "Warp roles"); and
clusters of groups that reach each other's barriers and shared tiles (docs/language.md, "Clusters")."""

from __future__ import annotations

from typing import Any

from ...core.errors import UnsupportedSyntaxError
from ...core.ops import CLUSTER_SIZES
from ..lower_call import CallArgs, handles
from ..values import FValue, Py, TupleVal


def _static_ints(lw: Any, a: CallArgs, name: str) -> tuple[int, ...]:
    """A tuple of compile-time ints (an int alone is a tuple of one)."""
    v = a[name]
    items = v.items if isinstance(v, TupleVal) else v.value if isinstance(v, Py) and isinstance(v.value, tuple) \
        else (v,)
    return tuple(lw.static_int(i if not isinstance(i, int) else Py(i), a.node_of(name),
                               f"each of warp_roles()'s {name}") for i in items)


def _once_at_top(lw: Any, a: CallArgs, made: bool, top_hint: str, once: str, once_hint: str) -> None:
    """A declaration the kernel makes once, at its top level, where every thread runs (``made``: it did already)."""
    if lw.ctx.helper_stack or not lw.env.at_top:
        raise lw.error(UnsupportedSyntaxError, f"{a.name}() inside a helper or under run-time control flow", a.node,
                       hint=top_hint)
    if made:
        raise lw.error(UnsupportedSyntaxError, once, a.node, hint=once_hint)


@handles("warp_roles")
def warp_roles(lw: Any, a: CallArgs) -> FValue:
    sizes = _static_ints(lw, a, "threads")
    registers = _static_ints(lw, a, "registers") if a.given("registers") and not (
        isinstance(a["registers"], Py) and a["registers"].value is None) else None
    _once_at_top(lw, a, lw.ctx.role_sizes is not None,
                 "split the group once, at the top level of the kernel, where every thread runs",
                 "a kernel splits its group into warp roles once",
                 "give every role's threads in one warp_roles((n0, n1, ...)) call")
    lw.ctx.role_sizes = sizes
    return lw.value("warp_role", (), a.node, hint=lw.assign_hint or "role", sizes=sizes, registers=registers)


def _after_declaration(lw: Any, a: CallArgs, declared: bool, meets: str, first: str) -> None:
    """A barrier among what a declaration made (roles, clusters) needs that declaration first."""
    if not declared:
        raise lw.type_error(f"{a.name}() meets {meets} (yet)", a.node, hint=first)


@handles("role_barrier")
def role_barrier(lw: Any, a: CallArgs) -> FValue:
    _after_declaration(lw, a, lw.ctx.role_sizes is not None,
                       "the threads of the caller's role, but the kernel has no roles",
                       "role = warp_roles((n0, n1, ...)) at the kernel's top first; barrier() meets the whole group")
    lw.emit("role_barrier", (), a.node, sizes=lw.ctx.role_sizes)
    return Py(None)


@handles("cluster_groups")
def cluster_groups(lw: Any, a: CallArgs) -> FValue:
    size = lw.static_int(a["size"], a.node_of("size"), "the groups of a cluster")
    if size not in CLUSTER_SIZES:
        raise lw.type_error(f"cluster_groups() joins {', '.join(map(str, CLUSTER_SIZES))} groups into a cluster, "
                            f"got {size}", a.node_of("size"))
    _once_at_top(lw, a, lw.ctx.cluster_size is not None, "join the groups once, at the top level of the kernel",
                 "a kernel joins its groups into clusters once", "call cluster_groups(size) once, at the kernel's top")
    lw.ctx.cluster_size = size
    return lw.value("cluster_groups", (), a.node, hint=lw.assign_hint or "rank", size=size)


@handles("cluster_sync")
def cluster_sync(lw: Any, a: CallArgs) -> FValue:
    _after_declaration(lw, a, lw.ctx.cluster_size is not None,
                       "the groups of this group's cluster, but the kernel has no clusters",
                       "rank = cluster_groups(size) at the kernel's top first; barrier() meets the group")
    lw.emit("cluster_sync", (), a.node)
    return Py(None)
