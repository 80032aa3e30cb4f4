"""Graph-break kinds are one enumeration (ember_capture.kinds.BreakKind), each with a hint."""
import pathlib
import re

import pytest

import ember_capture
from ember_capture import BreakKind, Unsupported

SOURCES = pathlib.Path(ember_capture.__file__).parent


def test_every_kind_raised_in_capture_is_listed_with_a_hint():
    used = set()
    for path in SOURCES.glob("*.py"):
        used |= set(re.findall(r'Unsupported\(\s*"([A-Za-z_-]+)"', path.read_text()))
    assert used, "no Unsupported(...) found: the scan is broken"
    for kind in used:
        assert BreakKind.of(kind).hint
    for kind in BreakKind:
        assert kind.hint and "\n" not in kind.hint, kind


def test_both_spellings_are_one_kind_and_unknown_kinds_raise():
    assert BreakKind.of("data-dependent") is BreakKind.of("data_dependent") is BreakKind.DATA_DEPENDENT
    assert Unsupported("data-dependent", "x").kind is BreakKind.DATA_DEPENDENT
    assert BreakKind.DATA_DEPENDENT == "data_dependent"  # stable string values
    with pytest.raises(ValueError, match="unknown graph-break kind 'no_such_kind'"):
        Unsupported("no_such_kind", "x")


def test_break_reasons_carry_the_hint():
    def f(x):
        if x.sum() > 0:
            return x + 1
        return x - 1

    import torch
    out = ember_capture.explain(f, torch.ones(3))
    (reason,) = out.break_reasons
    assert reason.kind is BreakKind.DATA_DEPENDENT and "torch.where" in reason.hint
