"""A CPython whose bytecode capture does not know runs the function eagerly, with one warning."""
import warnings

import pytest
import torch

import ember_capture
from capture_helpers import Recorder
from ember_capture import frame


@pytest.fixture
def unknown_python(monkeypatch):
    monkeypatch.setattr(frame, "VERSION", (3, 99))


def test_function_runs_eagerly_with_one_warning_naming_the_version(unknown_python):
    def f(x):
        return torch.sin(x) * 2

    rec = Recorder()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        g = ember_capture.capture(f, rec)
        for _ in range(3):
            x = torch.randn(5)
            torch.testing.assert_close(g(x), f(x))
    messages = [str(w.message) for w in caught]
    assert len(messages) == 1 and "CPython 3.99" in messages[0] and "3.11" in messages[0]
    assert caught[0].filename == __file__  # points at the user's function, not at ember
    assert rec.graphs == []  # nothing was interpreted


def test_module_runs_eagerly(unknown_python):
    m = torch.nn.Linear(3, 2)
    with pytest.warns(RuntimeWarning, match="not supported by ember's capture"):
        g = ember_capture.capture(m, Recorder())
    x = torch.randn(4, 3)
    torch.testing.assert_close(g(x), m(x))


def test_fullgraph_raises(unknown_python):
    with pytest.raises(ember_capture.Unsupported, match="CPython 3.99 is not supported"):
        ember_capture.capture(lambda x: x + 1, Recorder(),
                              ember_capture.CaptureConfig(fullgraph=True))
