"""ember under torch.distributed on the CPU (issue 21): 2 processes, gloo.

One test spawns the 2 processes once (starting them costs more than the scenarios) and runs
every scenario of distributed_scenarios.py on both ranks, through backend="eager" and the default
backend (inductor); the checks below compare each compiled run with its eager counterpart and
are reported together, each under its own name and backend. The inductor compiles into a fresh
kernel cache that both ranks write at the same time (Note [atomic cache writes]).

Tolerances: float32; the compiled graphs compute the same formulas in another order.
"""
from __future__ import annotations

import functools
import pathlib
import subprocess
import sys
import tempfile

import pytest
import torch
import torch.distributed as dist

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from distributed_helpers import run_ranks  # noqa: E402
from distributed_scenarios import TinyTransformer, every_scenario  # noqa: E402

pytestmark = pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(),
                                reason="torch.distributed with gloo is not available")

TOL = dict(rtol=1e-4, atol=1e-5)


def _assert_close_lists(got, want, what):
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        if w is None or g is None:
            assert g is None and w is None, f"{what} {i}: {g} vs {w}"
        else:
            torch.testing.assert_close(g, w, **TOL, msg=lambda m: f"{what} {i}: {m}")


# check -> (scenario, what of the compiled run equals the eager run's)
SAME_AS_EAGER = {
    "compiled DDP step equals eager DDP: ember.compile(DDP(m))": ("outer", ("params",)),
    "compiled DDP step equals eager DDP: DDP(ember.compile(m))": ("inner", ("params",)),
    "gradients all-reduced equal eager DDP's": ("outer", ("first_grads",)),
    "no_sync accumulation equals eager": ("no_sync", ("first_grads", "params")),
    "static_graph equals eager": ("static_graph", ("params",)),
    "find_unused_parameters equals eager": ("find_unused", ("params", "grads")),
    "a compiled step function calling DDP equals eager": ("step_function", ("params",)),
    "compiled FSDP2 step equals eager FSDP2: ember.compile(model)": ("fsdp_model", ("params",)),
    "compiled FSDP2 step equals eager FSDP2: ember.compile(each block)": ("fsdp_blocks", ("params",)),
}


def check_same_as_eager(results, backend, scenario, fields):
    for eager, compiled in results[scenario]:
        for field in fields:
            _assert_close_lists(compiled[field], eager[field], field)


def check_gradients_reduced_across_ranks(results, backend):
    ranks = results["outer"]  # both ranks hold the same gradients although their data differ
    _assert_close_lists(ranks[0][1]["first_grads"], ranks[1][1]["first_grads"], "rank 0 vs 1 gradient")


def check_graph_split_into_one_piece_per_bucket(results, backend):
    for wrap in ("outer", "inner"):
        for eager, compiled in results[wrap]:
            assert eager["buckets"] >= 3  # the small cap makes several buckets
            assert compiled["pieces"] == compiled["buckets"] == eager["buckets"], wrap


def check_all_reduce_overlaps_backward(results, backend):
    # Each bucket's gradients come from a backward of their own, which ends (and DDP launches the
    # bucket's all-reduce) before the backward of the earlier layers starts. Through the inductor
    # a graph is one autograd node (without the split: one producer, and DDP's buckets wait for
    # it); backend="eager" runs the graph's ops one by one, each its own node.
    if backend == "eager":
        return
    for wrap in ("outer", "inner"):
        for _, compiled in results[wrap]:
            assert compiled["producers"] == compiled["buckets"], wrap


def check_fsdp2_forwards_compiled(results, backend):
    for how in ("model", "blocks"):
        for _, compiled in results[f"fsdp_{how}"]:
            assert compiled["graphs"] >= len(TinyTransformer().blocks), how  # each block's forward


CHECKS = {**{name: functools.partial(check_same_as_eager, scenario=scenario, fields=fields)
             for name, (scenario, fields) in SAME_AS_EAGER.items()},
          "gradients all-reduced across ranks": check_gradients_reduced_across_ranks,
          "graph split into one piece per DDP bucket": check_graph_split_into_one_piece_per_bucket,
          "FSDP2 units' forwards compiled": check_fsdp2_forwards_compiled,
          "all-reduces overlap the backward": check_all_reduce_overlaps_backward}


BACKENDS = ("eager", "inductor")


def test_ddp_and_fsdp2_on_two_cpu_processes():
    with tempfile.TemporaryDirectory() as cache_dir:
        per_rank = run_ranks(every_scenario, BACKENDS, cache_dir=cache_dir)
    failures = []
    for backend in BACKENDS:
        results = {}
        for (b, name) in per_rank[0]:
            runs = [r[b, name] for r in per_rank]
            errors = [f"rank {rank}:\n{run}" for rank, run in enumerate(runs) if isinstance(run, str)]
            if b != backend:
                continue
            if errors:
                failures.append(f"[{backend}] scenario {name} raised:\n" + "\n".join(errors))
            else:
                results[name] = runs
        for name, check in CHECKS.items():
            try:
                check(results, backend)
            except KeyError as exc:
                failures.append(f"[{backend}] {name}: its scenario {exc} failed (above)")
            except AssertionError as exc:
                failures.append(f"[{backend}] {name}: {exc}")
    assert not failures, "\n\n".join(failures)


@pytest.mark.slow
def test_docs_distributed_example_runs():
    """docs/distributed.md's runnable example (2 processes, DDP and FSDP2, compiled == eager)."""
    script = pathlib.Path(__file__).resolve().parents[1] / "docs" / "examples" / "distributed_cpu.py"
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    assert "DDP: compiled parameters after 3 steps equal eager's" in done.stdout
    assert "FSDP2: compiled parameters after 3 steps equal eager's" in done.stdout
