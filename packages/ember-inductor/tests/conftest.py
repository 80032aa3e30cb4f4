"""Shared fixtures: one kernel cache for every test and xdist worker (kernels compile once)."""
import os
import tempfile

import pytest
import torch

from ember_inductor import InductorOptions

CACHE = os.path.join(tempfile.gettempdir(), f"ember-inductor-tests-{os.getuid()}")


@pytest.fixture
def options():
    return InductorOptions(cache_dir=CACHE, backend="cpp")

