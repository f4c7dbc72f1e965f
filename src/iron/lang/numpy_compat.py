"""numpy, only when the program has already imported it.

``import iron`` must not import numpy (iron.core stays import-light, see
tests/core/test_layers.py).  The launch path and the frontend only need
numpy to recognise numpy objects, and a numpy object can only exist once
numpy has been imported, so looking it up in ``sys.modules`` suffices.
"""

from __future__ import annotations

import sys
from typing import Any


def is_ndarray(x: Any) -> bool:
    np = sys.modules.get("numpy")
    return np is not None and isinstance(x, np.ndarray)


def is_numpy_scalar(x: Any) -> bool:
    np = sys.modules.get("numpy")
    return np is not None and isinstance(x, np.generic)


def is_numpy_integer(x: Any) -> bool:
    np = sys.modules.get("numpy")
    return np is not None and isinstance(x, np.integer)
