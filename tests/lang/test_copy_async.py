"""copy_async misuse: clear, located errors (its semantics run in the corpus: tests/corpus/memory.py, staged_copy,
on the interpreter, lavapipe and the GPU, and compiled for every target), and its CUDA form."""

import numpy as np
import pytest

from corpus.memory import staged_copy
from iron import In, Tensor, f16, f32, kernel, variants
from iron.codegen.emit import emit_kernel
from iron.codegen.pipeline import PassContext, run_pipeline
from iron.core.errors import IronCompileError
from iron.lang import copy_async, copy_async_commit, copy_async_wait, shared, thread_id


@pytest.mark.parametrize("dt, width, size", [(f32, 1, 4), (f32, 4, 16), (f16, 2, 4), (f16, 8, 16)])
def test_cuda_copies_asynchronously(dt, width, size) -> None:
    host = np.float32 if dt == f32 else np.float16
    k = staged_copy.variant(T=dt, W=width, STAGES=2).lower(np.zeros(8, host), np.zeros(8, host), 8)
    source = emit_kernel(run_pipeline(k, PassContext.for_target("cuda")), "cuda").source
    assert f"cp.async.{'cg' if size == 16 else 'ca'}.shared.global [%0], [%1], {size}, %2;" in source
    assert "cp.async.commit_group;" in source and "cp.async.wait_group 1;" in source
    assert "cp.async.wait_all;" in source
    for target in ("hip", "spirv", "metal"):  # copied at once there
        other = emit_kernel(run_pipeline(k, PassContext.for_target(target)), target).source
        assert "cp.async" not in other and "iron_copy" in other or width == 1


@kernel(variants(WAIT=["none", "one_pending", "all"]))
def two_groups(src: In[f32], out: Tensor[f32]):
    """Each of 8 threads copies src[4t..] into the first half (group 0), then src[32+4t..] into the second
    (group 1), waits as WAIT says and reads its own elements of both halves back."""
    s = shared(f32, 64)
    t = thread_id(0)
    copy_async(s, 4 * t, src, 4 * t, 4)
    copy_async_commit()
    copy_async(s, 32 + 4 * t, src, 32 + 4 * t, 4)
    copy_async_commit()
    if WAIT == "one_pending":
        copy_async_wait(1)
    elif WAIT == "all":
        copy_async_wait()
    for e in range(4):
        out[4 * t + e] = s[4 * t + e]
        out[32 + 4 * t + e] = s[32 + 4 * t + e]
    copy_async_wait()


@pytest.mark.parametrize("wait, landed", [("none", (False, False)), ("one_pending", (True, False)),
                                          ("all", (True, True))])
def test_the_interpreter_lands_copies_only_at_their_wait(wait, landed) -> None:
    """A read before the covering wait sees the old contents (zeros), so a missing wait fails a test here."""
    src = np.arange(1, 65, dtype=np.float32)
    out = np.full(64, -1, np.float32)
    two_groups.variant(WAIT=wait).launch(src, out, grid=(8,), group=(8,), backend="interp")
    for half, done in zip((slice(0, 32), slice(32, 64)), landed):
        np.testing.assert_array_equal(out[half], src[half] if done else 0)


@kernel
def into_global(a: In[f32], out: Tensor[f32]):
    copy_async(out, 0, a, 0, 4)


@kernel
def from_shared(out: Tensor[f32]):
    s = shared(f32, 8)
    t = shared(f32, 8)
    copy_async(s, 0, t, 0, 4)
    copy_async_wait()
    out[thread_id(0)] = s[0]


@kernel
def mixed_dtypes(a: In[f16], out: Tensor[f32]):
    s = shared(f32, 8)
    copy_async(s, 0, a, 0, 4)


@kernel
def three_bytes(a: In[f16], out: Tensor[f16]):
    s = shared(f16, 8)
    copy_async(s, 0, a, 0, 3)


@kernel
def too_many_pending(a: In[f32], out: Tensor[f32]):
    copy_async_wait(8)


@pytest.mark.parametrize("k, message", [
    (into_global, "copies into a shared array; 'out' is a tensor argument"),
    (from_shared, "copies from a tensor argument; 't' is a shared array"),
    (mixed_dtypes, "from f16 into f32: the dtypes must match"),
    (three_bytes, "moves 4, 8 or 16 bytes; 3 x f16 is 6"),
    (too_many_pending, "leaves 0 to 7 committed groups pending, got 8"),
])
def test_misuse_is_a_located_error(k, message) -> None:
    with pytest.raises(IronCompileError, match=message) as info:
        k.ir()
    assert "test_copy_async.py" in str(info.value)
