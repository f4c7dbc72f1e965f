"""One Vulkan device per buffer path for the tests, created with the Khronos validation layer on.

Every test that takes ``device`` runs twice: on the mapped path (what
lavapipe gets by default) and on the staged path (device-local buffers and
staging copies, what a discrete GPU gets), so CI checks both under the
layer, its synchronization validation included.  The disk caches go to a
temporary directory, never the user's.

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

from iron import config
from iron.runtime.vulkan import VulkanDevice


@pytest.fixture(scope="session", autouse=True)
def _private_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Disk caches (SPIR-V, pipeline caches) in a temporary directory for the whole session."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("IRON_CACHE_DIR", str(tmp_path_factory.mktemp("iron-cache")))
        config.reload()
        yield
    config.reload()


@pytest.fixture(scope="session", params=["mapped", "staged"])
def device(request: pytest.FixtureRequest) -> Iterator[VulkanDevice]:
    dev = open_device(staging="always" if request.param == "staged" else "never")
    assert dev.staged == (request.param == "staged")
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
