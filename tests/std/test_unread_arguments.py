"""Arguments a launch passes but its kernel never touches (``iron.std._host.unread``, gemm's absent bias): they
cost the call no allocation, and the results stay those of the function as written."""

from __future__ import annotations

import numpy as np
import pytest

from iron import f32, i32
from iron.std import _host, gemm, gemv


pytestmark = pytest.mark.usefixtures("on_interp")


def test_a_torch_tensor_is_seen_as_the_dtype_over_exactly_its_bytes():
    torch = pytest.importorskip("torch")
    q = torch.zeros(2, 4, 128, dtype=torch.bfloat16)
    seen = _host.unread(q, f32)
    assert seen.dtype is torch.float32
    assert seen.data_ptr() == q.data_ptr() and seen.nbytes == q.nbytes  # one buffer to the aliasing rule
    assert _host.unread(q, i32).dtype is torch.int32


def test_a_tensor_that_cannot_be_seen_so_and_a_numpy_array_get_one_element():
    torch = pytest.importorskip("torch")
    strided = torch.zeros(4, 8, dtype=torch.bfloat16)[:, ::2]
    odd = torch.zeros(3, dtype=torch.bfloat16)  # 6 bytes: no whole number of f32
    for x in (strided, odd):
        got = _host.unread(x, f32)
        assert got.dtype is torch.float32 and got.numel() == 1
    a = np.zeros((4, 128), np.float32)
    got = _host.unread(a, f32)
    assert got.shape == (1,) and not np.shares_memory(got, a)  # a device launch would copy a view's array again


def _scratch_steps(fn) -> list[tuple]:
    plans = [p for p in fn.plans.values() if p is not None]
    assert len(plans) == 1
    return [s for s in plans[0].steps if s[0] == "scratch"]


def test_a_gemv_in_one_split_and_a_gemm_without_bias_allocate_nothing_but_their_output():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((16, 24)).astype(np.float32)
    x = rng.standard_normal(16).astype(np.float32)
    gemv.gemv.plans.clear()
    np.testing.assert_allclose(gemv.gemv(a, x, transpose=True), x @ a, rtol=1e-5, atol=1e-5)
    assert _scratch_steps(gemv.gemv) == []
    b = rng.standard_normal((24, 8)).astype(np.float32)
    gemm.gemm.plans.clear()
    np.testing.assert_allclose(gemm.gemm(a, b), a @ b, rtol=1e-5, atol=1e-5)
    assert _scratch_steps(gemm.gemm) == []
