"""Repository-wide pytest setup: the `gpu` marker skips where no CUDA device is present.

The warm-start cache (Note [warm start] in ember/warm_start.py) is off for the tests, unless
EMBER_WARM_START=1 is given: tests look at what each layer's passes made, and a second run of the
suite would otherwise load it from the first run's cache. Its own tests turn it on.
"""
import os

import pytest
import torch

os.environ.setdefault("EMBER_WARM_START", "0")


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device (run on the GPU machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
