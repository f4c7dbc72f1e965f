"""The kernel builtins: plain Python objects the frontend recognises by identity.

Each builtin is a :class:`Builtin` made from a stub function whose signature
is the builtin's signature (the frontend binds call arguments against it, so
arity and keyword errors come for free) and whose docstring documents it.
Calling a builtin from ordinary Python raises :class:`KernelOnlyError`: the
body of a kernel is never run as Python, it is lowered to IR.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable

from ..core.errors import IronError


class KernelOnlyError(IronError, RuntimeError):
    """A kernel builtin was called from ordinary Python code."""


#: Categories whose builtins neither touch memory nor have effects: an
#: expression made only of these may be evaluated speculatively (``and``/``or``).
PURE_CATEGORIES = frozenset({"index", "math", "cast", "vector", "static"})


class Builtin:
    """A builtin of the kernel language (``program_id``, ``exp``, ``store``...).

    ``ref_first``: the first argument is a tensor element reference (``a[i]``
    in ``load(a[i])``), lowered as an address rather than loaded.
    ``display`` overrides the signature shown in arity errors for builtins
    with several call forms.
    """

    __slots__ = ("name", "signature", "doc", "category", "ref_first", "display")

    def __init__(self, name: str, signature: inspect.Signature, doc: str, category: str,
                 ref_first: bool = False, display: str | None = None):
        self.name = name
        self.signature = signature
        self.doc = doc
        self.category = category
        self.ref_first = ref_first
        self.display = display

    @property
    def pure(self) -> bool:
        return self.category in PURE_CATEGORIES

    @property
    def usage(self) -> str:
        """The signature as users write it, e.g. ``program_id(axis=0)``."""
        return self.display or f"{self.name}{self.signature}"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise KernelOnlyError(f"iron.{self.name}() only works inside an @iron.kernel or @iron.func body; "
                              "kernels are compiled, not run as Python")

    def __repr__(self) -> str:
        return f"<iron builtin {self.usage}>"


def _builtin(category: str, ref_first: bool = False, display: str | None = None) -> Callable[[Callable], Builtin]:
    def make(stub: Callable) -> Builtin:
        return Builtin(stub.__name__, inspect.signature(stub), inspect.getdoc(stub) or "", category,
                       ref_first, display)
    return make


# ---------------------------------------------------------------- thread indices

@_builtin("index")
def program_id(axis=0):
    """The thread's global index along ``axis``: group_id * group_size + thread_id (i32)."""


@_builtin("index")
def thread_id(axis=0):
    """The thread's index within its group along ``axis``."""


@_builtin("index")
def group_id(axis=0):
    """The group's index along ``axis``."""


@_builtin("index")
def group_size(axis=0):
    """Threads per group along ``axis``."""


@_builtin("index")
def num_groups(axis=0):
    """Groups in the launch along ``axis``."""


@_builtin("index")
def grid_size(axis=0):
    """Threads in the launch's grid along ``axis`` (the ``grid`` given at launch)."""


@_builtin("index")
def lane_id():
    """The thread's lane within its subgroup."""


@_builtin("index")
def simd_size():
    """Lanes per subgroup on this target."""


@_builtin("index")
def simd_group_id():
    """The subgroup's index within the group."""


@_builtin("index")
def num_simd_groups():
    """Subgroups per group."""


# ---------------------------------------------------------------- memory

@_builtin("memory", ref_first=True, display="load(a[i]) or load(a, i)")
def load(target, index=None):
    """Element ``i`` of a tensor or shared array."""


@_builtin("memory", ref_first=True, display="store(a[i], v) or store(a, i, v)")
def store(target, index_or_value, value=None):
    """Write ``v`` to element ``i`` (a weak literal converts; other types must match)."""


@_builtin("memory")
def vload(a, i, width):
    """Elements ``i .. i+width-1`` as a vector (``i`` a multiple of ``width``)."""


@_builtin("memory")
def vstore(a, i, v):
    """Write the vector ``v`` to elements ``i .. i+len(v)-1``."""


@_builtin("memory")
def copy_async(dst, dst_index, src, src_index, width, valid=True):
    """Start copying ``src[src_index .. +width-1]`` (global) into ``dst[dst_index ..]`` (shared); zeros where
    ``valid`` is false (``src`` is then not read).  4, 8 or 16 bytes, both indices multiples of ``width``.
    The destination may be read only after :func:`copy_async_wait` (and a :func:`barrier` for other threads)."""


@_builtin("sync")
def copy_async_commit():
    """Close the group of :func:`copy_async` calls this thread started since the last commit."""


@_builtin("sync")
def copy_async_wait(pending=0):
    """Wait for this thread's copies: all of them (``pending=0``), or all but the ``pending`` most recently
    committed groups (a pipeline ``pending + 1`` stages deep; copies not yet committed are then not waited for)."""


@_builtin("memory")
def copy_tile(dst, dst_index, src, shape, coords, box, bars, i, ld=None, layout="sw128", multicast=False):
    """Start copying the ``box = (rows, cols)`` tile at ``coords = (row, col)`` of ``src`` seen as a
    ``shape = (rows, cols)`` matrix with ``ld`` elements between rows (default: its cols) into the shared tile
    at ``dst[dst_index ..]`` in ``layout`` ("sw128": what mma_wg reads; "rows": row-major).  Elements outside
    the matrix read as zeros.  ``shape``, ``coords`` and ``box`` may have up to three outer axes in front
    (outermost first, dense over the matrix: an NHWC image's (n, h, w, c)); the tile holds the box row-major.  The copy brings its bytes to barrier ``i`` of ``bars``: announce them with
    :func:`barrier_arrive` after issuing the copies, and read the tile after :func:`barrier_wait`.
    ``multicast=True`` (after :func:`cluster_groups`): the box lands at the same place in every group of the
    cluster and brings its bytes to barrier ``i`` of each (docs/language.md, "Clusters")."""


@_builtin("memory")
def store_tile(src, src_index, dst, shape, coords, box, ld=None, layout="rows"):
    """Start storing the ``box = (rows, cols)`` shared tile at ``src[src_index ..]`` (in ``layout``, as
    :func:`copy_tile` writes it) to ``dst`` seen as a ``shape = (rows, cols)`` matrix with ``ld`` elements
    between rows (default: its cols), at ``coords = (row, col)``; elements outside the matrix are not
    written (outer axes as :func:`copy_tile` takes them).  One thread issues it, after a barrier that orders the
    tile's writes; the store reads the tile and writes ``dst`` until that thread's :func:`store_tile_wait`,
    before which the tile must not change."""


@_builtin("sync")
def store_tile_wait():
    """Wait until this thread's tile stores have read their tiles and written their matrices."""


@_builtin("memory")
def shared(dtype, shape):
    """A threadgroup array of compile-time ``shape`` (an int or a tuple of ints)."""


@_builtin("sync")
def barrier():
    """Wait until every thread of the group arrives; orders shared memory."""


@_builtin("sync")
def async_barriers(count, arrivals=1):
    """``count`` asynchronous barriers in shared memory, each completing a phase once ``arrivals`` threads
    arrived (and the bytes they announced landed).  Made at the kernel's top level by the whole group;
    phases count from 0 (docs/language.md, "Asynchronous barriers")."""


@_builtin("sync")
def barrier_arrive(bars, i, bytes=0, rank=None):  # noqa: A002 - the count PTX and CUDA call bytes
    """This thread's arrival on barrier ``i`` of ``bars``; ``bytes``: tile copies it announces, which must land
    before the phase completes.  Orders this thread's earlier memory accesses before the phase's end.
    ``rank`` (after :func:`cluster_groups`, no bytes): the arrival goes to barrier ``i`` of the group of that
    rank in this group's cluster instead."""


@_builtin("sync")
def barrier_wait(bars, i, parity):
    """Wait until the phase of barrier ``i`` with this parity (phase number % 2) completed; then the memory
    accesses made before its arrivals are visible.  Start at parity 0; a ring flips it on every lap."""


@_builtin("sync")
def copy_async_barrier(bars, i):
    """The phase in progress of barrier ``i`` completes only once this thread's :func:`copy_async` copies
    issued so far have landed (no arrival of its own: arrive as usual)."""


@_builtin("sync")
def warp_roles(threads, registers=None):
    """Split the group into roles of consecutive threads: role 0 is the first ``threads[0]`` threads, role 1
    the next ``threads[1]``, ...; returns this thread's role.  The group has exactly ``sum(threads)`` threads.
    ``registers``: each role's register budget per thread (CUDA sm_90 ``setmaxnreg``; whole warpgroups).
    Called once, at the kernel's top level (docs/language.md, "Warp roles")."""


@_builtin("sync")
def cluster_groups(size):
    """Join consecutive groups along grid axis 0 into clusters of ``size`` (1, 2, 4 or 8; the launch's groups
    along axis 0 a multiple of it) whose groups reach each other's barriers (``barrier_arrive(..., rank=)``)
    and receive each other's multicast tile copies; returns this group's rank in its cluster.  Called once,
    at the kernel's top level; sizes past 1 need clusters (CUDA sm_90), elsewhere a compile-time error
    (docs/language.md, "Clusters")."""


@_builtin("sync")
def fence():
    """Order this thread's global memory accesses for every thread of the launch (a device-scope fence): its
    writes before the fence are seen by any thread that sees an atomic it made after it and then fences too.
    The last-group pattern: each group writes its part, fences, ``barrier()``, one thread counts the group in
    with an atomic; the group that counts last fences and reads every part (docs/language.md, "Fences").
    CUDA and HIP: ``__threadfence()``; Vulkan: ``memoryBarrierBuffer()`` on coherent buffers; Metal (MSL 3.1
    has no device-scope fence): a compile-time error."""


@_builtin("sync")
def cluster_sync():
    """Wait until every thread of every group of this group's cluster arrives; orders memory among them.  Once
    after the barriers are made, before any group reaches another's, and before a group ends while others may
    still arrive on its barriers or copy into its shared memory."""


@_builtin("sync")
def role_barrier():
    """Wait until every thread of this thread's role arrives (after :func:`warp_roles`); orders shared memory
    among them like :func:`barrier` does for the group."""


# ---------------------------------------------------------------- atomics

@_builtin("atomic", ref_first=True, display="atomic_add(a, i, v) or atomic_add(a[i], v)")
def atomic_add(target, index_or_value, value=None):
    """Add ``v`` to element ``i``; returns the old value."""


@_builtin("atomic", ref_first=True, display="atomic_max(a, i, v) or atomic_max(a[i], v)")
def atomic_max(target, index_or_value, value=None):
    """Store the maximum of element ``i`` and ``v``; returns the old value."""


@_builtin("atomic", ref_first=True, display="atomic_min(a, i, v) or atomic_min(a[i], v)")
def atomic_min(target, index_or_value, value=None):
    """Store the minimum of element ``i`` and ``v``; returns the old value."""


@_builtin("atomic", ref_first=True, display="atomic_xchg(a, i, v) or atomic_xchg(a[i], v)")
def atomic_xchg(target, index_or_value, value=None):
    """Replace element ``i`` by ``v``; returns the old value."""


@_builtin("atomic", ref_first=True, display="atomic_cas(a, i, cmp, v) or atomic_cas(a[i], cmp, v)")
def atomic_cas(target, arg1, arg2, arg3=None):
    """Replace element ``i`` by ``v`` if it equals ``cmp``; returns the old value."""


# ---------------------------------------------------------------- math

@_builtin("math")
def exp(x):
    """e ** x."""


@_builtin("math")
def exp2(x):
    """2 ** x."""


@_builtin("math")
def fast_exp2(x):
    """2 ** x where a result under f32's smallest normal (2^-126) may be 0: one instruction on NVIDIA
    (``ex2.approx.ftz``) instead of exp2's denormal fix-up; the interpreter flushes such results, so a kernel that
    needs them shows it there.  For softmax-like sums, whose tiny terms are lost anyway."""


@_builtin("math")
def log(x):
    """Natural logarithm."""


@_builtin("math")
def log2(x):
    """Base-2 logarithm."""


@_builtin("math")
def log1p(x):
    """log(1 + x), accurate near 0."""


@_builtin("math")
def expm1(x):
    """exp(x) - 1, accurate near 0."""


@_builtin("math")
def sqrt(x):
    """Square root."""


@_builtin("math")
def rsqrt(x):
    """1 / sqrt(x)."""


@_builtin("math")
def recip(x):
    """1 / x."""


@_builtin("math")
def sin(x):
    """Sine (radians)."""


@_builtin("math")
def cos(x):
    """Cosine (radians)."""


@_builtin("math")
def tan(x):
    """Tangent (radians)."""


@_builtin("math")
def asin(x):
    """Arc sine."""


@_builtin("math")
def acos(x):
    """Arc cosine."""


@_builtin("math")
def atan(x):
    """Arc tangent."""


@_builtin("math")
def sinh(x):
    """Hyperbolic sine."""


@_builtin("math")
def cosh(x):
    """Hyperbolic cosine."""


@_builtin("math")
def tanh(x):
    """Hyperbolic tangent."""


@_builtin("math")
def erf(x):
    """The error function."""


@_builtin("math")
def floor(x):
    """Largest integral value not above ``x`` (float result)."""


@_builtin("math")
def ceil(x):
    """Smallest integral value not below ``x`` (float result)."""


@_builtin("math")
def round(x):  # noqa: A001 - the kernel language's name
    """Nearest integral value, ties to even (float result)."""


@_builtin("math")
def trunc(x):
    """``x`` rounded toward zero (float result)."""


@_builtin("math")
def abs(x):  # noqa: A001
    """Absolute value."""


@_builtin("math")
def sign(x):
    """-1, 0 or +1 (NaN for NaN)."""


@_builtin("math")
def isnan(x):
    """Whether ``x`` is NaN."""


@_builtin("math")
def isinf(x):
    """Whether ``x`` is infinite."""


@_builtin("math")
def isfinite(x):
    """Whether ``x`` is neither infinite nor NaN."""


@_builtin("math")
def pow(x, y):  # noqa: A001
    """``x`` raised to ``y`` (float)."""


@_builtin("math")
def atan2(y, x):
    """The angle of the point (x, y)."""


@_builtin("math")
def min(a, b, *more):  # noqa: A001
    """The smallest argument (for floats the non-NaN one, like C fminf)."""


@_builtin("math")
def max(a, b, *more):  # noqa: A001
    """The largest argument (for floats the non-NaN one, like C fmaxf)."""


@_builtin("math")
def fma(a, b, c):
    """a * b + c rounded once."""


@_builtin("math")
def select(cond, a, b):
    """``a`` where ``cond`` holds, else ``b`` (both are evaluated)."""


# ---------------------------------------------------------------- casts

@_builtin("cast")
def cast(x, dtype):
    """``x`` converted to ``dtype`` (same as ``dtype(x)``)."""


@_builtin("cast")
def bitcast(x, dtype):
    """The bits of ``x`` reinterpreted as ``dtype`` (same size)."""


@_builtin("cast")
def widen(x):
    """An f16/bf16 value as f32 (f32 stays f32): accumulate in f32."""


@_builtin("cast")
def fma_f32(a, b, acc):
    """widen(a) * widen(b) + acc, rounded once, in f32."""


# ---------------------------------------------------------------- vectors

@_builtin("vector")
def vec(*elems):
    """A vector of 2, 4 or 8 elements."""


# ---------------------------------------------------------------- subgroups

@_builtin("subgroup")
def simd_sum(x):
    """The sum over the active lanes of the subgroup, given to every lane."""


@_builtin("subgroup")
def simd_max(x):
    """The maximum over the active lanes of the subgroup."""


@_builtin("subgroup")
def simd_min(x):
    """The minimum over the active lanes of the subgroup."""


@_builtin("subgroup")
def simd_any(cond):
    """Whether ``cond`` holds in any active lane."""


@_builtin("subgroup")
def simd_all(cond):
    """Whether ``cond`` holds in every active lane."""


@_builtin("subgroup")
def simd_shuffle(x, lane):
    """``x`` of lane ``lane mod W``."""


@_builtin("subgroup")
def simd_shuffle_xor(x, mask):
    """``x`` of lane ``lane_id() ^ mask``."""


@_builtin("subgroup")
def simd_shuffle_up(x, delta):
    """``x`` of lane ``lane_id() - delta`` (own value below lane 0)."""


@_builtin("subgroup")
def simd_shuffle_down(x, delta):
    """``x`` of lane ``lane_id() + delta`` (own value past the last lane)."""


@_builtin("subgroup")
def simd_broadcast(x, lane):
    """``x`` of lane ``lane`` (the same lane for the whole subgroup)."""


# ---------------------------------------------------------------- register arrays and fragments

@_builtin("register")
def local(dtype, n):
    """A register array of ``n`` zeros (compile-time indices only)."""


@_builtin("fragment")
def frag_a(t, base, ld, M, K, layout="row"):  # noqa: N803 - matrix dimensions read as in the literature
    """The M x K left operand of ``mma``: element (r, c) is t[base + r*ld + c] (row layout)."""


@_builtin("fragment")
def frag_b(t, base, ld, K, N, layout="row"):  # noqa: N803
    """The K x N right operand of ``mma``."""


@_builtin("fragment")
def frag_acc(dtype, M, N, value=0.0):  # noqa: N803
    """An M x N accumulator filled with ``value``."""


@_builtin("fragment")
def frag_load_acc(t, base, ld, M, N, layout="row"):  # noqa: N803
    """An M x N accumulator loaded from memory."""


@_builtin("fragment")
def frag_store(t, base, ld, acc, layout="row"):
    """Write an accumulator fragment to memory."""


@_builtin("fragment")
def frag_row_max(acc):
    """An accumulator of ``acc``'s type whose every element is the largest of its row of ``acc`` (maxNum: a NaN
    counts only where the whole row is NaN)."""


@_builtin("fragment")
def frag_row_sum(acc):
    """An accumulator of ``acc``'s type whose every element is the sum of its row of ``acc`` (added in f32 in an
    unspecified order, rounded to the accumulator's type)."""


@_builtin("fragment")
def frag_mask(acc, value, cols=None, diagonal=None):
    """``acc`` with ``value`` in place of every element (r, c) where ``c >= cols`` or ``c - r > diagonal`` (either
    bound left out: none): the keys past a sequence's end, or past a query's position in causal attention
    (``diagonal`` = query index of row 0 - key index of column 0).  ``value`` converts to the accumulator's dtype
    without loss (e.g. ``-inf``); the bounds are integers, the same on every lane of the subgroup."""


@_builtin("fragment")
def frag_acc_to_a(acc, col0, dtype):
    """The 16 x 16 A fragment of ``dtype`` (f16, bf16 or f32) holding columns ``col0`` .. ``col0`` + 15 of a 16-row
    accumulator, each element rounded once: attention's probabilities fed to its second multiply (``mma`` or
    ``mma_wg`` with A from registers).  ``col0`` is a compile-time integer."""


@_builtin("fragment")
def frag_scale_rows(acc, factors):
    """``acc`` with each row multiplied by its row's value in ``factors``: an accumulator of as many rows (any
    columns) and ``acc``'s dtype whose rows each hold one value, as ``frag_row_max`` / ``frag_row_sum`` and
    elementwise math on them give (attention's rescaling of its output rows by exp(m_old - m_new))."""


@_builtin("fragment")
def mma(a, b, acc):
    """acc + a @ b for one subgroup's fragments."""


@_builtin("fragment")
def mma_wg(a, a_tile, b, b_tile, acc, k=64, b_major="k", b_block=0, pending=0, k0=0, commit=True):
    """acc + A @ B for a warpgroup (four subgroups) from swizzled shared tiles (docs/ir.md).

    A is the 64 x k tile at ``a[a_tile ..]``; B is k x N at ``b[b_tile ..]``, stored n-by-k
    (``b_major="k"``) or k-by-n in blocks of 64 columns ``b_block`` elements apart (``"n"``); both from
    K column ``k0`` of their 64-wide tiles on.  Or A from registers: ``a`` a 16 x 16 A fragment
    (``frag_a``), each subgroup's own 16 rows, with ``k=16`` (``a_tile`` unused, 0).
    Subgroup s gets rows 16 (s % 4) .. of the product: ``acc`` is its 16 x N accumulator.
    ``pending``: how many of the warpgroup's multiplies may still run when it returns (0: this one
    is done); one in flight keeps its tiles unwritable and its result unreadable until retired.
    ``commit=False``: the multiply joins the next ``mma_wg``'s group instead of closing its own (no wait
    either): ``pending`` and :func:`mma_wg_wait` count groups, so a product of many slices (A from
    registers: one per 16 K columns) retires as one.
    """


@_builtin("fragment")
def mma_wg_wait(pending=0):
    """Wait until at most ``pending`` of this warpgroup's ``mma_wg`` multiplies are still running."""


# ---------------------------------------------------------------- compile-time

@_builtin("static")
def static_range(start, stop=None, step=None):
    """Like range(), but the frontend unrolls the loop: the variable is a compile-time int."""


#: Every builtin by name, in definition order.
ALL_BUILTINS: dict[str, Builtin] = {name: obj for name, obj in list(globals().items()) if isinstance(obj, Builtin)}

__all__ = ["Builtin", "KernelOnlyError", "ALL_BUILTINS", *ALL_BUILTINS]
