"""The kernel corpus: DSL kernels with independent oracles, shared by the cross-cutting suites.

``CASES`` lists every :class:`~corpus.case.CorpusCase`; ``case_named`` finds
one.  The kernels live in topic modules (elementwise, mathfuncs, memory,
loops, reductions, subgroups, atomics, fragments, composition) and are
written with the public DSL only, exactly as a user would write them.
"""

from . import atomics, composition, elementwise, fragments, loops, mathfuncs, memory, reductions, subgroups
from .case import CorpusCase, Depth, Expect, Run, Tolerance, binding_label

CASES: list[CorpusCase] = [
    *elementwise.CASES, *mathfuncs.CASES, *memory.CASES, *loops.CASES, *reductions.CASES, *subgroups.CASES, *atomics.CASES,
    *fragments.CASES, *composition.CASES,
]

_BY_NAME = {c.name: c for c in CASES}
assert len(_BY_NAME) == len(CASES), "corpus case names must be unique"


def case_named(name: str) -> CorpusCase:
    return _BY_NAME[name]


__all__ = ["CASES", "CorpusCase", "Depth", "Expect", "Run", "Tolerance", "binding_label", "case_named"]
