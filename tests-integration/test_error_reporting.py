"""Errors and warnings blame the user's code (STYLE.md rule 12): an internal error of capture is
reported as ember's bug (or raised with EMBER_RAISE_INTERNAL=1), tracebacks leaving a compiled
function hold the user's frames only (all of them with EMBER_DEBUG=1), fullgraph errors name the
user's function and line, with a hint."""
import traceback
import warnings

import pytest
import torch

import ember
import ember_capture
from ember_capture.frame import HANDLERS, VERSION


def negate(x):
    y = x * 2
    return -y  # the line capture fails on, in test_internal_error_*


NEGATE_LINE = negate.__code__.co_firstlineno + 2


def _buggy_negative(frame, inst):
    frame.jump(-1)  # a handler bug: a KeyError raised inside ember_capture


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_internal_error_is_reported_as_embers_bug_then_raised_in_test_mode(monkeypatch, backend):
    monkeypatch.delenv("EMBER_RAISE_INTERNAL", raising=False)  # CI's second pass sets it
    monkeypatch.setitem(HANDLERS[VERSION], "UNARY_NEGATIVE", _buggy_negative)
    compiled = ember.compile(negate, backend=backend)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in (3, 4):  # a second call, with new inputs
            x = torch.randn(n)
            torch.testing.assert_close(compiled(x), negate(x))
    ours = [w for w in caught if "ember" in str(w.message)]
    assert len(ours) == 1, [str(w.message) for w in ours]
    assert "internal error" in str(ours[0].message) and "bug in ember" in str(ours[0].message)
    assert (ours[0].filename, ours[0].lineno) == (__file__, NEGATE_LINE)

    ember.reset()
    monkeypatch.setenv("EMBER_RAISE_INTERNAL", "1")
    with pytest.raises(KeyError):
        ember.compile(negate, backend=backend)(torch.randn(3))


def _user_helper(x):
    raise ValueError("the user's own error")


def calls_helper(x):
    y = x.sin()
    print("a graph break")
    return _user_helper(y)


def _frames(exc):
    return [(f.filename, f.name) for f in traceback.extract_tb(exc.__traceback__)]


def _ember_frames(exc):
    return [f for f in _frames(exc) if "/ember" in f[0] and "tests-integration" not in f[0]]


def test_user_exception_traceback_shows_user_frames_not_embers(monkeypatch):
    monkeypatch.delenv("EMBER_DEBUG", raising=False)
    with pytest.raises(ValueError, match="own error") as info:
        ember.compile(calls_helper, backend="eager")(torch.randn(3))
    assert (__file__, "_user_helper") in _frames(info.value)
    assert len(_ember_frames(info.value)) == 1  # the capture wrapper that re-raised it
    monkeypatch.setenv("EMBER_DEBUG", "1")
    ember.reset()
    with pytest.raises(ValueError, match="own error") as info:
        ember.compile(calls_helper, backend="eager")(torch.randn(3))
    assert len(_ember_frames(info.value)) > 3


def test_backend_error_under_fullgraph_hides_internal_cause(monkeypatch):
    monkeypatch.delenv("EMBER_DEBUG", raising=False)
    def broken(gm, example_inputs):
        raise RuntimeError("backend internals")

    with pytest.raises(ember.BackendCompilerFailed, match="graph of <lambda>.*backend internals") as info:
        ember.compile(lambda x: x.cos() * 2, backend=broken, fullgraph=True)(torch.randn(3))
    assert info.value.__cause__ is None and len(_ember_frames(info.value)) == 1


def branchy(x):
    if x.sum() > 0:
        return x + 1
    return x - 1


def test_fullgraph_break_names_function_line_and_hint():
    with pytest.raises(ember_capture.Unsupported) as info:
        ember.compile(branchy, backend="eager", fullgraph=True)(torch.ones(3))
    message = str(info.value)
    assert "in branchy" in message and "torch.where" in message
    assert f"{__file__}:{branchy.__code__.co_firstlineno + 1}" in message


def _buggy_generate_entry(*args, **kwargs):
    return {}["a bug in capture outside an opcode handler"]


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_internal_error_outside_handlers_runs_eagerly_with_one_warning(monkeypatch, backend):
    monkeypatch.delenv("EMBER_RAISE_INTERNAL", raising=False)  # CI's second pass sets it
    import ember_capture.runtime
    monkeypatch.setattr(ember_capture.runtime, "generate_entry", _buggy_generate_entry)
    compiled = ember.compile(negate, backend=backend)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in (3, 4):
            x = torch.randn(n)
            torch.testing.assert_close(compiled(x), negate(x))
    ours = [str(w.message) for w in caught if "ember" in str(w.message)]
    assert len(ours) == 1 and "internal error while capturing negate" in ours[0], ours
    ember.reset()
    with pytest.raises(ember_capture.Unsupported, match="internal.*negate"):
        ember.compile(negate, backend=backend, fullgraph=True)(torch.randn(3))
    ember.reset()
    monkeypatch.setenv("EMBER_RAISE_INTERNAL", "1")
    with pytest.raises(KeyError):
        ember.compile(negate, backend=backend)(torch.randn(3))
