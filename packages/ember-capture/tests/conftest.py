import pathlib
import sys

import pytest
import torch

import ember_capture

# Tests run with --import-mode=importlib: make the shared helpers importable by name.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))


@pytest.fixture(autouse=True)
def _fresh():
    ember_capture.reset()
    torch.manual_seed(0)
    yield
    ember_capture.reset()
