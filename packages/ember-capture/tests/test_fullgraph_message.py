"""Under fullgraph=True the error names the user's function as well as its file and line, and
so do graph-break reasons (explain) and eager-fallback warnings."""
from __future__ import annotations

import pytest
import torch

import ember_capture
from ember_capture import CaptureConfig, Unsupported
from capture_helpers import Recorder


def _prints(x):
    print("side effect")
    return x


def calls_a_helper(x):
    return _prints(x + 1)


class Net(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x
        return -x


def test_fullgraph_error_names_the_inner_function():
    captured = ember_capture.capture(calls_a_helper, Recorder(), CaptureConfig(fullgraph=True))
    with pytest.raises(Unsupported) as info:
        captured(torch.ones(2))
    text = str(info.value)
    assert "test_fullgraph_message.py:" in text and " in _prints:" in text and 'print("side effect")' in text
    assert info.value.to_reason().function == "_prints"


def test_fullgraph_error_names_the_method():
    captured = ember_capture.capture(Net(), Recorder(), CaptureConfig(fullgraph=True))
    with pytest.raises(Unsupported, match=r"test_fullgraph_message.py:\d+ in Net.forward: if x.sum\(\) > 0:"):
        captured(torch.ones(2))


def test_explain_reasons_name_the_function():
    report = ember_capture.explain(Net(), torch.ones(2))
    assert report.break_reasons[0].function == "Net.forward"
    assert "in Net.forward" in str(report)
