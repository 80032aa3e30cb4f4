"""Every small function of the coverage suites, captured with dynamic=True (every dimension of
the tensor arguments and every int argument symbolic), against eager on each input set: the
Python capture models stays right when the sizes it reads are symbols (Note [Dynamic shapes in
capture]). Graph counts are not asserted: a use that needs a size's value specializes it."""
from __future__ import annotations

import warnings

import pytest

from ember_capture import CaptureConfig
from capture_helpers import check
import test_coverage_more
import test_coverage_python

CASES = [pytest.param(p.values[0], p.values[1], id=f"{mod.__name__}-{p.id}")
         for mod in (test_coverage_more, test_coverage_python) for p in mod.CASES]


@pytest.mark.parametrize("fn,input_sets", CASES)
def test_case_with_symbolic_sizes(fn, input_sets):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # graph breaks and eager frames are the cases' own
        check(fn, *input_sets, fallback_ok=True, config=CaptureConfig(dynamic=True, raise_internal=True))
