"""A compiled graph whose first call fails after its kernels wrote a mutated input in place
(Note [mutated inputs written in place] in ember_inductor): the graph then runs eagerly, from the
inputs as they were before the call, so the mutation is applied once (found by the program
fuzzer: `a0.transpose(0, -1).neg_()` came back un-negated when a later Triton kernel failed
under the interpreter; Fallback.first_call in ember/fallback.py)."""
import warnings

import pytest
import torch

import ember

CALLS = {"n": 0}


@torch.library.custom_op("ember_test::fails_first_time", mutates_args=())
def fails_first_time(x: torch.Tensor) -> torch.Tensor:
    CALLS["n"] += 1
    if CALLS["n"] == 1:
        raise RuntimeError("a kernel failed at its first run")
    return x * 3


@fails_first_time.register_fake
def _(x):
    return torch.empty_like(x)


def program(x, y):
    x.transpose(0, 1).neg_()
    x.add_(1)
    return fails_first_time(x) + y


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_mutation_applied_once_when_the_first_call_falls_back(backend):
    CALLS["n"] = 0
    compiled = ember.compile(program, backend=backend)
    x, y = torch.randn(4, 3), torch.randn(4, 3)
    xe, xc = x.clone(), x.clone()
    CALLS["n"] = 1  # eager's own call succeeds
    want = program(xe, y)
    CALLS["n"] = 0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = compiled(xc, y)
    assert any("runs eagerly" in str(w.message) for w in caught), [str(w.message) for w in caught]
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(xc, xe)
    for _ in range(2):  # later calls: the eager graph, each mutation once
        x = torch.randn(4, 3)
        xe, xc = x.clone(), x.clone()
        torch.testing.assert_close(compiled(xc, y), program(xe, y))
        torch.testing.assert_close(xc, xe)
