"""AMD matrix units on HIP: MFMA (CDNA, wave64) and WMMA (RDNA3, wave32) through clang's builtins.

Three kinds of evidence:

* the emitted source: which fragment types the unit holds, one builtin per ``mma``, no scratch,
  and the portable path wherever the unit does not run the multiply (other shapes, f32 operands,
  a fragment type shared with a multiply the unit cannot do);
* the emitted code run on the CPU: the load/store index expressions and the operand packing are
  taken out of the emitted source and executed lane by lane, with the instruction modelled from
  AMD's own register formulas (test_mma_layouts.py, written independently of iron.codegen.mma);
  the result must be the matmul numpy computes from memory, and a layout mutated in mma.py must
  make it wrong;
* the real compiler (ROCm 5.2 clang): code objects for gfx90a, gfx940 and gfx1100 contain the
  ``v_mfma`` / ``v_wmma`` instructions and no LDS, gfx1030 stays portable, mixed kernels keep
  exactly the portable multiply's scratch, and every arch-dependent corpus kernel compiles for gfx1100.
"""

from __future__ import annotations

import dataclasses
import re

import ml_dtypes
import numpy as np
import pytest
from corpus import binding_label, case_named
from emit_testing import corpus_points, has_fragments, optimized, pinned_context
from test_mma_layouts import mfma_16x16x16, wmma_16x16x16

from iron import In, T, Tensor, bf16, config, f16, f32, kernel, variants
from iron.codegen import mma
from iron.codegen.emit import emit_kernel
from iron.codegen.emit.fragments import native_fragment_types, scratch_floats_per_subgroup, scratch_subgroups
from iron.codegen.mma import BitFieldLayout
from iron.codegen.pipeline import run_pipeline
from iron.codegen.targets import profile
from iron.lang import frag_a, frag_acc, frag_b, frag_load_acc, frag_store, simd_group_id, static_range
from iron.lang import mma as mma_op
from iron.runtime.interp.fragments import fragment_strategy

#: (arch, strategy, instruction mnemonics in llvm-objdump-15's spelling for f16 and bf16, wave width)
UNITS = [
    ("gfx90a", "amd_mfma_gfx90a", ("v_mfma_f32_16x16x16f16", "v_mfma_f32_16x16x16bf16_1k"), 64),
    ("gfx940", "amd_mfma_gfx90a", ("v_mfma_f32_16x16x16f16", "v_mfma_f32_16x16x16_bf16"), 64),  # CDNA3 spelling
    ("gfx1100", "amd_wmma_rdna3", ("v_wmma_f32_16x16x16_f16", "v_wmma_f32_16x16x16_bf16"), 32),
]
BUILTINS = {"amd_mfma_gfx90a": ("__builtin_amdgcn_mfma_f32_16x16x16f16", "__builtin_amdgcn_mfma_f32_16x16x16bf16_1k"),
            "amd_wmma_rdna3": ("__builtin_amdgcn_wmma_f32_16x16x16_f16_w32",
                               "__builtin_amdgcn_wmma_f32_16x16x16_bf16_w32")}
FORMULAS = {"amd_mfma_gfx90a": mfma_16x16x16, "amd_wmma_rdna3": wmma_16x16x16}
DTYPES = {f16: np.float16, bf16: ml_dtypes.bfloat16, f32: np.float32}

# ---------------------------------------------------------------- kernels

# One 16x16 tile of (32 x 48) @ (48 x 32) at tile (1, 1), K in three unrolled steps, B stored transposed
# (read column-major), the accumulator loaded from and stored to a 32 x 32 matrix: every index has a base
# and a leading dimension that are not the fragment's own.
M_ALL, K_ALL, N_ALL = 32, 48, 32
A_BASE, C_BASE = 16 * K_ALL, 16 * N_ALL + 16


@kernel(variants(T=[f16, bf16, f32]))
def tile16(a: In[T], bt: In[T], c0: In[f32], c: Tensor[f32]):
    if simd_group_id() == 0:
        acc = frag_load_acc(c0, 16 * 32 + 16, 32, 16, 16)
        for kk in static_range(3):
            fa = frag_a(a, 16 * 48 + kk * 16, 48, 16, 16)
            fb = frag_b(bt, 16 * 48 + kk * 16, 48, 16, 16, layout="col")
            acc = mma_op(fa, fb, acc)
        frag_store(c, 16 * 32 + 16, 32, acc)


@kernel
def mixed_units(a: In[f16], b: In[f16], x: In[f32], c: Tensor[f32], d: Tensor[f32]):
    """A 16x16x16 f16 multiply (the matrix unit's) beside an 8x8x8 f32 one (portable)."""
    if simd_group_id() == 0:
        frag_store(c, 0, 16, mma_op(frag_a(a, 0, 16, 16, 16), frag_b(b, 0, 16, 16, 16), frag_acc(f32, 16, 16)))
        frag_store(d, 0, 8, mma_op(frag_a(x, 0, 8, 8, 8), frag_b(x, 64, 8, 8, 8), frag_acc(f32, 8, 8)))


@kernel
def shared_a_type(a: In[f16], b: In[f16], c: Tensor[f32], h: Tensor[f16]):
    """One ``a`` type in an f32-accumulator multiply (unit) and an f16-accumulator one (not): all portable."""
    fa = frag_a(a, 0, 16, 16, 16)
    fb = frag_b(b, 0, 16, 16, 16)
    frag_store(c, 0, 16, mma_op(fa, fb, frag_acc(f32, 16, 16)))
    frag_store(h, 0, 16, mma_op(fa, fb, frag_acc(f16, 16, 16)))


def _tile16_inputs(dtype, rng):
    npdt = DTYPES[dtype]
    a = rng.standard_normal(M_ALL * K_ALL).astype(npdt)
    bt = rng.standard_normal(N_ALL * K_ALL).astype(npdt)
    c0 = rng.standard_normal(M_ALL * N_ALL).astype(np.float32)
    return a, bt, c0, np.zeros(M_ALL * N_ALL, np.float32)


def _lower(k, *args, target: str = "hip"):
    return run_pipeline(k.lower(*args), pinned_context(target))


def _tile16_ir(dtype):
    return _lower(tile16.variant(T=dtype), *_tile16_inputs(dtype, np.random.default_rng(0)))


def _mixed_ir():
    return _lower(mixed_units, np.zeros(256, np.float16), np.zeros(256, np.float16), np.zeros(128, np.float32),
                  np.zeros(256, np.float32), np.zeros(64, np.float32))


# ---------------------------------------------------------------- emitted source

@pytest.mark.parametrize("dtype", [f16, bf16], ids=str)
@pytest.mark.parametrize("arch,strategy,mnemonics,wave", UNITS, ids=[u[0] for u in UNITS])
def test_the_unit_holds_every_fragment_and_needs_no_scratch(arch, strategy, mnemonics, wave, dtype):
    k = _tile16_ir(dtype)
    prof = profile("hip", arch)
    assert prof.mma_strategy == strategy and prof.lane_width == wave
    native = native_fragment_types(k, prof)
    assert {(t.role, t.rows, t.cols, t.dtype) for t in native} == \
        {("a", 16, 16, dtype), ("b", 16, 16, dtype), ("acc", 16, 16, f32)}
    assert scratch_subgroups(k, prof, 0) == 0
    source = emit_kernel(k, "hip", prof).source
    builtin = BUILTINS[strategy][dtype == bf16]
    assert source.count(f"{builtin}(") == 3  # one per mma, nothing else multiplies
    assert "mma_scratch" not in source and "wave_barrier" not in source and "fmaf" not in source
    slots = {"amd_mfma_gfx90a": (4, 4), "amd_wmma_rdna3": (16, 8)}[strategy]
    assert f"typedef {'short' if dtype == bf16 else '_Float16'} iron_{dtype.name}x{slots[0]} " in source
    assert f"typedef float iron_f32x{slots[1]} " in source


def test_gfx1030_has_no_matrix_unit_and_stays_portable():
    k = _tile16_ir(f16)
    prof = profile("hip", "gfx1030")
    assert native_fragment_types(k, prof) == frozenset()
    source = emit_kernel(k, "hip", prof).source
    assert "__builtin_amdgcn_mfma" not in source and "__builtin_amdgcn_wmma" not in source
    assert "mma_scratch" in source and "__builtin_amdgcn_wave_barrier();" in source


@pytest.mark.parametrize("case_name,binding", [("mma_16x8x16", {"T": f16, "KT": 2}), ("mma_8x8x8", {"T": f16}),
                                               ("mma_16x8x16", {"T": f32, "KT": 2})])
@pytest.mark.parametrize("arch", ["gfx90a", "gfx1100"])
def test_shapes_and_dtypes_the_unit_does_not_run_stay_portable(case_name, binding, arch):
    k = optimized(case_name, binding, "hip")
    assert native_fragment_types(k, profile("hip", arch)) == frozenset()
    source = emit_kernel(k, "hip", profile("hip", arch)).source
    assert "__builtin_amdgcn_mfma" not in source and "__builtin_amdgcn_wmma" not in source
    assert "mma_scratch" in source


@pytest.mark.parametrize("arch", ["gfx90a", "gfx1100"])
def test_f32_operands_at_16x16x16_stay_portable(arch):
    k = _tile16_ir(f32)
    assert native_fragment_types(k, profile("hip", arch)) == frozenset()
    source = emit_kernel(k, "hip", profile("hip", arch)).source
    assert "__builtin_amdgcn_mfma" not in source and "__builtin_amdgcn_wmma" not in source


def test_a_type_shared_with_a_multiply_the_unit_cannot_do_keeps_everything_portable():
    k = _lower(shared_a_type, np.zeros(256, np.float16), np.zeros(256, np.float16), np.zeros(256, np.float32),
               np.zeros(256, np.float16))
    for arch in ("gfx90a", "gfx1100"):
        assert native_fragment_types(k, profile("hip", arch)) == frozenset()
        source = emit_kernel(k, "hip", profile("hip", arch)).source
        assert "__builtin_amdgcn_mfma" not in source and "__builtin_amdgcn_wmma" not in source
        assert source.count("through the subgroup's scratch") == 2


@pytest.mark.parametrize("arch", ["gfx90a", "gfx1100"])
def test_a_mixed_kernel_keeps_scratch_for_its_portable_multiply_only(arch):
    k = _mixed_ir()
    prof = profile("hip", arch)
    assert {(t.rows, t.cols) for t in native_fragment_types(k, prof)} == {(16, 16)}
    assert scratch_floats_per_subgroup(k, native_fragment_types(k, prof)) == 8 * 8 + 8 * 8
    source = emit_kernel(k, "hip", prof).source
    assert source.count("__builtin_amdgcn_" + ("mfma" if arch == "gfx90a" else "wmma")) == 1
    assert "mma 8x8x8: a and b through the subgroup's scratch" in source
    assert "mma 16x16x16" not in source


# ---------------------------------------------------------------- the emitted code, run on the CPU

_PER_ELEMENT = re.compile(
    r"const int (?P<lane>\w+) = \(int\)\(iron_thread_index\(\) % (?P<width>\d+)u\);\n"
    r"(?:\s*#pragma unroll \d+\n)?"  # the registers' loop is unrolled (a fragment stays in registers)
    r"\s*for \(int (?P<reg>\w+) = 0; (?P=reg) < (?P<count>\d+); \+\+(?P=reg)\) \{\n\s*(?P<body>[^\n]*)\n")
_NATIVE = re.compile(r"\{  // (?P<instruction>v_\w+): register slot i.*?\n(?P<body>.*?)\n\s*\}\n", re.DOTALL)


def _access(text: str, tensors: set[str]) -> tuple[str, str]:
    """The first ``tensor[index]`` in ``text`` naming one of ``tensors``: (tensor, index expression)."""
    m = re.search(r"\b(" + "|".join(sorted(tensors)) + r")\[", text)
    assert m, f"no tensor access in {text!r}"
    depth, start = 1, m.end()
    for i in range(start, len(text)):
        depth += {"[": 1, "]": -1}.get(text[i], 0)
        if depth == 0:
            return m.group(1), text[start:i]
    raise AssertionError(f"unbalanced brackets in {text!r}")


def _index(expr: str, lane_var: str, reg_var: str, lane: int, reg: int) -> int:
    """A C integer expression of the lane and register (non-negative, so ``/`` is floor division)."""
    return eval(expr.replace("/", "//"), {}, {lane_var: lane, reg_var: reg})


def _unit(formula, lanes: int, a, b, c) -> np.ndarray:
    """The instruction, from AMD's formulas: gather A, B, C by (lane, item), D = A @ B + C, scatter D."""
    mats = {}
    for role, regs in (("a", a), ("b", b), ("acc", c)):
        m = np.full((16, 16), np.nan)
        for lane in range(lanes):
            for i in range(regs.shape[1]):
                r, col = formula(role, lane, i)
                assert np.isnan(m[r, col]) or m[r, col] == regs[lane, i], \
                    f"lanes holding {role}[{r}][{col}] disagree (WMMA needs lanes 16-31 to repeat 0-15)"
                m[r, col] = regs[lane, i]
        assert not np.isnan(m).any(), f"{role}: some element is held by no (lane, item)"
        mats[role] = m
    d = mats["a"] @ mats["b"] + mats["acc"]
    return np.array([[d[formula("acc", lane, i)] for i in range(c.shape[1])] for lane in range(lanes)])


def _simulate(source: str, memory: dict[str, np.ndarray], strategy: str, lanes: int,
              check_registers=None) -> None:
    """Run the emitted per-lane loads, native multiplies and stores of ``source`` on ``memory`` (in place).

    Blocks run in source order (the kernel is straight-line inside its subgroup condition).
    ``check_registers(name, tensor, index_of)`` may inspect each loaded register array.
    """
    registers: dict[str, np.ndarray] = {}
    blocks = sorted([(m.start(), "lanes", m) for m in _PER_ELEMENT.finditer(source)] +
                    [(m.start(), "native", m) for m in _NATIVE.finditer(source)], key=lambda x: x[0])
    assert blocks
    for _, kind, m in blocks:
        if kind == "native":
            body = m.group("body")
            vectors = {}
            for name in ("a", "b", "c"):
                init = re.search(rf"iron_mma_{name} = \{{(.*?)\}};", body, re.DOTALL).group(1)
                items = re.findall(r"(\w+)\[(\d+)\]", init)
                vectors[name] = np.stack([registers[arr][:, int(i)] for arr, i in items], axis=1)
            d = _unit(FORMULAS[strategy], lanes, vectors["a"], vectors["b"], vectors["c"])
            outs = re.findall(r"(\w+)\[(\d+)\] = iron_mma_d\[(\d+)\];", body)
            assert [int(i) for _, i, _ in outs] == [int(j) for _, _, j in outs] == list(range(d.shape[1]))
            registers[outs[0][0]] = d
            continue
        lane_var, reg_var, count = m.group("lane"), m.group("reg"), int(m.group("count"))
        assert int(m.group("width")) == lanes
        body = m.group("body")
        dst = re.match(rf"(\w+)\[{reg_var}\] = (.*);$", body)
        if dst:  # a load: register <- tensor
            tensor, expr = _access(dst.group(2), set(memory))
            index_of = np.array([[_index(expr, lane_var, reg_var, lane, r) for r in range(count)]
                                 for lane in range(lanes)])
            registers[dst.group(1)] = memory[tensor][index_of].astype(np.float64)
            if check_registers:
                check_registers(dst.group(1), tensor, index_of)
        else:  # a store: tensor <- register
            tensor, expr = _access(body.split(" = ")[0], set(memory))
            src = re.search(rf"(\w+)\[{reg_var}\]", body.split(" = ", 1)[1]).group(1)
            for lane in range(lanes):
                for r in range(count):
                    memory[tensor][_index(expr, lane_var, reg_var, lane, r)] = registers[src][lane, r]


def _tile16_expected(a, bt, c0) -> np.ndarray:
    """The same arithmetic, from memory: c0 tile + the three K steps in order, in float64."""
    a64 = a.astype(np.float64).reshape(M_ALL, K_ALL)[16:32]
    b64 = bt.astype(np.float64).reshape(N_ALL, K_ALL)[16:32].T  # (K, 16)
    want = c0.astype(np.float64).reshape(M_ALL, N_ALL)[16:32, 16:32]
    for kk in range(3):
        want = a64[:, 16 * kk:16 * kk + 16] @ b64[16 * kk:16 * kk + 16] + want
    return want


def _run_emitted_tile16(arch: str, dtype, seed: int, check_registers=None) -> tuple[np.ndarray, np.ndarray]:
    prof = profile("hip", arch)
    a, bt, c0, _ = _tile16_inputs(dtype, np.random.default_rng(seed))
    source = emit_kernel(_tile16_ir(dtype), "hip", prof).source
    out = np.full(M_ALL * N_ALL, -7.0)
    memory = {"a": a.astype(np.float64), "bt": bt.astype(np.float64), "c0": c0.astype(np.float64), "c": out}
    _simulate(source, memory, prof.mma_strategy, prof.lane_width, check_registers)
    return out.reshape(M_ALL, N_ALL), _tile16_expected(a, bt, c0)


@pytest.mark.parametrize("dtype", [f16, bf16], ids=str)
@pytest.mark.parametrize("arch", ["gfx90a", "gfx1100"])
def test_the_emitted_code_computes_the_matmul_on_the_cpu(arch, dtype, seed):
    got, want = _run_emitted_tile16(arch, dtype, seed.value)
    assert np.array_equal(got[16:32, 16:32], want), seed
    untouched = np.ones((M_ALL, N_ALL), bool)
    untouched[16:32, 16:32] = False
    assert (got[untouched] == -7.0).all()  # nothing outside the tile is written


@pytest.mark.parametrize("dtype", [f16, bf16], ids=str)
@pytest.mark.parametrize("arch", ["gfx90a", "gfx1100"])
def test_the_interpreter_holding_the_units_layout_agrees_with_the_emitted_code(arch, dtype, seed):
    """The interpreter, fragments placed per lane by the unit's layout, against the CPU run of the emitted code."""
    prof = profile("hip", arch)
    config.set_option("simd_width", prof.lane_width)
    config.set_option("interp_fragment_layout", prof.mma_strategy)
    a, bt, c0, c = _tile16_inputs(dtype, np.random.default_rng(seed.value))
    c[:] = -7.0
    tile16.variant(T=dtype).launch(a, bt, c0, c, grid=(prof.lane_width,), group=(prof.lane_width,), backend="interp")
    emitted, want = _run_emitted_tile16(arch, dtype, seed.value)
    got = c.reshape(M_ALL, N_ALL).astype(np.float64)
    a64 = np.abs(a.astype(np.float64).reshape(M_ALL, K_ALL)[16:32])
    b64 = np.abs(bt.astype(np.float64).reshape(N_ALL, K_ALL)[16:32].T)
    bound = (np.abs(c0.reshape(M_ALL, N_ALL)[16:32, 16:32]) + a64 @ b64) * np.finfo(np.float32).eps * (K_ALL + 1)
    assert np.all(np.abs(got[16:32, 16:32] - emitted[16:32, 16:32]) <= bound), seed  # f32 sums vs exact ones
    assert np.array_equal(got == -7.0, emitted == -7.0)  # the same elements written


@pytest.mark.parametrize("arch", ["gfx90a", "gfx1100"])
def test_emitted_loads_place_elements_as_the_interpreters_layout_does(arch):
    """Every register the emitted code loads holds the element the interpreter's fragment_layout puts there."""
    prof = profile("hip", arch)
    interp = fragment_strategy(prof.mma_strategy, prof.lane_width)
    seen = []

    def check(name: str, tensor: str, index_of: np.ndarray) -> None:
        role, base, ld, col_major, k_steps = {"a": ("a", A_BASE, K_ALL, False, (0, 16, 32)),
                                              "bt": ("b", A_BASE, K_ALL, True, (0, 16, 32)),
                                              "c0": ("acc", C_BASE, N_ALL, False, (0,))}[tensor]
        table = interp.fragment_layout(role, 16, 16, f32 if role == "acc" else f16, prof.lane_width).to_table()
        rows, cols = table[..., 0], table[..., 1]
        major, minor = (cols, rows) if col_major else (rows, cols)
        k_offset = index_of - (base + major * ld + minor)  # (lanes, registers): the K step's column offset
        assert (k_offset == k_offset.flat[0]).all() and int(k_offset.flat[0]) in k_steps, f"{name} from {tensor}"
        seen.append(role)

    _run_emitted_tile16(arch, f16, 3, check)
    assert sorted(set(seen)) == ["a", "acc", "b"] and len(seen) == 7


def test_wmma_operand_loads_repeat_lanes_0_to_15_in_16_to_31():
    loads = []
    _run_emitted_tile16("gfx1100", f16, 5, lambda name, tensor, index_of: loads.append((tensor, index_of)))
    for tensor, index_of in loads:
        if tensor in ("a", "bt"):
            assert (index_of[:16] == index_of[16:]).all()
        else:  # the accumulator is not replicated: 32 lanes x 8 registers are 256 distinct elements
            assert len(set(index_of.flat)) == 256


@pytest.mark.parametrize("strategy,arch", [("amd_mfma_gfx90a", "gfx90a"), ("amd_wmma_rdna3", "gfx1100")])
def test_a_wrong_layout_in_mma_py_is_caught_by_the_cpu_run(strategy, arch, monkeypatch):
    """Mutation: swap two register bits of the accumulator layout; the emitted code then stores a permuted tile."""
    unit = mma.get_strategy(strategy)
    rules = []
    for rule in unit.layouts:
        if rule.role == "acc":
            lay = rule.layout
            assert isinstance(lay, BitFieldLayout)
            rows = tuple({"r0": "r1", "r1": "r0"}.get(bit, bit) for bit in lay.row_bits)
            rule = dataclasses.replace(rule, layout=dataclasses.replace(lay, row_bits=rows))
        rules.append(rule)
    monkeypatch.setitem(mma.STRATEGIES, strategy, dataclasses.replace(unit, layouts=tuple(rules)))
    got, want = _run_emitted_tile16(arch, f16, 1)
    assert not np.array_equal(got[16:32, 16:32], want)


# ---------------------------------------------------------------- the real compiler

def _compile(source: str, arch: str):
    from iron.codegen.toolchains import hip

    art = hip.compile_hip(source, arch=arch)
    return art, hip.disassemble(art.binary, arch)


@pytest.mark.parametrize("dtype", [f16, bf16], ids=str)
@pytest.mark.parametrize("arch,strategy,mnemonics,wave", UNITS, ids=[u[0] for u in UNITS])
def test_code_object_runs_the_matrix_unit_without_lds(arch, strategy, mnemonics, wave, dtype, require_toolchain):
    require_toolchain("hip")
    art, text = _compile(emit_kernel(_tile16_ir(dtype), "hip", profile("hip", arch)).source, arch)
    mnemonic = mnemonics[dtype == bf16]
    assert len(re.findall(rf"^\s*{mnemonic}\s", text, re.MULTILINE)) == 3, text
    (kern,) = art.report["kernels"].values()
    assert kern["lds_bytes"] == 0 and kern["wavefront_size"] == wave and art.report["spills"] == 0
    assert not re.search(r"^\s*ds_(read|write|load|store)", text, re.MULTILINE)
    if arch == "gfx1100":  # ROCm 5.2 has no gfx11 device library: hip.py adds the ISA-version constant
        assert art.report["device_libs"].endswith("oclc_isa_version_1100 (11000)")


def test_gfx1030_code_object_has_no_matrix_instruction(require_toolchain):
    require_toolchain("hip")
    art, text = _compile(emit_kernel(_tile16_ir(bf16), "hip", profile("hip", "gfx1030")).source, "gfx1030")
    assert "v_mfma" not in text and "v_wmma" not in text
    (kern,) = art.report["kernels"].values()
    assert kern["lds_bytes"] > 0  # the portable multiply's scratch


@pytest.mark.parametrize("arch,wave", [("gfx90a", 64), ("gfx1100", 32)])
def test_mixed_kernel_compiles_with_the_unit_and_the_portable_scratch(arch, wave, require_toolchain):
    require_toolchain("hip")
    k = _mixed_ir()
    prof = profile("hip", arch)
    art, text = _compile(emit_kernel(k, "hip", prof).source, arch)
    assert len(re.findall(r"^\s*v_(mfma|wmma)_f32_16x16x16_?f16\s", text, re.MULTILINE)) == 1
    (kern,) = art.report["kernels"].values()
    subgroups = scratch_subgroups(k, prof, 0)
    assert subgroups == 1024 // wave
    assert kern["lds_bytes"] == subgroups * (8 * 8 + 8 * 8) * 4  # the 8x8x8 scratch, nothing for 16x16x16


def _arch_dependent_points():
    return [(name, binding) for name, binding in corpus_points()
            if case_named(name).subgroup or has_fragments(optimized(name, binding, "hip"))]


@pytest.mark.parametrize("case_name,binding", _arch_dependent_points(),
                         ids=[f"{n}[{binding_label(b)}]" for n, b in _arch_dependent_points()])
def test_arch_dependent_corpus_kernels_compile_for_gfx1100(case_name, binding, require_toolchain):
    require_toolchain("hip")
    from iron.codegen.toolchains import hip

    em = emit_kernel(optimized(case_name, binding, "hip"), "hip", profile("hip", "gfx1100"))
    art = hip.compile_hip(em.source, arch="gfx1100")
    assert all(k["wavefront_size"] == 32 for k in art.report["kernels"].values())
