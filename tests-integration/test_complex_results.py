"""Complex tensors through the default backend: results keep eager's dtype and values. A complex
operand's abs is real (ATen's COMPLEX_TO_FLOAT promotion); the abs decomposition cast it back to
complex64, a wrong dtype with no warning (found by an ad-hoc sweep, 2026-11-24).

Compared with eager on two calls with fresh inputs, backends inductor and eager; complex64 and
float32 tolerances rtol=1e-5, atol=1e-5 (the inductor's kernels or eager's for complex ops).
"""
import warnings

import pytest
import torch

import ember

TOL = dict(rtol=1e-5, atol=1e-5)


def abs_of_complex(x):
    c = torch.complex(x, x * 2)
    return c.abs(), torch.abs(c) + 1, (c * c).real, c.imag * 3


def abs_angle_norm(x):
    c = torch.view_as_complex(torch.stack([x, x.flip(0)], -1))
    return c.abs().sum(1), torch.angle(c), torch.linalg.vector_norm(c, dim=1), c.abs().max()


def sgn_and_mixed(x):
    c = torch.complex(x, -x)
    return c.sgn(), c.abs() * x, (c.abs() > 1).sum()


@pytest.mark.parametrize("backend", ["inductor", "eager"])
@pytest.mark.parametrize("fn", [abs_of_complex, abs_angle_norm, sgn_and_mixed], ids=lambda f: f.__name__)
def test_complex_results_equal_eager(fn, backend):
    compiled = ember.compile(fn, backend=backend)
    for _ in range(2):
        x = torch.randn(5, 4)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a graph that runs eagerly is still compared
            got = compiled(x)
        want = fn(x)
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, w.dtype, g.shape, w.shape)
            torch.testing.assert_close(g, w, **TOL)
