"""tools/host_call_cpu.py on a small module: every column measured, and the CUDA graph runner's
stand-ins on the CPU put back afterwards (the tool replaces ember's own `_capture`)."""
from __future__ import annotations

import math
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import host_call_cpu  # noqa: E402

import ember.cudagraphs as cudagraphs  # noqa: E402


def test_every_part_of_a_cache_hit_is_timed():
    capture, is_cuda = cudagraphs._capture, cudagraphs._is_cuda
    model = torch.nn.Sequential(*[torch.nn.Linear(4, 4) for _ in range(3)])
    for train in (False, True):
        row = host_call_cpu.measure(model, torch.randn(2, 4), train, calls=20, tc=False, rounds=2)
        assert all(row[k] > 0 and math.isfinite(row[k]) for k in ("ember", "guards", "aot", "+cudagraphs", "runner"))
        assert math.isnan(row["tc"])
    assert (cudagraphs._capture, cudagraphs._is_cuda) == (capture, is_cuda)
