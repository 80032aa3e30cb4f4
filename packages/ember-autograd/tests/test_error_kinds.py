"""ember_autograd's error kinds are one enumeration (ErrorKind), spelled like capture's."""
import pathlib
import re

import pytest

import ember_autograd
from ember_autograd import AotError, ErrorKind
from ember_autograd.tracer import _FAKE_FAILURES

SOURCES = pathlib.Path(ember_autograd.__file__).parent


def test_every_kind_raised_is_listed_with_a_hint():
    used = set(_FAKE_FAILURES.values())
    for path in SOURCES.glob("*.py"):
        used |= set(re.findall(r'(?:AotError|AotTraceError|SpecError)\(\s*"([A-Za-z_-]+)"', path.read_text()))
    assert len(used) > 5, used
    for kind in used:
        assert ErrorKind.of(kind).hint
    for kind in ErrorKind:
        assert kind.hint and "-" not in kind.value, kind


def test_old_spelling_is_the_same_kind():
    err = AotError("data-dependent", "x")
    assert err.kind is ErrorKind.DATA_DEPENDENT and err.kind == "data_dependent"
    assert "[data_dependent]" in str(err)
    with pytest.raises(ValueError, match="unknown ember_autograd error kind"):
        AotError("no-such-kind", "x")
