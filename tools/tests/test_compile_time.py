"""tools/compile_time.py on CPU: one cold compile of a small block by phase, and Triton's own
compile of its kernels to an sm_90 cubin (ptxas ships with Triton: no GPU needed)."""
from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import compile_time  # noqa: E402


@pytest.mark.slow
def test_phases_and_sm90_compile_of_a_dense_block(monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", tempfile.mkdtemp())
    import ember
    ember.reset()
    fn, infer, _ = compile_time.synthetic_workload("dense", 1)
    # CPython 3.11's ast module is not thread-safe ("AST constructor recursion depth mismatch",
    # raised by Triton's parse on two threads at once in CI): threads from 3.12 on
    n = 2 if sys.version_info >= (3, 12) else 1
    row = compile_time.measure(fn, infer, [n], True)
    assert row["graphs"] == 1 and row["nodes"] > 10
    assert 0 < row["distinct"] <= row["kernels"] and row["unique"] <= row["distinct"]
    for phase in ("capture", "autograd", "lower+fuse", "codegen"):
        assert 0 < row[phase] < row["first_call"], phase
    # every distinct kernel compiled for sm_90, serially and on threads
    assert row["triton.serial"] > 0 and row[f"triton.threads={n}"] > 0
    assert row["triton.max_kernel"] <= row["triton.serial"]
    # and in ember's worker processes (Note [Triton compiled in worker processes]): this
    # process's compiles that follow are all cache hits
    assert row[f"triton.procs={n}"] > 0 and row[f"triton.warm_procs={n}"] > 0
    assert row[f"triton.procs_misses={n}"] == row[f"triton.warm_procs_misses={n}"] == 0
    import triton
    cubins = [f for _, _, fs in os.walk(triton.knobs.cache.dir) for f in fs if f.endswith(".cubin")]
    assert len(cubins) == row["distinct"]
