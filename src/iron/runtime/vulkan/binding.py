"""Loading the ``vulkan`` Python binding, which fails in two ways worth telling apart.

The binding (PyPI ``vulkan``, cffi) opens ``libvulkan.so.1`` when it is
imported, so a missing package raises ImportError and a missing loader
raises OSError.  Both become :class:`VulkanUnavailable` with an install hint.
"""

from __future__ import annotations

import functools
from types import ModuleType

from .errors import INSTALL_HINT, VulkanUnavailable


@functools.cache
def load_vulkan() -> ModuleType:
    """The imported ``vulkan`` module; VulkanUnavailable says what is missing."""
    try:
        import vulkan
    except ImportError:
        raise VulkanUnavailable(f"the Python package 'vulkan' is not installed; {INSTALL_HINT}") from None
    except OSError:
        raise VulkanUnavailable(f"the Vulkan loader (libvulkan.so.1) was not found; {INSTALL_HINT}") from None
    return vulkan


def api_version_text(version: int) -> str:
    """``1.3.230`` for a packed Vulkan API version."""
    return f"{(version >> 22) & 0x7F}.{(version >> 12) & 0x3FF}.{version & 0xFFF}"
