"""A CPython whose bytecode capture does not know runs the function eagerly, with one warning."""
import warnings

import pytest
import torch

import ember_capture
from ember_capture import frame


@pytest.fixture
def unknown_python(monkeypatch):
    monkeypatch.setattr(frame, "VERSION", (3, 99))


def _graphs_backend(seen):
    def backend(gm, inputs):
        seen.append(gm)
        return gm.forward
    return backend


def test_function_runs_eagerly_with_one_warning_naming_the_version(unknown_python):
    def f(x):
        return torch.sin(x) * 2

    seen = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        g = ember_capture.capture(f, _graphs_backend(seen))
        for _ in range(3):
            x = torch.randn(5)
            torch.testing.assert_close(g(x), f(x))
    messages = [str(w.message) for w in caught]
    assert len(messages) == 1 and "CPython 3.99" in messages[0] and "3.11" in messages[0]
    assert caught[0].filename == __file__  # points at the user's function, not at ember
    assert seen == []  # nothing was interpreted


def test_module_runs_eagerly(unknown_python):
    m = torch.nn.Linear(3, 2)
    with pytest.warns(RuntimeWarning, match="not supported by ember's capture"):
        g = ember_capture.capture(m, _graphs_backend([]))
    x = torch.randn(4, 3)
    torch.testing.assert_close(g(x), m(x))


def test_fullgraph_raises(unknown_python):
    with pytest.raises(ember_capture.Unsupported, match="CPython 3.99 is not supported"):
        ember_capture.capture(lambda x: x + 1, _graphs_backend([]),
                              ember_capture.CaptureConfig(fullgraph=True))
