"""Tests and benches of iron.std.reduce: row and whole-tensor sum / mean / max / min / argmax.

Oracles are float64 numpy on the exact inputs: sums with ``Expect(scale = sum |x|)`` (a sum's rounding
error is relative to its terms, not to a result that may cancel) and a depth counted along the
kernel's documented order (reduce.py); max/min and argmax compare exactly (they round nothing).
argmax inputs are small integers in half the rows, so ties are common and "the first index" is tested.
Shape keys: R rows, C cols, SIMD 1 the subgroup-per-row schedule, ALIGNED 0 the scalar-load path, G a
cap on the groups (so groups loop over rows); N elements cut into chunks of CHUNK.
"""

from __future__ import annotations

import numpy as np

from iron import EXACT, Depth, Expect, Setup, bench, bf16, f16, f32, i32, log2_ceil, test_kernel

from .. import _host
from ..reduce import GROUP, argmax_finish, argmax_rows, reduce_rows, row_groups

VECTORS = [{"T": f32, "VEC": 4}, {"T": f16, "VEC": 8}, {"T": bf16, "VEC": 8}]

# One element; rows shorter than a vector and not a multiple of it (rows start unaligned: scalar head
# and tail); one group's vector stride (256 x VEC = 1024 f32 / 2048 f16) and one more; a grid capped at
# 2 groups; the scalar path (a buffer not 16-byte aligned).  Each in both schedules.
_ROWS = [{"R": 1, "C": 1}, {"R": 3, "C": 7}, {"R": 9, "C": 64}, {"R": 2, "C": 1024}, {"R": 2, "C": 1025},
         {"R": 1, "C": 2049}, {"R": 19, "C": 37, "G": 2}, {"R": 5, "C": 300, "ALIGNED": 0}]
ROW_SHAPES = [{**s, "SIMD": simd} for s in _ROWS for simd in (0, 1)]
ROW_BENCH = {"interp": [{"R": 64, "C": 1000, "SIMD": s} for s in (0, 1)],
             "vulkan": [{"R": 1024, "C": 1024, "SIMD": s} for s in (0, 1)],
             "*": [{"R": r, "C": c, "SIMD": s} for r, c in ((16384, 4096), (4096, 16384)) for s in (0, 1)]}
# A whole tensor cut into ceil(N / CHUNK) chunks, the last one short (the host's chunking: reduce.chunking).
PART_SHAPES = [{"N": 1, "CHUNK": 8}, {"N": 100, "CHUNK": 8}, {"N": 3001, "CHUNK": 1024}, {"N": 2500, "CHUNK": 2048}]
PART_BENCH = {"interp": [{"N": 1 << 16, "CHUNK": 4096}], "vulkan": [{"N": 1 << 22, "CHUNK": 32768}],
              "*": [{"N": 1 << 24, "CHUNK": 16384}]}
FINISH_SHAPES = [1, 5, 256, 1000]


def _get(case, name: str, default: int) -> int:
    return int(case.shape[name]) if name in case.shape else default


def sum_chain(cols: int, vec: int, threads: int, w: int, aligned: bool = True) -> int:
    """f32 roundings on the longest path of a row's sum: a vector lane's adds over the thread's chunks, the
    log2 VEC fold and the head and tail elements (unaligned: the thread's scalar adds instead), simd_sum
    over W lanes (counted W - 1: lane order on the interpreter; a log2 W butterfly on GPUs), then the
    subgroups added in order (threads / W - 1; none in the subgroup-per-row schedule)."""
    if aligned:
        own = _host.ceil_div(cols, threads * vec) + log2_ceil(vec) + 2 * _host.ceil_div(vec - 1, threads)
    else:
        own = _host.ceil_div(cols, threads)
    return own + w - 1 + max(threads // w - 1, 0)


def _chunks(x: np.ndarray, chunk: int, fill: float = np.nan) -> np.ndarray:
    """A flat ``x`` as rows of ``chunk`` (float64), the last padded with ``fill``."""
    rows = _host.ceil_div(x.size, chunk)
    padded = np.full(rows * chunk, fill)
    padded[: x.size] = x.reshape(-1)
    return padded.reshape(rows, chunk)


# ---------------------------------------------------------------- row reductions: sum, mean, max, min

OPS = {"sum": ("sum", 1.0), "mean": ("sum", 1.0), "max": ("max", 1.0), "min": ("max", -1.0)}


def _oracle(op: str, x: np.ndarray, count: float):
    """Each row of the 2-D float64 ``x`` reduced; sums as Expect with the scale sum |x|."""
    if op == "max":
        return x.max(axis=1)
    if op == "min":
        return x.min(axis=1)
    total, scale = x.sum(axis=1), np.abs(x).sum(axis=1)
    return Expect(total / count, scale=scale / count)


def _torch_rows(op: str):
    def ref(x, out, rows, cols, n, count, sign, by_simd, aligned):
        import torch

        return {"sum": torch.sum, "mean": torch.mean, "max": torch.amax, "min": torch.amin}[op](x, dim=-1)
    return ref


def _numpy_rows(op: str):
    def ref(x, out, rows, cols, n, count, sign, by_simd, aligned):
        got = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min}[op](x.astype(np.float32), axis=-1)
        return got.astype(out.dtype)
    return ref


def _rows_setup(case, op: str) -> Setup:
    rows, cols, vec = case["R"], case["C"], case["VEC"]
    by_simd, aligned = bool(_get(case, "SIMD", 0)), bool(_get(case, "ALIGNED", 1))
    kind, sign = OPS[op]
    count = cols if op == "mean" else 1
    threads = case.simd_width if by_simd else GROUP
    chain = sum_chain(cols, vec, threads, case.simd_width, aligned) + (op == "mean")   # + the division
    return Setup(args=[case.randn(rows, cols), case.empty(rows), rows, cols, rows * cols, np.float32(count),
                       np.float32(sign), by_simd, aligned],
                 grid=_get(case, "G", row_groups(rows, by_simd)) * GROUP, group=GROUP,
                 oracle=lambda x, *rest: _oracle(op, x, count),
                 depth=Depth(steps=1, f32_steps=chain), tolerance=EXACT if kind == "max" else None,
                 flops=rows * cols,
                 reference={"cuda": _torch_rows(op), "*": _numpy_rows(op)})


def _register_rows(op: str, benched: bool):
    def setup(case):
        return _rows_setup(case, op)
    setup.__name__ = f"{op}_rows_setup"
    name = f"std/reduce/{op}_rows"
    registered = test_kernel(reduce_rows.variant(OP=OPS[op][0]), shapes=ROW_SHAPES, bindings=VECTORS,
                             name=name)(setup)
    if benched:
        bench(reduce_rows.variant(OP=OPS[op][0]), shapes=ROW_BENCH, bindings=VECTORS, name=name)(setup)
    return registered


# mean and min run the sum and max kernels (count = cols, sign = -1): their benches would repeat them.
sum_rows_setup = _register_rows("sum", benched=True)
mean_rows_setup = _register_rows("mean", benched=False)
max_rows_setup = _register_rows("max", benched=True)
min_rows_setup = _register_rows("min", benched=False)


# ---------------------------------------------------------------- whole tensor, stage 1: f32 partials

def _partials_reference(op: str):
    def torch_ref(x, out, rows, cols, n, count, sign, by_simd, aligned):
        import torch

        pad = rows * cols - n
        if pad:    # not at the bench shapes, where the chunks divide N
            x = torch.nn.functional.pad(x, (0, pad), value=0.0 if op == "sum" else float("-inf"))
        v = x.view(rows, cols)
        return torch.sum(v, dim=-1, dtype=torch.float32) if op == "sum" else torch.amax(v, dim=-1).float()

    def numpy_ref(x, out, rows, cols, n, count, sign, by_simd, aligned):
        v = _chunks(x.astype(np.float32), cols, 0.0 if op == "sum" else -np.inf).astype(np.float32)
        return (np.sum if op == "sum" else np.max)(v, axis=-1)

    return {"cuda": torch_ref, "*": numpy_ref}


@test_kernel(reduce_rows, shapes=PART_SHAPES, bindings=[{**v, "OP": op} for op in ("sum", "max") for v in VECTORS],
             name="std/reduce/partials")
@bench(reduce_rows, shapes=PART_BENCH, bindings=[{**v, "OP": op} for op in ("sum", "max") for v in VECTORS],
       name="std/reduce/partials")
def partials_setup(case):
    """Stage 1 of a whole-tensor sum / max: one f32 partial per chunk of x (N elements)."""
    n, chunk, vec, op = case["N"], case["CHUNK"], case["VEC"], case["OP"]
    rows = _host.ceil_div(n, chunk)

    def oracle(x, *rest):
        if op == "sum":
            parts = _chunks(x, chunk, 0.0)
            return Expect(parts.sum(axis=1), scale=np.abs(parts).sum(axis=1))
        return _chunks(x, chunk, -np.inf).max(axis=1)

    return Setup(args=[case.randn(n), case.empty(rows, dtype=f32), rows, chunk, n, np.float32(1.0),
                       np.float32(1.0), False, True],
                 grid=row_groups(rows, False) * GROUP, group=GROUP, oracle=oracle,
                 depth=Depth(steps=1, f32_steps=sum_chain(chunk, vec, GROUP, case.simd_width)),
                 tolerance=EXACT if op == "max" else None, flops=n, reference=_partials_reference(op))


# ---------------------------------------------------------------- whole tensor, stage 2: one group

@test_kernel(reduce_rows, shapes=FINISH_SHAPES,
             bindings=[{"T": f32, "VEC": 4, "OP": op, "U": u} for op in ("sum", "max") for u in (f32, f16, bf16)],
             name="std/reduce/finish")
def finish_setup(case):
    """Stage 2: P f32 partials reduced by one group into U (x's dtype), as the mean (divided by the
    tensor's size) and the min (sign = -1); plain sum and max are the row tests' count = 1, sign = 1."""
    parts, op, out_t = case.n, case["OP"], case["U"]
    count = 1000 * parts + 3
    kind = "mean" if op == "sum" else "min"
    return Setup(args=[case.randn(parts, dtype=f32, scale=10.0), case.empty(1, dtype=out_t), 1, parts, parts,
                       np.float32(count), np.float32(-1.0), False, True],
                 grid=GROUP, group=GROUP,
                 oracle=lambda x, *rest: _oracle(kind, x.reshape(1, -1), count),
                 depth=Depth(steps=1, f32_steps=sum_chain(parts, 4, GROUP, case.simd_width) + 1),
                 tolerance=EXACT if kind == "min" and out_t == f32 else None)


# ---------------------------------------------------------------- argmax

def _tie_rows(case, rows: int, cols: int) -> np.ndarray:
    """Even rows: integers in [-3, 3] (many ties: the first index must win); odd rows: normal samples."""
    x = case.randn(rows, cols)
    x[0::2] = case.randint(rows, cols, low=-3, high=3, dtype=case.T)[0::2]
    return x


def _argmax_torch(x, out, rows, cols, n, by_simd, aligned):
    import torch

    pad = rows * cols - n
    v = x if not pad else torch.nn.functional.pad(x, (0, pad), value=float("-inf"))
    return torch.argmax(v.view(rows, cols), dim=-1).to(torch.int32)


def _argmax_numpy(x, out, rows, cols, n, by_simd, aligned):
    return np.argmax(_chunks(x.astype(np.float32), cols, -np.inf), axis=1).astype(np.int32)


ARGMAX_REFERENCE = {"cuda": _argmax_torch, "*": _argmax_numpy}


@test_kernel(argmax_rows, shapes=ROW_SHAPES, bindings=VECTORS, name="std/reduce/argmax_rows")
@bench(argmax_rows, shapes=ROW_BENCH, bindings=VECTORS, reference=ARGMAX_REFERENCE, name="std/reduce/argmax_rows")
def argmax_rows_setup(case):
    rows, cols = case["R"], case["C"]
    by_simd, aligned = bool(_get(case, "SIMD", 0)), bool(_get(case, "ALIGNED", 1))
    return Setup(args=[_tie_rows(case, rows, cols), case.empty(rows, dtype=i32), rows, cols, rows * cols, by_simd,
                       aligned],
                 grid=_get(case, "G", row_groups(rows, by_simd)) * GROUP, group=GROUP,
                 oracle=lambda x, *rest: np.argmax(x, axis=1))


@test_kernel(argmax_rows, shapes=PART_SHAPES, bindings=VECTORS, name="std/reduce/argmax_partials")
@bench(argmax_rows, shapes=PART_BENCH, bindings=VECTORS, reference=ARGMAX_REFERENCE,
       name="std/reduce/argmax_partials")
def argmax_partials_setup(case):
    """Stage 1 of a whole-tensor argmax: each chunk's argmax, relative to the chunk."""
    n, chunk = case["N"], case["CHUNK"]
    rows = _host.ceil_div(n, chunk)
    return Setup(args=[case.randint(n, low=-20, high=20, dtype=case.T), case.empty(rows, dtype=i32), rows, chunk,
                       n, False, True],
                 grid=row_groups(rows, False) * GROUP, group=GROUP,
                 oracle=lambda x, *rest: np.argmax(_chunks(x, chunk, -np.inf), axis=1))


@test_kernel(argmax_finish, shapes=PART_SHAPES, name="std/reduce/argmax_finish")
def argmax_finish_setup(case):
    """Stage 2: the per-chunk argmaxes (computed here by numpy) reduced to x's flat argmax by one group."""
    n, chunk = case["N"], case["CHUNK"]
    x = case.randint(n, low=-5, high=5, dtype=case.T)
    part = np.argmax(_chunks(x.astype(np.float64), chunk, -np.inf), axis=1).astype(np.int32)
    return Setup(args=[x, part, case.empty(1, dtype=i32), part.size, chunk], grid=GROUP, group=GROUP,
                 oracle=lambda x, *rest: np.array([np.argmax(x)]))
