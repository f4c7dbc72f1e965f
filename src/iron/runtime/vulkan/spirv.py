"""The little of a SPIR-V binary the device reads or writes itself.

GLSL always names its entry point ``main`` whatever the kernel is called,
so the name given to the pipeline comes from the module, not from the ABI.
GLSL cannot ask for IEEE signed zeros, infinities and NaNs either (the
``SignedZeroInfNanPreserve`` execution mode of float controls, core in
SPIR-V 1.4): without it Vulkan lets a driver assume none occur (lavapipe
turns ``atan(NaN)`` into 0), so :func:`preserve_ieee` adds it to a module
for the float widths the device supports, when the pipeline is created,
with ``DenormPreserve`` beside it where the device offers it: without that
mode a driver may flush subnormal operands and results to zero (NVIDIA's
does), where the IR keeps them.
"""

from __future__ import annotations

import struct

from .errors import VulkanError

MAGIC = 0x07230203
_OP_EXTENSION = 10
_OP_ENTRY_POINT = 15
_OP_EXECUTION_MODE = 16
_OP_CAPABILITY = 17
_GL_COMPUTE = 5
_HEADER_WORDS = 5
_CAP_FLOAT16 = 9
_CAP_FLOAT64 = 10
_CAP_SIGNED_ZERO_INF_NAN_PRESERVE = 4466
_MODE_SIGNED_ZERO_INF_NAN_PRESERVE = 4461
_CAP_DENORM_PRESERVE = 4464
_MODE_DENORM_PRESERVE = 4459
#: ``denormBehaviorIndependence`` -> the groups of widths whose denormal mode must be the same
#: (VUID-RuntimeSpirv-denormBehaviorIndependence-06289 / -06290; a width without a mode counts as another mode).
DENORM_GROUPS: dict[str, tuple[tuple[int, ...], ...]] = {
    "all": ((16,), (32,), (64,)), "32-bit only": ((32,), (16, 64)), "none": ((16, 32, 64),)}
_FLOAT_CONTROLS_CORE = 0x00010400  # SPIR-V 1.4


def _words(spirv: bytes) -> tuple[int, ...]:
    if len(spirv) % 4 or len(spirv) < 4 * _HEADER_WORDS:
        raise VulkanError(f"not a SPIR-V module: {len(spirv)} bytes (a module is a whole number of 32-bit words)")
    words = struct.unpack(f"<{len(spirv) // 4}I", spirv)
    if words[0] != MAGIC:
        raise VulkanError(f"not a SPIR-V module: starts with 0x{words[0]:08x}, not the magic 0x{MAGIC:08x}")
    return words


def _instructions(words: tuple[int, ...]) -> list[tuple[int, tuple[int, ...]]]:
    """(opcode, the instruction's words) in module order."""
    out = []
    i = _HEADER_WORDS
    while i < len(words):
        count, opcode = words[i] >> 16, words[i] & 0xFFFF
        if count == 0 or i + count > len(words):
            raise VulkanError(f"malformed SPIR-V module: an instruction at word {i} has {count} words")
        out.append((opcode, words[i:i + count]))
        i += count
    return out


def _string_words(text: str) -> list[int]:
    data = text.encode() + b"\0"
    data += b"\0" * (-len(data) % 4)
    return list(struct.unpack(f"<{len(data) // 4}I", data))


def denorm_preserve_widths(used: set[int], supported: tuple[int, ...], independence: str) -> tuple[int, ...]:
    """The widths a module computing in ``used`` asks ``DenormPreserve`` for on a device that supports it for
    ``supported`` with ``denormBehaviorIndependence`` ``independence`` (:data:`DENORM_GROUPS`): every width of a
    group the module uses, when the device supports the mode for the whole group (a group that must share one
    mode gets it for all its widths, used or not), else none of the group."""
    out: list[int] = []
    for group in DENORM_GROUPS[independence]:
        if used & set(group) and set(group) <= set(supported):
            out += group if len(group) > 1 else [w for w in group if w in used]
    return tuple(sorted(out))


def preserve_ieee(spirv: bytes, widths: tuple[int, ...], denorm_widths: tuple[int, ...] = (),
                  denorm_independence: str = "all") -> bytes:
    """``spirv`` with ``SignedZeroInfNanPreserve`` on every entry point for each float width in ``widths``
    (the device's ``shaderSignedZeroInfNanPreserveFloat{16,32,64}``) that the module computes in: 32
    always, 16 and 64 where it declares ``Float16`` / ``Float64``; and ``DenormPreserve`` for the widths
    :func:`denorm_preserve_widths` picks from ``denorm_widths`` (``shaderDenormPreserveFloat{16,32,64}``) under
    ``denorm_independence``.  Modes already requested are kept; before SPIR-V 1.4 the module also gets
    ``SPV_KHR_float_controls``.  Unchanged when nothing is added.
    """
    words = _words(spirv)
    instructions = _instructions(words)
    caps = {ins[1] for op, ins in instructions if op == _OP_CAPABILITY}
    used = {32} | {16 for c in caps if c == _CAP_FLOAT16} | {64 for c in caps if c == _CAP_FLOAT64}
    entries = [ins[2] for op, ins in instructions if op == _OP_ENTRY_POINT]
    have = {(ins[1], ins[2], ins[3]) for op, ins in instructions if op == _OP_EXECUTION_MODE and len(ins) == 4}
    wanted = [(_MODE_SIGNED_ZERO_INF_NAN_PRESERVE, _CAP_SIGNED_ZERO_INF_NAN_PRESERVE, sorted(used & set(widths))),
              (_MODE_DENORM_PRESERVE, _CAP_DENORM_PRESERVE,
               denorm_preserve_widths(used, denorm_widths, denorm_independence))]
    modes = [(e, mode, w) for mode, _, ws in wanted for e in entries for w in ws if (e, mode, w) not in have]
    if not modes:
        return spirv
    caps_added: list[int] = []
    for mode, cap, _ in wanted:
        if cap not in caps and any(m == mode for _, m, _ in modes):
            caps_added += [(2 << 16) | _OP_CAPABILITY, cap]
    extensions = {struct.pack(f"<{len(ins) - 1}I", *ins[1:]).split(b"\0", 1)[0].decode()
                  for op, ins in instructions if op == _OP_EXTENSION}
    extension: list[int] = []
    if words[1] < _FLOAT_CONTROLS_CORE and "SPV_KHR_float_controls" not in extensions:
        name = _string_words("SPV_KHR_float_controls")
        extension = [((1 + len(name)) << 16) | _OP_EXTENSION, *name]
    out = list(words[:_HEADER_WORDS]) + caps_added  # capabilities open the module, extensions follow them
    last_capability = max((k for k, (op, _) in enumerate(instructions) if op == _OP_CAPABILITY), default=-1)
    last_entry = max(k for k, (op, _) in enumerate(instructions) if op == _OP_ENTRY_POINT)
    if last_capability < 0:
        out += extension
    for k, (_, ins) in enumerate(instructions):
        out += ins
        if k == last_capability:
            out += extension
        if k == last_entry:  # execution modes follow the entry points
            for entry, mode, width in modes:
                out += [(4 << 16) | _OP_EXECUTION_MODE, entry, mode, width]
    return struct.pack(f"<{len(out)}I", *out)


def compute_entry_point(spirv: bytes) -> str:
    """The name of the module's GLCompute entry point; VulkanError when there is none or it is not SPIR-V."""
    words = _words(spirv)
    i = _HEADER_WORDS
    while i < len(words):
        count, opcode = words[i] >> 16, words[i] & 0xFFFF
        if count == 0:
            break
        if opcode == _OP_ENTRY_POINT and words[i + 1] == _GL_COMPUTE:
            name = struct.pack(f"<{count - 3}I", *words[i + 3:i + count])
            return name.split(b"\0", 1)[0].decode("utf-8")
        i += count
    raise VulkanError("the SPIR-V module has no compute (GLCompute) entry point")
