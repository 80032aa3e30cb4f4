"""Under fullgraph=True, an error names the user's function as well as its file and line: a
graph break (ember_capture.Unsupported) and a backend that fails on a graph
(ember.BackendCompilerFailed)."""
import pytest
import torch

import ember


# -- fullgraph errors name the function ----------------------------------------------------
def _relu_plus_one(x):
    return torch.relu(x) + 1


def test_backend_failure_under_fullgraph_names_the_function():
    def broken(gm, example_inputs):
        raise RuntimeError("this backend always fails")

    with pytest.raises(ember.BackendCompilerFailed,
                       match=r"of _relu_plus_one \(.*test_fullgraph_messages.py:\d+\).*always fails"):
        ember.compile(_relu_plus_one, backend=broken, fullgraph=True)(torch.randn(3))


def _breaks(x):
    y = x * 2
    if y.sum() > 0:
        return y
    return -y


def test_graph_break_under_fullgraph_names_the_function():
    with pytest.raises(Exception, match=r"test_fullgraph_messages.py:\d+ in _breaks: if y.sum\(\) > 0:"):
        ember.compile(_breaks, backend="eager", fullgraph=True)(torch.randn(3))
