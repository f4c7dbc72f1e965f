"""Memory-access corpus kernels: strides, 2-D grids, vectors, mergeable loads, a stencil, asynchronous copies."""

import numpy as np

from iron import In, T, Tensor, bf16, f16, f32, func, i32, kernel, variants
from iron.core.types import TILE_LAYOUTS
from iron.lang import (async_barriers, barrier, barrier_arrive, barrier_wait, copy_async, copy_async_barrier,
                       copy_async_commit, copy_async_wait, copy_tile, group_id, num_groups, program_id, role_barrier,
                       shared, store_tile, store_tile_wait, thread_id, vec, vstore, warp_roles)

from .case import (CorpusCase, Depth, Expect, Run, empty, f64, fixed_depth, launch_1d, poisoned_like, randint,
                   randn, round_up)
from .intmath import wrap


# ---------------------------------------------------------------- strided access

@kernel(variants(T=[f32, i32]))
def strided_update(a: In[T], out: Tensor[T], stride: int, offset: int, n: int):
    i = program_id(0)
    if i < n:
        j = i * stride + offset
        out[j] = a[j] * 3 + 1


STRIDE, OFFSET = 3, 1


def _strided_args(run: Run, rng: np.random.Generator) -> list:
    m = run.size * STRIDE
    a = randint(rng, m, i32, -10**6, 10**6) if run.T == i32 else randn(rng, m, run.T)
    return [a, empty(m, run.T), STRIDE, OFFSET, run.size]


def _strided_oracle(args, run: Run):
    a = args[0]
    want = poisoned_like(a.size, a.dtype).astype(np.float64 if run.T != i32 else np.int64)
    sel = slice(OFFSET, None, STRIDE)
    if run.T == i32:
        want[sel] = a[sel].astype(np.int64) * 3 + 1
        return {1: want}
    want[sel] = f64(a[sel]) * 3 + 1
    scale = np.abs(want)
    scale[sel] = np.abs(f64(a[sel]) * 3) + 1
    return {1: Expect(want, scale)}  # the elements between the strides must keep their poison


STRIDED = CorpusCase(
    name="strided_update", kernel=strided_update, make_args=_strided_args, oracle=_strided_oracle,
    outputs=(1,), launch=launch_1d(), bindings=({"T": f32}, {"T": i32}), sizes=(1, 7, 255, 1000),
    depth=fixed_depth(2))


# ---------------------------------------------------------------- 2-D grid

@kernel(variants(T=[f32, f16, i32]))
def transpose(a: In[T], out: Tensor[T], rows: int, cols: int):
    c = program_id(0)
    r = program_id(1)
    if r < rows and c < cols:
        out[c * rows + r] = a[r * cols + c]


TRANSPOSE_COLS = 13
TRANSPOSE_GROUP = (8, 4)


def _transpose_args(run: Run, rng: np.random.Generator) -> list:
    n = run.size * TRANSPOSE_COLS
    a = randint(rng, n, i32) if run.T == i32 else randn(rng, n, run.T)
    return [a, empty(n, run.T), run.size, TRANSPOSE_COLS]


def _transpose_launch(run: Run):
    gx, gy = TRANSPOSE_GROUP
    return (round_up(TRANSPOSE_COLS, gx), round_up(run.size, gy)), TRANSPOSE_GROUP


TRANSPOSE = CorpusCase(
    name="transpose_2d", kernel=transpose, make_args=_transpose_args,
    oracle=lambda args, run: {1: args[0].reshape(run.size, TRANSPOSE_COLS).T.reshape(-1)},
    outputs=(1,), launch=_transpose_launch, bindings=({"T": f32}, {"T": f16}, {"T": i32}),
    sizes=(1, 7, 33, 255), exact=True)


# ---------------------------------------------------------------- vector loads and stores

@kernel(variants(T=[f32, f16]))
def vec4_ops(a: In[T], scaled: Tensor[T], reversed_: Tensor[T], n: int):
    i = program_id(0)
    n4 = n // 4
    if i < n4:
        v = a.load(4 * i, width=4)
        scaled.store(4 * i, v * 2.0 + 1.0)
        vstore(reversed_, 4 * i, vec(v[3], v[2], v[1], v[0]))
    elif i == n4:
        for j in range(4 * n4, n):
            x = a[j]
            scaled[j] = x * 2.0 + 1.0
            reversed_[j] = x


def _vec4_oracle(args, run: Run):
    a = f64(args[0])
    n4 = run.size // 4
    rev = a.copy()
    rev[: 4 * n4] = a[: 4 * n4].reshape(n4, 4)[:, ::-1].reshape(-1)
    return {1: Expect(a * 2 + 1, np.abs(2 * a) + 1), 2: rev}


VEC4 = CorpusCase(
    name="vector_load_store", kernel=vec4_ops,
    make_args=lambda run, rng: [randn(rng, run.size, run.T), empty(run.size, run.T), empty(run.size, run.T),
                                run.size],
    oracle=_vec4_oracle, outputs=(1, 2), launch=launch_1d(per_thread=4),
    bindings=({"T": f32}, {"T": f16}), depth=fixed_depth(1))


# ---------------------------------------------------------------- loads the vectorizer may merge

@kernel(variants(T=[f32, i32]))
def quad_sum(a: In[T], sums: Tensor[T], doubled: Tensor[T], m: int):
    i = program_id(0)
    if i < m:
        b = 4 * i
        x0 = a[b]
        x1 = a[b + 1]
        x2 = a[b + 2]
        x3 = a[b + 3]
        sums[i] = (x0 + x1) + (x2 + x3)
        doubled[b] = x0 * 2
        doubled[b + 1] = x1 * 2
        doubled[b + 2] = x2 * 2
        doubled[b + 3] = x3 * 2


def _quad_args(run: Run, rng: np.random.Generator) -> list:
    n = 4 * run.size
    a = randint(rng, n, i32) if run.T == i32 else randn(rng, n, run.T)
    return [a, empty(run.size, run.T), empty(n, run.T), run.size]


def _quad_oracle(args, run: Run):
    if run.T == i32:
        a = args[0].astype(object).reshape(-1, 4)
        return {1: wrap(a.sum(axis=1), i32), 2: wrap(a.reshape(-1) * 2, i32)}
    a = f64(args[0]).reshape(-1, 4)
    return {1: Expect(a.sum(axis=1), np.abs(a).sum(axis=1)), 2: a.reshape(-1) * 2}


QUAD_SUM = CorpusCase(
    name="mergeable_loads", kernel=quad_sum, make_args=_quad_args, oracle=_quad_oracle, outputs=(1, 2),
    launch=launch_1d(), bindings=({"T": f32}, {"T": i32}), sizes=(1, 7, 255, 1000), depth=fixed_depth(2))


@kernel
def quad_sum_shifted(a: In[f32], sums: Tensor[f32], m: int):
    i = program_id(0)
    if i < m:
        b = 4 * i + 1
        sums[i] = (a[b] + a[b + 1]) + (a[b + 2] + a[b + 3])


def _shifted_oracle(args, run: Run):
    a = f64(args[0])[1:].reshape(-1, 4)
    return {1: Expect(a.sum(axis=1), np.abs(a).sum(axis=1))}


QUAD_SUM_SHIFTED = CorpusCase(
    # Four adjacent loads that start one past a multiple of 4: merging them
    # into one aligned vector load would be wrong (and the interpreter says so).
    name="unaligned_adjacent_loads", kernel=quad_sum_shifted,
    make_args=lambda run, rng: [randn(rng, 4 * run.size + 1, f32), empty(run.size, f32), run.size],
    oracle=_shifted_oracle, outputs=(1,), launch=launch_1d(), sizes=(1, 7, 255, 1000), depth=fixed_depth(2))


# ---------------------------------------------------------------- 2-D stencil with boundaries

@kernel(variants(T=[f32, f16, bf16]))
def laplace5(a: In[T], out: Tensor[T], h: int, w: int):
    x = program_id(0)
    y = program_id(1)
    if x < w and y < h:
        i = y * w + x
        acc = 4.0 * f32(a[i])
        if x > 0:
            acc -= f32(a[i - 1])
        if x < w - 1:
            acc -= f32(a[i + 1])
        if y > 0:
            acc -= f32(a[i - w])
        if y < h - 1:
            acc -= f32(a[i + w])
        out[i] = T(acc)


#: Grid height -> width: a single cell, a thin strip, and shapes that are no
#: multiple of the 8x8 group.
STENCIL_WIDTH = {1: 1, 7: 5, 33: 19, 100: 27}


def _stencil_args(run: Run, rng: np.random.Generator) -> list:
    n = run.size * STENCIL_WIDTH[run.size]
    return [randn(rng, n, run.T), empty(n, run.T), run.size, STENCIL_WIDTH[run.size]]


def _stencil_oracle(args, run: Run):
    h, w = run.size, STENCIL_WIDTH[run.size]
    a = np.pad(f64(args[0]).reshape(h, w), 1)  # zero outside the grid
    centre = a[1:-1, 1:-1]
    neighbours = [a[1:-1, :-2], a[1:-1, 2:], a[:-2, 1:-1], a[2:, 1:-1]]
    want = 4 * centre - sum(neighbours)
    scale = 4 * np.abs(centre) + sum(np.abs(nb) for nb in neighbours)
    return {1: Expect(want.reshape(-1), scale.reshape(-1))}


def _stencil_launch(run: Run):
    return (round_up(STENCIL_WIDTH[run.size], 8), round_up(run.size, 8)), (8, 8)


STENCIL = CorpusCase(
    name="stencil_2d", kernel=laplace5, make_args=_stencil_args, oracle=_stencil_oracle, outputs=(1,),
    launch=_stencil_launch, bindings=({"T": f32}, {"T": f16}, {"T": bf16}), sizes=tuple(STENCIL_WIDTH),
    depth=lambda run: Depth(steps=1, f32_steps=5))


# ---------------------------------------------------------------- 2-D shared memory tile

@kernel(variants(T=[f32, f16, i32]))
def transpose_tiled(a: In[T], out: Tensor[T], rows: int, cols: int):
    tile = shared(T, (8, 9))  # one padding column, the usual bank-conflict dodge
    tx = thread_id(0)
    ty = thread_id(1)
    c = group_id(0) * 8 + tx
    r = group_id(1) * 8 + ty
    if r < rows and c < cols:
        tile[ty, tx] = a[r * cols + c]
    barrier()
    out_col = group_id(1) * 8 + tx
    out_row = group_id(0) * 8 + ty
    if out_row < cols and out_col < rows:
        out[out_row * rows + out_col] = tile[tx, ty]


def _tiled_launch(run: Run):
    return (round_up(TRANSPOSE_COLS, 8), round_up(run.size, 8)), (8, 8)


TRANSPOSE_TILED = CorpusCase(
    name="transpose_shared_2d", kernel=transpose_tiled, make_args=_transpose_args,
    oracle=lambda args, run: {1: args[0].reshape(run.size, TRANSPOSE_COLS).T.reshape(-1)},
    outputs=(1,), launch=_tiled_launch, bindings=({"T": f32}, {"T": f16}, {"T": i32}), sizes=(1, 7, 33, 255),
    exact=True)


# ---------------------------------------------------------------- asynchronous copies into shared memory

COPY_GROUP = 64
COPY_TILE = 256


@kernel(variants(T=[f32, f16, bf16], W=[1, 2, 4, 8], STAGES=[1, 2]))
def staged_copy(src: In[T], out: Tensor[T], n: int):
    """out = src through shared memory, COPY_TILE elements per group, W per copy_async; a copy whose W
    elements are not all below n writes zeros.  STAGES=2: two committed groups of copies of the same tile
    into two halves, the first waited for with one group pending."""
    s = shared(T, 2 * COPY_TILE)
    base = group_id(0) * COPY_TILE
    for i in range(thread_id(0) * W, COPY_TILE, COPY_GROUP * W):
        copy_async(s, i, src, base + i, W, base + i + W <= n)
    if STAGES == 2:
        copy_async_commit()
        for i in range(thread_id(0) * W, COPY_TILE, COPY_GROUP * W):
            copy_async(s, COPY_TILE + i, src, base + i, W, base + i + W <= n)
        copy_async_commit()
        copy_async_wait(1)
    else:
        copy_async_wait()
    barrier()
    for i in range(thread_id(0), COPY_TILE, COPY_GROUP):
        if base + i < n:
            out[base + i] = s[i]
    copy_async_wait()


def _staged_oracle(args, run: Run):
    """src, except that the last partial chunk of W elements (past a multiple of W) reads zeros."""
    src, n, w = args[0], run.size, run["W"]
    want = src.copy()
    want[(n // w) * w:n] = 0
    return {1: want}


STAGED_COPY = CorpusCase(
    name="staged_copy", kernel=staged_copy,
    make_args=lambda run, rng: [randn(rng, run.size, run.T), empty(run.size, run.T), run.size],
    oracle=_staged_oracle, outputs=(1,),
    launch=lambda run: ((-(-run.size // COPY_TILE) * COPY_GROUP,), (COPY_GROUP,)),
    bindings=({"T": f32, "W": 1, "STAGES": 1}, {"T": f32, "W": 4, "STAGES": 2}, {"T": f16, "W": 2, "STAGES": 1},
              {"T": f16, "W": 8, "STAGES": 2}, {"T": bf16, "W": 4, "STAGES": 2}, {"T": bf16, "W": 8, "STAGES": 1}),
    sizes=(1, 7, 255, 1000), exact=True)


# ---------------------------------------------------------------- asynchronous barriers

RING_GROUP, RING_STEPS = 32, 5


@kernel(variants(W=[1, 4], STAGES=[2, 3], COPIES=[True, False]))
def barrier_ring(src: In[f32], out: Tensor[f32], n: int):
    """Each group streams RING_STEPS tiles of RING_GROUP * W elements through a STAGES-deep ring of shared tiles
    guarded by asynchronous barriers: ``full`` (the tile landed: copy_async tied to it, or plain stores) and
    ``empty`` (every thread read it).  A thread writes 2 x for the element mirrored in its tile, which another
    thread brought, so a missing arrival, wait or tie shows."""
    full = async_barriers(STAGES, RING_GROUP)
    empty = async_barriers(STAGES, arrivals=RING_GROUP)
    ring = shared(f32, (STAGES, RING_GROUP * W))
    t = thread_id(0)
    tile = RING_GROUP * W
    for k in range(RING_STEPS):
        s = k % STAGES
        lap = k // STAGES
        start = (group_id(0) * RING_STEPS + k) * tile
        barrier_wait(empty, s, lap + 1)  # the first lap finds every slot free: phase 0 is in progress
        mine = start + t * W
        if COPIES:
            copy_async(ring, s * tile + t * W, src, mine, W, mine + W <= n)
            copy_async_barrier(full, s)
        else:
            for e in range(W):
                v = f32(0.0)
                if mine + e < n:
                    v = src[mine + e]
                ring[s * tile + t * W + e] = v
        barrier_arrive(full, s)
        barrier_wait(full, s, lap)
        for e in range(W):
            if mine + e < n:
                out[mine + e] = ring[s * tile + tile - 1 - t * W - e] * 2.0
        barrier_arrive(empty, s)


def _ring_oracle(args, run: Run):
    src, n, w = args[0], run.size, run["W"]
    tile = RING_GROUP * w
    padded = np.zeros(round_up(n, tile), np.float32)
    padded[:n] = src
    if run["COPIES"]:
        padded[(n // w) * w:] = 0  # a copy of W elements not all below n writes zeros
    mirrored = padded.reshape(-1, tile)[:, ::-1].reshape(-1)[:n]
    return {1: mirrored.astype(np.float64) * 2}


BARRIER_RING = CorpusCase(
    name="barrier_ring", kernel=barrier_ring,
    make_args=lambda run, rng: [randn(rng, run.size, f32), empty(run.size, f32), run.size],
    oracle=_ring_oracle, outputs=(1,),
    launch=lambda run: ((-(-run.size // (RING_GROUP * run["W"] * RING_STEPS)) * RING_GROUP,), (RING_GROUP,)),
    bindings=({"W": 1, "STAGES": 2, "COPIES": True}, {"W": 4, "STAGES": 3, "COPIES": True},
              {"W": 1, "STAGES": 3, "COPIES": False}, {"W": 4, "STAGES": 2, "COPIES": False}),
    sizes=(1, 33, 1000), exact=True)


# ---------------------------------------------------------------- tile copies

TILE_ROWS, TILE_COLS, TILE_SHIFT = 16, 40, (-3, -8)  # columns move by 16 bytes (TILE_COL_ALIGN_BYTES)


@kernel(variants(T=[f32, f16, bf16], LAYOUT=["sw128", "rows"], BC=[8, 32, 64]))
def tile_copies(a: In[T], out: Tensor[T], m: int, ld: int):
    """Group (x, y) copies the TILE_ROWS x BC tile at (TILE_ROWS y, BC x) + TILE_SHIFT of the m x TILE_COLS matrix
    ``a`` (rows ld elements apart) into shared memory in LAYOUT, two tiles a phase on one barrier (the second from
    one row further down, into a second tile); every thread then reads elements back through the layout into
    ``out`` (two TILE_ROWS x BC tiles per group).  Out-of-matrix elements read as zeros."""
    full = async_barriers(1)
    tile = TILE_ROWS * BC
    s = shared(T, 2 * tile)
    t = thread_id(0)
    row, col = TILE_ROWS * group_id(1) + TILE_SHIFT[0], BC * group_id(0) + TILE_SHIFT[1]
    if t == 0:
        copy_tile(s, 0, a, (m, TILE_COLS), (row, col), (TILE_ROWS, BC), full, 0, ld=ld, layout=LAYOUT)
        copy_tile(s, tile, a, (m, TILE_COLS), (row + 1, col), (TILE_ROWS, BC), full, 0, ld, LAYOUT)
        barrier_arrive(full, 0, 2 * tile * T.itemsize)
    barrier_wait(full, 0, 0)
    base = (group_id(1) * num_groups(0) + group_id(0)) * 2 * tile
    for e in range(t, 2 * tile, 32):
        half, rc = e // tile, e % tile
        r, c = rc // BC, rc % BC
        if LAYOUT == "sw128":
            chunk = 16 // T.itemsize
            at = r * (128 // T.itemsize) + (((c // chunk) ^ (r % 8)) * chunk) + c % chunk
        else:
            at = r * BC + c
        out[base + e] = s[half * tile + at]


def num_tiles_x(bc: int) -> int:
    return -(-(TILE_COLS - TILE_SHIFT[1]) // bc)


def _tile_launch(run: Run):
    return (num_tiles_x(run["BC"]) * 32, -(-(run.size - TILE_SHIFT[0]) // TILE_ROWS)), (32, 1)


def _tile_args(run: Run, rng: np.random.Generator) -> list:
    ld = round_up(TILE_COLS, 8) + 8
    a = randn(rng, run.size * ld, run.T)
    (gx, gy), _ = _tile_launch(run)
    return [a, empty(gx // 32 * gy * 2 * TILE_ROWS * run["BC"], run.T), run.size, ld]


def _tile_oracle(args, run: Run):
    a, m, ld, bc = args[0], run.size, args[3], run["BC"]
    (gx, gy), _ = _tile_launch(run)
    matrix = a.reshape(m, ld)[:, :TILE_COLS].astype(np.float64)
    want = []
    for y in range(gy):
        for x in range(gx // 32):
            for down in (0, 1):
                tile = np.zeros((TILE_ROWS, bc))
                for r in range(TILE_ROWS):
                    for c in range(bc):
                        i, j = TILE_ROWS * y + TILE_SHIFT[0] + down + r, bc * x + TILE_SHIFT[1] + c
                        if 0 <= i < m and 0 <= j < TILE_COLS:
                            tile[r, c] = matrix[i, j]
                want.append(tile.reshape(-1))
    return {1: np.concatenate(want)}


def _tile_bindings() -> tuple[dict, ...]:
    """Every dtype in both layouts, with the box a sw128 row needs (128 bytes) or a narrower one."""
    out = []
    for t in (f32, f16, bf16):
        out.append({"T": t, "LAYOUT": "sw128", "BC": TILE_LAYOUTS["sw128"].row_bytes // t.itemsize})
        out.append({"T": t, "LAYOUT": "rows", "BC": 8 if t.itemsize == 2 else 32})
    return tuple(out)


TILE_COPIES = CorpusCase(
    name="tile_copies", kernel=tile_copies, make_args=_tile_args, oracle=_tile_oracle, outputs=(1,),
    launch=_tile_launch, bindings=_tile_bindings(), sizes=(1, 21, 50), exact=True)


@kernel(variants(T=[f32, f16, bf16], LAYOUT=["sw128", "rows"], BC=[8, 32, 64]))
def tile_stores(a: In[T], out: Tensor[T], m: int):
    """Group (x, y) fills a TILE_ROWS x BC shared tile in LAYOUT with the box at (TILE_ROWS y, BC x) +
    TILE_SHIFT of the m x TILE_COLS matrix ``a`` (-1 outside it), and its first thread stores the tile into
    ``out`` (m x TILE_COLS) at the same place: the boxes tile the matrix and reach past every edge, so
    ``out`` equals ``a`` only if the store writes every element inside and none outside."""
    tile = TILE_ROWS * BC
    s = shared(T, tile)
    t = thread_id(0)
    row, col = TILE_ROWS * group_id(1) + TILE_SHIFT[0], BC * group_id(0) + TILE_SHIFT[1]
    for e in range(t, tile, 32):
        r, c = e // BC, e % BC
        i, j = row + r, col + c
        inside = i >= 0 and i < m and j >= 0 and j < TILE_COLS
        v = a[i * TILE_COLS + j if inside else 0] if inside else T(-1.0)
        if LAYOUT == "sw128":
            chunk = 16 // T.itemsize
            s[r * (128 // T.itemsize) + (((c // chunk) ^ (r % 8)) * chunk) + c % chunk] = v
        else:
            s[r * BC + c] = v
    barrier()
    if t == 0:
        store_tile(s, 0, out, (m, TILE_COLS), (row, col), (TILE_ROWS, BC), layout=LAYOUT)
        store_tile_wait()


TILE_STORES = CorpusCase(
    name="tile_stores", kernel=tile_stores,
    make_args=lambda run, rng: [randn(rng, run.size * TILE_COLS, run.T), empty(run.size * TILE_COLS, run.T),
                                run.size],
    oracle=lambda args, run: {1: args[0].astype(np.float64)}, outputs=(1,), launch=_tile_launch,
    bindings=_tile_bindings(), sizes=(1, 21, 50), exact=True)

# ---------------------------------------------------------------- tile copies and stores of boxes with outer axes

#: A (n, h, w, c) tensor's h, w and c (n: the run's size), the box over it, and where the boxes start: every
#: outer axis reaches past both of its edges (negative coordinates too), the channels as the matrix copies'.
BOX_DIMS, BOX, BOX_START = (5, 6, TILE_COLS), (2, 2, 4), (-1, -1, -2)


def _box_counts(run: Run) -> tuple[int, int, int]:
    """Boxes along n, h and w."""
    return tuple(-(-(d - s) // b) for d, s, b in zip((run.size, *BOX_DIMS[:2]), BOX_START, BOX))


def _box_launch(run: Run):
    bn, bh, bw = _box_counts(run)
    return (num_tiles_x(run["BC"]) * 32, bn * bh * bw), (32, 1)


@func
def box_at(g):
    """The (n, h, w) coordinates of box ``g`` (n slowest)."""
    per_n = -(-(BOX_DIMS[0] - BOX_START[1]) // BOX[1]) * -(-(BOX_DIMS[1] - BOX_START[2]) // BOX[2])
    per_h = -(-(BOX_DIMS[1] - BOX_START[2]) // BOX[2])
    return (BOX_START[0] + (g // per_n) * BOX[0], BOX_START[1] + ((g % per_n) // per_h) * BOX[1],
            BOX_START[2] + (g % per_h) * BOX[2])


@func
def tile_offset(r, c, bc, layout, item):
    """Element (r, c) of a tile with bc columns in ``layout`` (docs/ir.md)."""
    at = r * bc + c
    if layout == "sw128":
        chunk = 16 // item
        at = r * (128 // item) + (((c // chunk) ^ (r % 8)) * chunk) + c % chunk
    return at


@kernel(variants(T=[f32, f16, bf16], LAYOUT=["sw128", "rows"], BC=[8, 32, 64]))
def tile_boxes(a: In[T], out: Tensor[T], n: int):
    """Group (x, g) copies box g (BOX x BC at box_at(g), channel BC x + TILE_SHIFT[1]) of the n x BOX_DIMS
    tensor ``a`` into a shared tile in LAYOUT (its 16 rows the box's (n, h, w) positions in row-major order);
    every thread reads the tile back into ``out``.  Elements outside the tensor read as zeros."""
    full = async_barriers(1)
    rows = BOX[0] * BOX[1] * BOX[2]
    s = shared(T, rows * BC)
    t = thread_id(0)
    bn, bh, bw = box_at(group_id(1))
    if t == 0:
        copy_tile(s, 0, a, (n, BOX_DIMS[0], BOX_DIMS[1], BOX_DIMS[2]), (bn, bh, bw, BC * group_id(0) + TILE_SHIFT[1]),
                  (BOX[0], BOX[1], BOX[2], BC), full, 0, layout=LAYOUT)
        barrier_arrive(full, 0, rows * BC * T.itemsize)
    barrier_wait(full, 0, 0)
    base = (group_id(1) * num_groups(0) + group_id(0)) * rows * BC
    for e in range(t, rows * BC, 32):
        out[base + e] = s[tile_offset(e // BC, e % BC, BC, LAYOUT, T.itemsize)]


def _box_args(run: Run, rng: np.random.Generator) -> list:
    (gx, gy), _ = _box_launch(run)
    size = run.size * BOX_DIMS[0] * BOX_DIMS[1] * BOX_DIMS[2]
    return [randn(rng, size, run.T), empty(gx // 32 * gy * 16 * run["BC"], run.T), run.size]


def _box_oracle(args, run: Run):
    a, bc = args[0].astype(np.float64).reshape(run.size, *BOX_DIMS), run["BC"]
    (gx, gy), _ = _box_launch(run)
    pad = 8
    padded = np.zeros([d + 2 * pad + 64 for d in a.shape])
    padded[pad:pad + a.shape[0], pad:pad + a.shape[1], pad:pad + a.shape[2], pad:pad + a.shape[3]] = a
    bn, bh, bw = _box_counts(run)
    want = []
    for g in range(gy):
        n0 = BOX_START[0] + (g // (bh * bw)) * BOX[0]
        h0 = BOX_START[1] + ((g % (bh * bw)) // bw) * BOX[1]
        w0 = BOX_START[2] + (g % bw) * BOX[2]
        for x in range(gx // 32):
            c0 = bc * x + TILE_SHIFT[1]
            box = padded[pad + n0:pad + n0 + BOX[0], pad + h0:pad + h0 + BOX[1], pad + w0:pad + w0 + BOX[2],
                         pad + c0:pad + c0 + bc]
            want.append(box.reshape(-1))
    return {1: np.concatenate(want)}


TILE_BOXES = CorpusCase(
    name="tile_boxes", kernel=tile_boxes, make_args=_box_args, oracle=_box_oracle, outputs=(1,),
    launch=_box_launch, bindings=_tile_bindings(), sizes=(1, 4), exact=True)


@kernel(variants(T=[f32, f16, bf16], LAYOUT=["sw128", "rows"], BC=[8, 32, 64]))
def tile_box_stores(a: In[T], out: Tensor[T], n: int):
    """Group (x, g) fills a shared tile in LAYOUT with box g of ``a`` (as :data:`tile_boxes` copies it; -1
    outside the tensor), and its first thread stores the tile into ``out`` (n x BOX_DIMS) at the same place:
    the boxes tile the tensor and reach past every edge, so ``out`` equals ``a`` only if the store writes
    every element inside and none outside."""
    rows = BOX[0] * BOX[1] * BOX[2]
    s = shared(T, rows * BC)
    t = thread_id(0)
    bn, bh, bw = box_at(group_id(1))
    c0 = BC * group_id(0) + TILE_SHIFT[1]
    for e in range(t, rows * BC, 32):
        r, c = e // BC, e % BC
        i, j, k, ch = bn + r // (BOX[1] * BOX[2]), bh + (r // BOX[2]) % BOX[1], bw + r % BOX[2], c0 + c
        inside = i >= 0 and i < n and j >= 0 and j < BOX_DIMS[0] and k >= 0 and k < BOX_DIMS[1] and ch >= 0 and \
            ch < BOX_DIMS[2]
        at = ((i * BOX_DIMS[0] + j) * BOX_DIMS[1] + k) * BOX_DIMS[2] + ch
        v = a[at if inside else 0] if inside else T(-1.0)
        s[tile_offset(r, c, BC, LAYOUT, T.itemsize)] = v
    barrier()
    if t == 0:
        store_tile(s, 0, out, (n, BOX_DIMS[0], BOX_DIMS[1], BOX_DIMS[2]), (bn, bh, bw, c0),
                   (BOX[0], BOX[1], BOX[2], BC), layout=LAYOUT)
        store_tile_wait()


TILE_BOX_STORES = CorpusCase(
    name="tile_box_stores", kernel=tile_box_stores,
    make_args=lambda run, rng: [randn(rng, run.size * int(np.prod(BOX_DIMS)), run.T),
                                empty(run.size * int(np.prod(BOX_DIMS)), run.T), run.size],
    oracle=lambda args, run: {1: args[0].astype(np.float64)}, outputs=(1,), launch=_box_launch,
    bindings=_tile_bindings(), sizes=(1, 4), exact=True)

# ---------------------------------------------------------------- warp roles

ROLE_SIZES, ROLE_TILE = (128, 256), 256


@kernel(variants(BUDGETS=[False, True]))
def role_split(src: In[f32], out: Tensor[f32], n: int):
    """Role 0 (one warpgroup) stages the group's tile of ROLE_TILE elements reversed into shared memory while
    role 1 (two warpgroups) squares its own elements into another array; role 1's barrier orders the squares
    for its neighbours, the group barrier the staged tile.  Role 1 writes, per element, the staged reverse plus
    the next element's square.  BUDGETS: 40 registers for role 0, 232 for role 1 (setmaxnreg on sm_90)."""
    s = shared(f32, ROLE_TILE)
    q = shared(f32, ROLE_TILE)
    role = warp_roles(ROLE_SIZES, registers=(40, 232) if BUDGETS else None)
    t = thread_id(0)
    base = group_id(0) * ROLE_TILE
    j = t - ROLE_SIZES[0]
    if role == 0:
        for e in range(t, ROLE_TILE, ROLE_SIZES[0]):
            v = f32(0.0)
            if base + ROLE_TILE - 1 - e < n:
                v = src[base + ROLE_TILE - 1 - e]
            s[e] = v
    else:
        x = f32(0.0)
        if base + j < n:
            x = src[base + j]
        q[j] = x * x
    role_barrier()
    w = f32(0.0)
    if role == 1:
        w = q[(j + 1) % ROLE_TILE]
    barrier()
    if role == 1 and base + j < n:
        out[base + j] = s[j] + w


def _role_oracle(args, run: Run):
    src, n = args[0], run.size
    tiles = np.zeros(round_up(n, ROLE_TILE), np.float32)
    tiles[:n] = src
    tiles = tiles.reshape(-1, ROLE_TILE)
    nxt = np.roll(tiles, -1, axis=1)
    want = tiles[:, ::-1] + nxt * nxt  # f32 arithmetic, as the kernel's
    return {1: want.reshape(-1)[:n].astype(np.float64)}


ROLE_SPLIT = CorpusCase(
    name="role_split", kernel=role_split,
    make_args=lambda run, rng: [randn(rng, run.size, f32), empty(run.size, f32), run.size],
    oracle=_role_oracle, outputs=(1,),
    launch=lambda run: ((-(-run.size // ROLE_TILE) * sum(ROLE_SIZES),), (sum(ROLE_SIZES),)),
    bindings=({"BUDGETS": False}, {"BUDGETS": True}), sizes=(1, 300, 1000), exact=True)

CASES = [STRIDED, TRANSPOSE, TRANSPOSE_TILED, VEC4, QUAD_SUM, QUAD_SUM_SHIFTED, STENCIL, STAGED_COPY, BARRIER_RING,
         TILE_COPIES, TILE_STORES, TILE_BOXES, TILE_BOX_STORES, ROLE_SPLIT]
