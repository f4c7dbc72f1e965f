"""One Vulkan device for the tests, created with the Khronos validation layer on.

``VulkanDevice.run_spirv`` raises on any validation message during a launch;
the autouse check below also fails a test when a message arrived outside a
launch.  Without a driver (or the layer) the tests skip with an install
hint, except in CI (``CI=true`` or ``IRON_REQUIRE_TOOLCHAINS=1``), where
they fail.
"""

from __future__ import annotations

from typing import Iterator

import pytest
from vulkan_shaders import open_device

from iron.runtime.vulkan import VulkanDevice


@pytest.fixture(scope="session")
def device() -> Iterator[VulkanDevice]:
    dev = open_device()
    yield dev
    dev.close()
    assert dev.validation_messages == [], "the validation layer reported problems at teardown (leaked objects?)"


@pytest.fixture(autouse=True)
def _no_validation_messages(request: pytest.FixtureRequest) -> Iterator[None]:
    if "device" not in request.fixturenames:
        yield
        return
    dev = request.getfixturevalue("device")
    before = len(dev.validation_messages)
    yield
    new = dev.validation_messages[before:]
    assert not new, "the Vulkan validation layer reported:\n" + "\n".join(new)
