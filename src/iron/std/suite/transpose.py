"""Tests and benches of iron.std.transpose: the tiled 2-D transpose, compared bit for bit.

The oracle is numpy's ``x.T`` on the float64 copy of the exact input; a transpose rounds nothing, so the
comparison is exact (every element of the poisoned output must be written, and only once correctly).
"""

from __future__ import annotations

import numpy as np

from iron import EXACT, Setup, bench, test_kernel

from .. import _host
from ..transpose import GROUP, MAX_GROUPS, TILE, transpose_tiles

# (rows R, cols C, batch B): one element; one row and one column (a tile mostly masked); neither a multiple of
# the tile; exactly tiles; tall and wide; G caps the groups per axis so groups loop over tiles (and the batch).
SHAPES = [{"R": 1, "C": 1}, {"R": 1, "C": 37}, {"R": 37, "C": 1}, {"R": 33, "C": 65}, {"R": 64, "C": 64},
          {"R": 100, "C": 31}, {"R": 70, "C": 97, "G": 2}, {"R": 9, "C": 40, "B": 3}, {"R": 33, "C": 5, "B": 5, "G": 2}]
BENCH = {"interp": [{"R": 256, "C": 384}], "vulkan": [{"R": 2048, "C": 2048}],
         "*": [{"R": 4096, "C": 4096}, {"R": 16384, "C": 4096}]}


def _transpose_torch(x, out, rows, cols, batch):
    return x.transpose(-1, -2).contiguous()


def _transpose_numpy(x, out, rows, cols, batch):
    return np.ascontiguousarray(np.swapaxes(x, -1, -2))


@test_kernel(transpose_tiles, shapes=SHAPES, name="std/transpose/tiles")
@bench(transpose_tiles, shapes=BENCH, reference={"cuda": _transpose_torch, "*": _transpose_numpy},
       name="std/transpose/tiles")
def tiles_setup(case):
    rows, cols = case["R"], case["C"]
    cap = int(case.shape.get("G", MAX_GROUPS))
    gx = min(_host.ceil_div(cols, TILE), cap)
    gy = min(_host.ceil_div(rows, TILE), cap)
    batch = int(case.shape.get("B", 1))
    dims = (batch,) if batch > 1 else ()
    return Setup(args=[case.randn(*dims, rows, cols), case.empty(*dims, cols, rows), rows, cols, batch],
                 grid=(gx * GROUP[0], gy * GROUP[1], min(batch, cap)), group=GROUP,
                 oracle=lambda x, out, r, c, b: np.swapaxes(x, -1, -2), tolerance=EXACT)
