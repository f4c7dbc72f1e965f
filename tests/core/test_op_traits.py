"""The opcode table's traits (iron.core.ops.Trait): consistent with the rest of each row, and the one source of
the op groups that the analyses, passes, emitters and the interpreter read."""

from __future__ import annotations

import pytest

from iron.core import ops
from iron.core.ops import OPS, Trait, opcodes_with

EFFECTS = Trait.READS | Trait.WRITES | Trait.FENCE | Trait.ATOMIC | Trait.REDUCTION | Trait.SHUFFLE | Trait.REMOVABLE


@pytest.mark.parametrize("name", sorted(OPS))
def test_an_op_with_effects_is_impure(name):
    info = OPS[name]
    if info.traits & EFFECTS:
        assert not info.pure, f"{name} has {info.traits} but is marked pure (CSE would merge or drop it)"


def test_groups_follow_the_rows():
    assert ops.READ_OPS == opcodes_with(Trait.READS) and "load" in ops.READ_OPS and "store" not in ops.READ_OPS
    assert ops.WRITE_OPS >= {"store", "vstore", "frag_store", "copy_async"} and "load" not in ops.WRITE_OPS
    assert ops.ATOMIC_OPS <= ops.READ_OPS & ops.WRITE_OPS
    assert ops.FRAGMENT_OPS <= ops.WHOLE_GROUP_OPS and "barrier" in ops.WHOLE_GROUP_OPS
    assert ops.FRAGMENT_OPS == {name for name, oi in OPS.items() if oi.category == "fragment"}
    assert not ops.VARYING_INDEX_OPS & ops.UNIFORM_INDEX_OPS
    # The index ops, the role a thread gets from warp_roles (which also sets register budgets: not an index) and
    # the rank of its group in its cluster (cluster_groups, which also declares the clusters).
    assert ops.VARYING_INDEX_OPS | ops.UNIFORM_INDEX_OPS == {n for n, oi in OPS.items() if oi.category == "index"} | {
        "warp_role", "cluster_groups"}
    assert ops.REDUCTION_OPS | ops.SHUFFLE_OPS == {n for n, oi in OPS.items() if oi.category == "subgroup"}
    assert {"barrier", "call", "copy_async_wait", "mma_wg_wait"} <= ops.FENCE_OPS


def test_opcodes_with_requires_every_flag():
    both = opcodes_with(Trait.READS | Trait.WRITES)
    assert both == ops.READ_OPS & ops.WRITE_OPS
    assert "frag_load" not in both and "atomic_cas" in both
