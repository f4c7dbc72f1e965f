"""The source-level half of the Metal check: column-preserving renames and kernel-signature rules."""

from __future__ import annotations

from iron.codegen.toolchains.msl_source import (check_kernel_signatures, kernel_names, mask_comments_and_literals,
                                                prepare_for_clang)

SOURCE = """kernel void k(device float* a [[buffer(0)]],
              threadgroup float* scratch [[threadgroup(0)]],
              uint i [[thread_position_in_grid]]) {
    threadgroup float tile[64];  // threadgroup in a comment stays
    threadgroup_barrier(mem_flags::mem_threadgroup);
    { threadgroup int nested; }
    threadgroup float* p = tile;
    a[i] = tile[i] + scratch[i];
}
"""


def test_masking_keeps_every_offset():
    text = 'a /* x\ny */ b // c\n"s;t" \'q\''
    masked = mask_comments_and_literals(text)
    assert len(masked) == len(text) and masked.count("\n") == text.count("\n")
    assert "x" not in masked and "s;t" not in masked and masked.split() == ["a", "b"]


def test_renames_only_function_scope_declarations_and_the_attribute():
    out = prepare_for_clang(SOURCE)
    assert len(out) == len(SOURCE)
    assert [len(line) for line in out.splitlines()] == [len(line) for line in SOURCE.splitlines()]
    lines = out.splitlines()
    assert lines[1].startswith("              threadgroup float* scratch [[iron_tg_buf(0)]]")  # parameter kept
    assert lines[3].startswith("    iron_tg_loc float tile[64];  // threadgroup in a comment stays")
    assert "threadgroup_barrier(mem_flags::mem_threadgroup)" in lines[4]
    assert lines[5] == "    { iron_tg_loc int nested; }"
    assert lines[6] == "    iron_tg_loc float* p = tile;"


def test_signature_rules():
    assert check_kernel_signatures(SOURCE) == []
    assert kernel_names(SOURCE) == ["k"]
    bad = SOURCE.replace("device float* a", "float* a").replace("kernel void", "kernel float")
    problems = check_kernel_signatures(bad)
    assert [(p.line, p.message.split(":")[0]) for p in problems] == [(1, "kernel 'k' must return void, not float"),
                                                                     (1, "kernel 'k'")]
    assert "parameter 'a' needs an address space" in problems[1].message


def test_references_and_template_arguments():
    ok = "kernel void k(constant vec<float, 4>& p [[buffer(0)]], device metal::vec<half, 2>* q [[buffer(1)]]) {}"
    assert check_kernel_signatures(ok) == []
    bad = "kernel void k(constant uint& n [[buffer(0)]],\n    thread float& x [[buffer(1)]]) {}"
    (problem,) = check_kernel_signatures(bad)
    assert problem.line == 2 and "'x'" in problem.message
    assert check_kernel_signatures("// kernel void k(float* a) {}\nvoid f(float* a) {}") == []
