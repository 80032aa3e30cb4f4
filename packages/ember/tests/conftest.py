import pytest
import torch

import ember


@pytest.fixture
def fresh_ember():
    """No compiled code cached from an earlier test, and a fixed seed."""
    ember.reset()
    torch.manual_seed(0)
    yield
    ember.reset()
