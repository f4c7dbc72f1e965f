"""Lock-step execution of a kernel's IR over every thread of a launch.

Every SSA value is an array over all threads (``(threads,)`` or
``(threads, width)``).  Pure ops are evaluated for every thread, active or
not (their results for inactive threads are never observed); ops with
effects act only for the threads in the current :class:`Mask`.  Structured
control flow narrows the mask:

* ``if`` runs its then-region for the threads whose condition holds and its
  else-region for the others; afterwards the threads that left neither
  region through ``break``/``continue``/``return`` go on together;
* loops iterate while any thread is still running; ``break`` and
  ``continue`` park threads in the innermost loop's :class:`_LoopExits`;
* ``return`` removes threads for the rest of the launch.

The two sides of an ``if`` that may wait on an asynchronous barrier run as fibers (``fibers.py``) when both
have threads, so that roles which wait on each other (a producer and a consumer) go on as on a GPU.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ...codegen.mma import MmaStrategy
from ...core.eval import PURE_ELEMENTWISE_OPS, const_array, eval_pure, np_dtype
from ...core.ir import Block, Kernel, Op, Value
from ...core.ops import REDUCTION_OPS, info
from ...core.types import TILE_COL_ALIGN_BYTES, TILE_LAYOUTS, FragmentType, VectorType, tile_rows
from . import atomics, subgroups
from .async_barriers import AsyncBarriers
from .async_copies import AsyncCopies
from .clusters import Clusters
from .faults import Faults
from .fibers import Fibers
from .fragments import Fragments
from .mask import Mask
from .memory import Buffer, Memory
from .threads import ThreadSpace
from .tile_stores import TileStores

Env = dict[Value, Any]


class _Slot:
    """A ``var``: per-thread storage.  Stores replace the array, so loaded values never change."""

    __slots__ = ("value",)

    def __init__(self, value: np.ndarray):
        self.value = value


class _LoopExits:
    """Threads that left the current iteration of a loop by ``break`` or ``continue``."""

    def __init__(self, size: int):
        self.broke = np.zeros(size, dtype=bool)
        self.continued = np.zeros(size, dtype=bool)


class Executor:
    """Runs one kernel for one launch."""

    def __init__(self, kernel: Kernel, threads: ThreadSpace, memory: Memory, faults: Faults, checks: bool,
                 fragment_strategy: MmaStrategy | None = None):
        self.kernel = kernel
        self.threads = threads
        self.memory = memory
        self.faults = faults
        self.checks = checks
        self.fragments = Fragments(threads, faults, memory, fragment_strategy)
        self.size = threads.size
        self.returned = np.zeros(self.size, dtype=bool)
        self.fibers = Fibers()
        self._may_wait: dict[int, bool] = {}
        self.roles: np.ndarray | None = None
        self.copies = AsyncCopies(self.size)
        self.stores = TileStores(self.faults)
        self.clusters = Clusters(threads, faults)
        self._cache: dict[Any, np.ndarray] = {}
        self._control: dict[str, Callable[[Op, Env, Mask], Mask]] = {
            "if": self._if, "for": self._for, "loop": self._loop, "break": self._break,
            "continue": self._continue, "return": self._return,
        }
        self._effects: dict[str, Callable[[Op, Env, Mask], Any]] = {
            "load": self._load, "store": self._store, "vload": self._vload, "vstore": self._vstore,
            "copy_async": self._copy_async, "copy_async_commit": self._copy_async_commit,
            "copy_async_wait": self._copy_async_wait,
            "tensor_size": self._tensor_size, "shared_alloc": self._shared_alloc, "barrier": self._barrier,
            "var": self._var, "var_load": self._var_load, "var_store": self._var_store,
            "call": self._call, "tuple_make": self._tuple_make, "tuple_get": self._tuple_get,
            "frag_fill": self._frag_fill, "frag_load": self._frag_load, "frag_store": self._frag_store,
            "mma": self._mma, "mma_wg": self._mma_wg, "mma_wg_wait": self._mma_wg_wait,
            "frag_binary": self._frag_binary, "frag_rows": self._frag_rows, "frag_unary": self._frag_unary,
            "frag_mask": self._frag_mask, "frag_to_a": self._frag_to_a, "frag_scale_rows": self._frag_scale_rows,
            "abar_alloc": self._abar_alloc, "abar_arrive": self._abar_arrive, "abar_wait": self._abar_wait,
            "abar_copies": self._abar_copies, "tile_copy": self._tile_copy, "tile_store": self._tile_store,
            "tile_store_wait": self._tile_store_wait,
            "warp_role": self._warp_role, "role_barrier": self._role_barrier,
            "abar_arrive_peer": self._abar_arrive_peer, "cluster_groups": self._cluster_groups,
            "cluster_sync": self._cluster_sync, "fence": self._fence,
        }

    @property
    def loops(self) -> list[_LoopExits]:
        """The loops enclosing the running fiber's current op, innermost last."""
        return self.fibers.loops

    # ------------------------------------------------------------ entry
    def run(self, arguments: list[Any]) -> None:
        env: Env = {}
        for p, arg in zip(self.kernel.params, arguments):
            env[p.value] = arg if isinstance(arg, Buffer) else np.full(self.size, arg, dtype=np.asarray(arg).dtype)
        self._block(self.kernel.body, env, Mask(self.threads.in_grid))
        self.clusters.check_end()

    def _block(self, block: Block, env: Env, mask: Mask) -> Mask:
        """Run ``block`` for ``mask``; return the threads that reach its end."""
        for op in block.ops:
            if not mask.any:
                break
            control = self._control.get(op.opcode)
            if control is not None:
                mask = control(op, env, mask)
            else:
                result = self._op(op, env, mask)
                if op.result is not None:
                    env[op.result] = result
        return mask

    def _op(self, op: Op, env: Env, mask: Mask) -> Any:
        code = op.opcode
        if code == "const":
            return self._const(op)
        if code in PURE_ELEMENTWISE_OPS:
            return eval_pure(code, op.attrs, [env[v] for v in op.operands], op.result.type)
        category = info(code).category
        if category == "index":
            return self._index(op)
        if category == "atomic":
            return self._atomic(op, env, mask)
        if category == "subgroup":
            return self._subgroup(op, env, mask)
        handler = self._effects.get(code)
        if handler is None:
            raise self.faults.general(op, "the interpreter does not implement this op")
        return handler(op, env, mask)

    # ------------------------------------------------------------ control flow
    def _if(self, op: Op, env: Env, mask: Mask) -> Mask:
        cond = env[op.operands[0]]
        then_mask, else_mask = mask & cond, mask.without(cond)
        if then_mask.any and else_mask.any and self._waits_inside(op):
            out_then, out_else = self.fibers.split([lambda: self._block(op.regions[0], env, then_mask),
                                                    lambda: self._block(op.regions[1], env, else_mask)])
            return out_then | out_else
        out_then = self._block(op.regions[0], env, then_mask)
        out_else = self._block(op.regions[1], env, else_mask)
        return out_then | out_else

    def _waits_inside(self, op: Op) -> bool:
        """Whether a barrier wait may run inside ``op``'s regions (or the helpers they call)."""
        key = id(op)
        if key not in self._may_wait:
            self._may_wait[key] = any(self._may_wait_op(inner) for region in op.regions for inner in region.walk())
        return self._may_wait[key]

    def _may_wait_op(self, op: Op) -> bool:
        if op.opcode == "abar_wait":
            return True
        if op.opcode == "call":
            fn = self.kernel.functions[op.attrs["callee"]]
            return any(self._may_wait_op(inner) for inner in fn.body.walk())
        return False

    def _for(self, op: Op, env: Env, mask: Mask) -> Mask:
        lo, hi, step = (env[v] for v in op.operands)
        descending = _is_negative_constant(op.operands[2])
        body = op.regions[0]

        def in_range(i: np.ndarray) -> np.ndarray:
            return i > hi if descending else i < hi

        iv = lo
        running = mask & in_range(iv)
        finished = mask.without(running)
        exits = _LoopExits(self.size)
        self.loops.append(exits)
        try:
            while running.any:
                exits.continued = np.zeros(self.size, dtype=bool)
                env[body.args[0]] = iv
                going = self._block(body, env, running) | exits.continued
                with np.errstate(over="ignore"):
                    iv = np.where(going.bits, iv + step, iv).astype(lo.dtype, copy=False)
                more = in_range(iv)
                finished = finished | going.without(more)
                running = going & more
        finally:
            self.loops.pop()
        return finished | exits.broke

    def _loop(self, op: Op, env: Env, mask: Mask) -> Mask:
        exits = _LoopExits(self.size)
        self.loops.append(exits)
        running = mask
        try:
            while running.any:
                exits.continued = np.zeros(self.size, dtype=bool)
                running = self._block(op.regions[0], env, running) | exits.continued
        finally:
            self.loops.pop()
        return Mask(exits.broke)

    def _break(self, op: Op, env: Env, mask: Mask) -> Mask:
        self.loops[-1].broke |= mask.bits
        return Mask.none(self.size)

    def _continue(self, op: Op, env: Env, mask: Mask) -> Mask:
        self.loops[-1].continued |= mask.bits
        return Mask.none(self.size)

    def _return(self, op: Op, env: Env, mask: Mask) -> Mask:
        self.returned |= mask.bits
        return Mask.none(self.size)

    def _call(self, op: Op, env: Env, mask: Mask) -> Any:
        """Run a helper's body under the caller's mask; its final ``return`` gives the result."""
        fn = self.kernel.functions[op.attrs["callee"]]
        inner: Env = {p.value: env[v] for p, v in zip(fn.params, op.operands)}
        *body, ret = fn.body.ops
        self._block(Block(body), inner, mask)
        return inner[ret.operands[0]] if ret.operands else None

    # ------------------------------------------------------------ values
    def _const(self, op: Op) -> np.ndarray:
        key = ("const", id(op))
        if key not in self._cache:
            self._cache[key] = const_array(op.attrs["value"], op.attrs["type"], self.size)
        return self._cache[key]

    def _index(self, op: Op) -> np.ndarray:
        axis = op.attrs.get("axis")
        key = (op.opcode, axis)
        if key not in self._cache:
            self._cache[key] = self._index_values(op.opcode, axis).astype(np.int32)
        return self._cache[key]

    def _index_values(self, opcode: str, axis: int | None) -> np.ndarray:
        t = self.threads
        per_thread = {
            "program_id": lambda: t.program_id(axis), "thread_id": lambda: t.thread_id(axis),
            "group_id": lambda: t.group_id(axis), "lane_id": lambda: t.lane,
            "simd_group_id": lambda: t.simd_group,
        }
        if opcode in per_thread:
            return per_thread[opcode]()
        uniform = {
            "group_size": lambda: t.group[axis], "num_groups": lambda: t.num_groups[axis],
            "grid_size": lambda: t.grid[axis], "simd_size": lambda: t.simd_width,
            "num_simd_groups": lambda: t.simd_groups_per_group,
        }
        return np.full(self.size, uniform[opcode]())

    def _var(self, op: Op, env: Env, mask: Mask) -> _Slot:
        t = op.attrs["type"]
        if isinstance(t, FragmentType):
            return _Slot(self.fragments.empty(op, t))
        shape = (self.size, t.width) if isinstance(t, VectorType) else (self.size,)
        return _Slot(np.zeros(shape, dtype=np_dtype(t.dtype)))

    def _var_load(self, op: Op, env: Env, mask: Mask) -> np.ndarray:
        return env[op.operands[0]].value

    def _var_store(self, op: Op, env: Env, mask: Mask) -> None:
        slot: _Slot = env[op.operands[0]]
        value = env[op.operands[1]]
        if mask.all:
            slot.value = value
        elif isinstance(op.operands[1].type, FragmentType):
            # A fragment belongs to whole subgroups: they must store it together.
            subgroups = self.fragments.participants(op, mask)
            stored = slot.value.copy()
            stored[subgroups] = value[subgroups]
            self.fragments.follow(value, stored, subgroups)
            slot.value = stored
        else:
            bits = mask.bits[:, None] if value.ndim == 2 else mask.bits
            slot.value = np.where(bits, value, slot.value)

    def _tuple_make(self, op: Op, env: Env, mask: Mask) -> tuple:
        return tuple(env[v] for v in op.operands)

    def _tuple_get(self, op: Op, env: Env, mask: Mask) -> Any:
        return env[op.operands[0]][op.attrs["index"]]

    # ------------------------------------------------------------ memory
    def _load(self, op: Op, env: Env, mask: Mask) -> np.ndarray:
        buf, index = env[op.operands[0]], env[op.operands[1]]
        return self.memory.load(op, buf, index, mask)

    def _store(self, op: Op, env: Env, mask: Mask) -> None:
        buf, index, value = (env[v] for v in op.operands)
        self.memory.store(op, buf, index, value, mask)

    def _vload(self, op: Op, env: Env, mask: Mask) -> np.ndarray:
        buf, index = env[op.operands[0]], env[op.operands[1]]
        return self.memory.vload(op, buf, index, mask, op.attrs["width"])

    def _vstore(self, op: Op, env: Env, mask: Mask) -> None:
        buf, index, value = (env[v] for v in op.operands)
        self.memory.vstore(op, buf, index, value, mask)

    def _copy_async(self, op: Op, env: Env, mask: Mask) -> None:
        """Read the source now (zeros where not valid); the write lands at the wait that covers it."""
        dst, di, src, si, valid = (env[v] for v in op.operands)
        width = op.attrs["width"]
        values = self.memory.vload(op, src, si, mask & valid, width)
        self.memory.locate(op, dst, di, mask, width)  # a bad destination is reported here, where it is named
        self.copies.issue(op, dst, di, values, mask)

    def _copy_async_commit(self, op: Op, env: Env, mask: Mask) -> None:
        self.copies.commit(mask)

    def _copy_async_wait(self, op: Op, env: Env, mask: Mask) -> None:
        self.copies.wait(self.memory, mask, op.attrs["pending"])

    def _tensor_size(self, op: Op, env: Env, mask: Mask) -> np.ndarray:
        return np.full(self.size, env[op.operands[0]].size, dtype=np.int32)

    def _shared_alloc(self, op: Op, env: Env, mask: Mask) -> Buffer:
        return self.memory.shared(op)

    def _barrier(self, op: Op, env: Env, mask: Mask) -> None:
        """Every in-grid thread of a group must arrive; one that returned early never will."""
        self.memory.barrier(self._whole_groups(op, mask))

    def _whole_groups(self, op: Op, mask: Mask) -> np.ndarray:
        """The groups whose threads run ``op``, checked to be every in-grid thread of each."""
        t = self.threads
        shape = (t.total_groups, t.threads_per_group)
        arrived = mask.bits.reshape(shape)
        groups = arrived.any(axis=1)
        if self.checks:
            expected = t.in_grid.reshape(shape)
            partial = np.flatnonzero(groups & (expected & ~arrived).any(axis=1))
            if partial.size:
                g = int(partial[0])
                base = g * t.threads_per_group
                first_in = base + int(np.flatnonzero(arrived[g])[0])
                first_out = base + int(np.flatnonzero(expected[g] & ~arrived[g])[0])
                raise self.faults.partial_barrier(op, first_in, first_out, bool(self.returned[first_out]),
                                                  int(arrived[g].sum()), int(expected[g].sum()))
        return groups

    def _warp_role(self, op: Op, env: Env, mask: Mask) -> np.ndarray:
        """Each thread's role, by its number in the group; every thread of a group splits it together (each
        warpgroup sets its register budget there), and the group has exactly the roles' threads."""
        sizes = op.attrs["sizes"]
        if self.threads.threads_per_group != sum(sizes):
            raise self.faults.general(op, f"warp_roles splits a group of {sum(sizes)} threads {sizes}, but the "
                                          f"launch's groups have {self.threads.threads_per_group}: launch groups "
                                          f"of {sum(sizes)} threads")
        self._whole_groups(op, mask)
        self.roles = np.searchsorted(np.cumsum(sizes), self.threads.local_linear, side="right").astype(np.int32)
        return self.roles

    def _role_barrier(self, op: Op, env: Env, mask: Mask) -> None:
        """Every in-grid thread of the caller's role in its group must arrive; their shared accesses are ordered
        (forgotten by the race check, as a wait orders the arrivals it waited for)."""
        sizes = op.attrs["sizes"]
        if self.roles is None or self.threads.threads_per_group != sum(sizes):
            raise self.faults.general(op, "role_barrier() runs before warp_roles() split the group")
        t = self.threads
        roles = self.roles.reshape(t.total_groups, t.threads_per_group)
        arrived = mask.bits.reshape(roles.shape)
        expected = t.in_grid.reshape(roles.shape)
        for g in np.flatnonzero(arrived.any(axis=1)):
            present = np.unique(roles[g][arrived[g]])
            missing = np.flatnonzero(np.isin(roles[g], present) & expected[g] & ~arrived[g])
            if self.checks and missing.size:
                base = int(g) * t.threads_per_group
                first_in = base + int(np.flatnonzero(arrived[g])[0])
                first_out = base + int(missing[0])
                raise self.faults.general(op, f"role_barrier() is reached by {self.faults.thread(first_in)} of role "
                                              f"{int(roles[g][first_in - base])} but not by "
                                              f"{self.faults.thread(first_out)} of the same role"
                                              f"{' (it returned)' if self.returned[first_out] else ''}: every "
                                              "thread of a role must reach it, or it never returns")
        self.memory.forget_threads(np.isin(roles[0], np.unique(self.roles[mask.indices])))

    def _tile_copy(self, op: Op, env: Env, mask: Mask) -> None:
        """Each issuing thread reads its box now (zeros outside the matrix) and writes the shared tile when
        its barrier's phase completes (docs/ir.md, "Tile copies")."""
        dst, di, src, rows, cols, ld, row, col, bars, bi, *outer = (env[v] for v in op.operands)
        layout, r, c, offsets = _box(op, dst.dtype.itemsize)
        box_bytes = r.size * dst.dtype.itemsize
        tpg = self.threads.threads_per_group
        for t in mask.indices:
            t = int(t)
            base = int(di[t])
            self._check_tile_start(op, dst, base, int(col[t]), layout, t)
            inside, at = _box_elements(op, r, c, rows, cols, ld, row, col, outer, t)
            values = np.zeros(r.size, dtype=dst.data.dtype)
            values[inside] = self.memory.gather(op, src, t, at[inside])
            own = t // tpg
            ranks = range(self.clusters.size) if op.attrs.get("multicast") else [None]
            for rank in ranks:  # a multicast lands at the same place in every group of the cluster
                g = own if rank is None else self.clusters.reach(op, t, rank)
                if g != own:
                    self.clusters.multicast(op, t, dst, g, base)
                place = self.memory.elements(op, dst, t + (g - own) * tpg, base + offsets)
                bars.bring(op, t, int(bi[t]), _TileLanding(op, dst, place, values), box_bytes, self.memory, g)

    def _tile_store(self, op: Op, env: Env, mask: Mask) -> None:
        """Each issuing thread reads its tile now and writes the matrix's elements inside the box at its
        store_tile_wait (docs/ir.md, "Tile stores")."""
        dst, rows, cols, ld, row, col, src, si, *outer = (env[v] for v in op.operands)
        layout, r, c, offsets = _box(op, src.dtype.itemsize)
        for t in mask.indices:
            t = int(t)
            self._check_tile_start(op, src, int(si[t]), int(col[t]), layout, t)
            src_at = self.memory.elements(op, src, t, int(si[t]) + offsets)
            tile = self.memory.gather(op, src, t, int(si[t]) + offsets).copy()
            inside, at = _box_elements(op, r, c, rows, cols, ld, row, col, outer, t)
            dst_at = self.memory.elements(op, dst, t, at[inside])
            self.stores.issue(op, t, src, src_at, tile, dst, dst_at, tile[inside])

    def _tile_store_wait(self, op: Op, env: Env, mask: Mask) -> None:
        self.stores.wait(op, self.memory, mask)

    def _check_tile_start(self, op: Op, tile: Any, base: int, col: int, layout: Any, t: int) -> None:
        """A tile starts on its layout's alignment, and the box on a column of whole 16 bytes (what tile copy
        hardware needs; docs/ir.md)."""
        item = tile.dtype.itemsize
        if base * item % layout.align:
            raise self.faults.general(op, f"a {layout.name} tile starts on a {layout.align}-byte boundary; "
                                          f"element {base} of '{tile.name}' is byte {base * item} in "
                                          f"{self.faults.thread(t)}")
        if col * item % TILE_COL_ALIGN_BYTES:
            raise self.faults.general(op, f"a tile copy or store starts on a column that is a multiple of "
                                          f"{TILE_COL_ALIGN_BYTES // item} ({TILE_COL_ALIGN_BYTES} bytes of "
                                          f"{tile.dtype}), which tile copy hardware needs; column {col} "
                                          f"in {self.faults.thread(t)}")

    def _abar_alloc(self, op: Op, env: Env, mask: Mask) -> AsyncBarriers:
        """Made by the whole group, like a barrier (a thread that returned early is reported)."""
        self._barrier(op, env, mask)
        bars = AsyncBarriers(op, self.threads, self.faults)
        self.clusters.barriers.append(bars)
        return bars

    def _abar_arrive(self, op: Op, env: Env, mask: Mask) -> None:
        env[op.operands[0]].arrive(op, env[op.operands[1]], mask, self.memory)

    def _abar_arrive_peer(self, op: Op, env: Env, mask: Mask) -> None:
        """An arrival on the barrier of the group of a rank of the cluster (checked by :class:`Clusters`)."""
        bars, index, rank = (env[v] for v in op.operands)
        targets = np.array([self.clusters.reach(op, int(t), int(rank[t])) for t in mask.indices], dtype=np.int64)
        bars.arrive(op, index, mask, self.memory, targets)

    def _cluster_groups(self, op: Op, env: Env, mask: Mask) -> np.ndarray:
        self._whole_groups(op, mask)
        return self.clusters.join(op)

    def _fence(self, op: Op, env: Env, mask: Mask) -> None:
        """Global memory is one coherent array here, so a fence changes no value; the opt-in global race check
        takes it as publishing the fencing threads' earlier accesses to other groups (memory.fence)."""
        self.memory.fence(mask.bits)

    def _cluster_sync(self, op: Op, env: Env, mask: Mask) -> None:
        """Every thread of every group of a cluster arrives; their memory is ordered as by a barrier."""
        groups = self._whole_groups(op, mask)
        self.clusters.sync(op, groups)
        self.memory.barrier(groups)

    def _abar_copies(self, op: Op, env: Env, mask: Mask) -> None:
        env[op.operands[0]].tie_copies(op, env[op.operands[1]], mask, self.copies)

    def _abar_wait(self, op: Op, env: Env, mask: Mask) -> None:
        bars, index, parity = (env[v] for v in op.operands)
        line = f"line {op.loc.line}" if op.loc else "a barrier_wait"
        self.fibers.wait_until(lambda: bars.passes(op, index, parity, mask),
                               lambda others: bars.stuck(op, index, parity, mask, others),
                               f"{line} on '{bars.name}'")
        whole, released = bars.wait(op, index, parity, mask)
        if self.clusters.size > 1:
            self.clusters.waited(bars.heard_from(index, mask))
        self.memory.barrier(whole)
        if released.any():
            self.memory.forget_threads(released)

    def _atomic(self, op: Op, env: Env, mask: Mask) -> np.ndarray:
        buf: Buffer = env[op.operands[0]]
        if buf.dtype.is_bool and op.opcode in ("atomic_add", "atomic_max", "atomic_min"):
            raise self.faults.general(op, f"arithmetic atomics on a bool tensor ('{buf.name}') are not defined")
        at = self.memory.locate(op, buf, env[op.operands[1]], mask)
        self.memory.track(op, buf, "atomic", at)
        values = [env[v] if at.threads is None else env[v][at.threads] for v in op.operands[2:]]
        order = self.threads.grid_linear if at.threads is None else self.threads.grid_linear[at.threads]
        old = atomics.apply(op.opcode, buf.data, buf.dtype, at.flat, order, values)
        return mask.scatter(old)

    # ------------------------------------------------------------ subgroups and fragments
    def _subgroup(self, op: Op, env: Env, mask: Mask) -> np.ndarray:
        x = env[op.operands[0]]
        if op.opcode in REDUCTION_OPS:
            return subgroups.reduce(op.opcode, x, mask, op.operands[0].type.dtype, self.threads)
        return subgroups.shuffle(op, x, env[op.operands[1]], mask, self.threads, self.faults, self.checks)

    def _frag_fill(self, op: Op, env: Env, mask: Mask) -> np.ndarray:
        return self.fragments.fill(op, env[op.operands[0]], mask)

    def _frag_load(self, op: Op, env: Env, mask: Mask) -> np.ndarray:
        buf, base, ld = (env[v] for v in op.operands)
        return self.fragments.load(op, buf, base, ld, mask)

    def _frag_store(self, op: Op, env: Env, mask: Mask) -> None:
        buf, base, ld, frag = (env[v] for v in op.operands)
        self.fragments.store(op, buf, base, ld, frag, mask)

    def _mma(self, op: Op, env: Env, mask: Mask) -> np.ndarray:
        a, b, c = (env[v] for v in op.operands)
        return self.fragments.mma(op, a, b, c, mask)

    def _mma_wg(self, op: Op, env: Env, mask: Mask) -> np.ndarray:
        a, a_tile, b, b_tile, c = (env[v] for v in op.operands)
        return self.fragments.mma_wg(op, a, a_tile, b, b_tile, c, mask)

    def _frag_binary(self, op: Op, env: Env, mask: Mask) -> np.ndarray:
        x, y = (env[v] for v in op.operands)
        return self.fragments.binary(op, x, y, mask)

    def _frag_scale_rows(self, op: Op, env: Env, mask: Mask) -> np.ndarray:
        x, factors = (env[v] for v in op.operands)
        return self.fragments.scale_rows(op, x, factors, mask)

    def _frag_to_a(self, op: Op, env: Env, mask: Mask) -> np.ndarray:
        return self.fragments.to_a(op, env[op.operands[0]], mask)

    def _frag_mask(self, op: Op, env: Env, mask: Mask) -> np.ndarray:
        x, value, cols, diagonal = (env[v] for v in op.operands)
        return self.fragments.masked(op, x, value, cols, diagonal, mask)

    def _frag_unary(self, op: Op, env: Env, mask: Mask) -> np.ndarray:
        return self.fragments.unary(op, env[op.operands[0]], mask)

    def _frag_rows(self, op: Op, env: Env, mask: Mask) -> np.ndarray:
        return self.fragments.rows(op, env[op.operands[0]], mask)

    def _mma_wg_wait(self, op: Op, env: Env, mask: Mask) -> None:
        self.fragments.retire(op.attrs["pending"], op)


def _box(op: Op, item: int) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray]:
    """A tile copy's or store's layout, its tile's (row, col) pairs in row-major order (a row per box element
    of every axis but the innermost), and their element offsets in the shared tile."""
    box_c = op.attrs["box_cols"]
    layout = TILE_LAYOUTS[op.attrs["layout"]]
    r, c = (x.reshape(-1) for x in np.meshgrid(np.arange(tile_rows(op.attrs)), np.arange(box_c), indexing="ij"))
    return layout, r, c, layout.index(r, c, box_c, item)


def _box_elements(op: Op, r: np.ndarray, c: np.ndarray, rows: Any, cols: Any, ld: Any, row: Any, col: Any,
                  outer: list[Any], t: int) -> tuple[np.ndarray, np.ndarray]:
    """Thread ``t``'s box elements (tile rows ``r``, columns ``c``) in the global tensor: which lie inside it,
    and their element indices there.  The box's tile row splits into its outer axes' positions and a matrix row;
    outer axes are dense over the matrix (``rows`` rows ``ld`` apart), outermost first."""
    box_r, box_outer = op.attrs["box_rows"], op.attrs.get("box_outer", ())
    extents, coords = outer[:len(box_outer)], outer[len(box_outer):]
    gr, gc = int(row[t]) + r % box_r, int(col[t]) + c
    inside = (gr >= 0) & (gr < int(rows[t])) & (gc >= 0) & (gc < int(cols[t]))
    at = gr * int(ld[t]) + gc
    stride, q = int(rows[t]) * int(ld[t]), r // box_r
    for axis in reversed(range(len(box_outer))):
        g = int(coords[axis][t]) + q % box_outer[axis]
        q = q // box_outer[axis]
        inside &= (g >= 0) & (g < int(extents[axis][t]))
        at = at + g * stride
        stride *= int(extents[axis][t])
    return inside, at


class _TileLanding:
    """A tile copy's shared-memory write, made when its barrier's phase completes."""

    def __init__(self, op: Op, dst: Buffer, at: Any, values: np.ndarray):
        self.op, self.dst, self.at, self.values = op, dst, at, values

    def land(self, memory: Memory) -> None:
        memory.place(self.op, self.dst, self.at, self.values)


def _is_negative_constant(v: Value) -> bool:
    """A ``for`` counts down only for a constant negative step (docs/ir.md)."""
    owner = v.owner
    return owner is not None and owner.opcode == "const" and owner.attrs["value"] < 0

