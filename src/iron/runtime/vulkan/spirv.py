"""The little of a SPIR-V binary the device reads itself: that it is one, and its compute entry point.

GLSL always names its entry point ``main`` whatever the kernel is called,
so the name given to the pipeline comes from the module, not from the ABI.
"""

from __future__ import annotations

import struct

from .errors import VulkanError

MAGIC = 0x07230203
_OP_ENTRY_POINT = 15
_GL_COMPUTE = 5
_HEADER_WORDS = 5


def compute_entry_point(spirv: bytes) -> str:
    """The name of the module's GLCompute entry point; VulkanError when there is none or it is not SPIR-V."""
    if len(spirv) % 4 or len(spirv) < 4 * _HEADER_WORDS:
        raise VulkanError(f"not a SPIR-V module: {len(spirv)} bytes (a module is a whole number of 32-bit words)")
    words = struct.unpack(f"<{len(spirv) // 4}I", spirv)
    if words[0] != MAGIC:
        raise VulkanError(f"not a SPIR-V module: starts with 0x{words[0]:08x}, not the magic 0x{MAGIC:08x}")
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
