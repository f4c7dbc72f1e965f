"""One ``cuda`` device for the GPU tests (tests/gpu): the product's device, so every test goes the user's way."""

from __future__ import annotations

from typing import Iterator

import pytest
from gpu_device import open_cuda


@pytest.fixture(scope="session")
def cuda(tmp_path_factory) -> Iterator:
    dev = open_cuda(tmp_path_factory)
    yield dev
    dev.close()
