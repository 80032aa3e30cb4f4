"""Guards on Python state (issue 13): what a trace read is checked by value, not identity,
where a fresh equal object comes on each call."""
import enum

import numpy as np
import torch

import ember_capture
from capture_helpers import Recorder


class Mode(enum.IntEnum):
    A = 1
    B = 2


def test_numpy_scalar_and_int_enum_guarded_by_value():
    def f(x, s, mode):
        return x * s + mode

    rec = Recorder()
    stats = ember_capture.CaptureStats()
    g = ember_capture.capture(f, rec, stats=stats)
    x = torch.randn(3)
    for _ in range(3):  # a fresh numpy scalar per call, equal: one entry
        torch.testing.assert_close(g(x, np.float64(2.0), Mode.A), f(x, 2.0, 1))
    torch.testing.assert_close(g(x, np.float64(3.0), Mode.B), f(x, 3.0, 2))
    assert len(rec.graphs) == 2 and stats.recompiles == 1
