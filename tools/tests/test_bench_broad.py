"""The gpu-broad suite (tools/bench/models.py, Note [broad sizes]): every model builds at its tiny
size and runs one eager inference call and one eager training step (forward, loss, backward: a
finite loss and a gradient on every trainable parameter that the loss reaches), on the CPU. A
model whose library (torchvision, timm, transformers) is not installed is skipped. Their
correctness through ember is tests-integration/test_zoo_broad.py's.
"""
from __future__ import annotations

import importlib.util
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools"))

from bench import models  # noqa: E402

BROAD = models.SUITES["gpu-broad"]


def test_suite_is_broad():
    """Twelve models or more, each with a tiny build, from the three libraries."""
    assert len(BROAD) >= 12
    assert set(BROAD) == set(models.BROAD_TINY)
    libraries = {lib for name in BROAD for lib in models.MODELS[name].requires}
    assert libraries == {"torchvision", "timm", "transformers"}


def test_list_names_the_suite():
    out = subprocess.run([sys.executable, str(REPO / "tools" / "bench.py"), "--list"], cwd=REPO,
                         capture_output=True, text=True, timeout=300, check=True).stdout
    (line,) = [ln for ln in out.splitlines() if ln.startswith("gpu-broad:")]
    assert line.split(": ", 1)[1].split(", ") == list(BROAD)


@pytest.mark.parametrize("name", BROAD)
def test_tiny_build_runs_an_eager_step(name):
    missing = [m for m in models.MODELS[name].requires if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"needs {', '.join(missing)}")
    torch.manual_seed(0)
    work = models.BROAD_TINY[name](torch.device("cpu"), torch.float32)
    assert work.phases == ("infer", "train")
    gen = torch.Generator().manual_seed(0)
    model = work.fn
    model.eval()
    with torch.no_grad():
        b = work.make_batch(gen, "infer")
        out = model(*b.args, **b.kwargs)
    assert all(torch.isfinite(t).all() for t in _tensors(out))
    model.train()
    b = work.make_batch(gen, "train")
    loss = work.loss(model(*b.args, **b.kwargs), b)
    loss.backward()
    assert loss.dim() == 0 and math.isfinite(loss.item())
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    assert grads and all(torch.isfinite(g).all() for g in grads)


def _tensors(out) -> list:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, dict):
        out = list(out.values())
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in _tensors(o)]
    return []
