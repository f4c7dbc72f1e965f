"""The launch-time aliasing rule: tensors are one buffer or disjoint when the kernel writes one of them."""

import numpy as np
import pytest

from iron import In, Tensor, f32, kernel
from iron.core.errors import LaunchError
from iron.lang import program_id


@kernel
def shift_add(a: In[f32], out: Tensor[f32]):
    i = program_id(0)
    out[i] = a[i] + 1.0


@kernel
def read_two(a: In[f32], b: In[f32], out: Tensor[f32]):
    i = program_id(0)
    out[i] = a[i] + b[i]


def test_the_same_buffer_twice_is_an_in_place_launch():
    x = np.arange(8, dtype=np.float32)
    shift_add[8](x, x)
    assert np.array_equal(x, np.arange(8, dtype=np.float32) + 1)


def test_partial_overlap_with_a_written_tensor_is_rejected_before_running():
    x = np.arange(9, dtype=np.float32)
    before = x.copy()
    with pytest.raises(LaunchError, match="'a' and 'out' overlap without being the same buffer"):
        shift_add[8](x[1:], x[:-1])
    assert np.array_equal(x, before), "nothing may be written by a rejected launch"


def test_overlapping_read_only_tensors_are_fine():
    x = np.arange(9, dtype=np.float32)
    out = np.zeros(8, np.float32)
    read_two[8](x[1:], x[:-1], out)
    assert np.array_equal(out, x[1:] + x[:-1])
