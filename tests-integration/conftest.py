import warnings

import pytest
import torch

import ember


@pytest.fixture(autouse=True)
def _fresh_ember():
    """Each test starts with no compiled code cached and a fixed seed."""
    ember.reset()
    torch.manual_seed(0)
    yield
    ember.reset()


@pytest.fixture
def no_fallback():
    """A graph that runs eagerly (ember warns) fails the test: use it where a fallback would make
    the test vacuous (`pytestmark = pytest.mark.usefixtures("no_fallback")`)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    said = [str(w.message) for w in caught if str(w.message).startswith("ember")]
    assert not said, said


class GraphRecorder:
    """A custom backend (the torch.compile protocol) that keeps each graph it is given."""

    def __init__(self):
        self.graphs = []
        self.example_inputs = []

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        self.example_inputs.append(example_inputs)
        return gm.forward

    def targets(self, i=0):
        return [n.target for n in self.graphs[i].graph.nodes if n.op == "call_function"]


@pytest.fixture
def recorder():
    return GraphRecorder()
