"""The torchvision/timm zoo (tests-integration/zoo_vision.py): each model, with random weights,
equals eager through ember.compile (capture alone and the default backend; inference and a
training step, two calls with fresh inputs each) and is captured in one graph with
fullgraph=True, as torch.compile captures each of them. Slow: run with `-m slow`; skipped
without torchvision and timm (CI installs neither); on CUDA where there is one.
"""
import pathlib
import sys

import pytest
import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import zoo_vision  # noqa: E402

pytestmark = pytest.mark.slow

# Models that are not one graph yet, with the reason.
NOT_ONE_GRAPH = {"timm_levit_128s": "fills a dict on the module (its attention-bias cache) on the first call: "
                                    "changing a dict given as input is a graph break"}
# float32 training through the default backend on CUDA differs from eager beyond TOL for these
# (measured 2026-11-24: 2.5e-2 to 5.3e-1 relative on the worst gradient), while capture alone and
# float64 (2e-12) agree: docs/capture.md, "torchvision and timm models". Against a float64
# reference (tests-integration/zoo_accuracy.py, H100, 2026-11-24) ember's float32 error is eager's
# own or smaller (densenet121 4e-4 vs eager 3e-2, mobilenet_v2 0.05 vs 0.10, googlenet 0.20 vs 0.39;
# mnasnet0_5 8e-4 vs 4e-4, torch.compile 5e-4): batch statistics over a batch of 2 amplify float32
# rounding, so two correct float32 programs disagree. Kept as xfail until the test compares
# with float64 as zoo_accuracy.py does.
CUDA_F32_TRAINING = {"densenet121", "resnext50_32x4d", "resnet50", "mobilenet_v2", "regnet_y_400mf", "mnasnet0_5",
                     "googlenet"}


@pytest.fixture(scope="module")
def device():
    if not zoo_vision.available():
        pytest.skip("torchvision and timm are not installed")
    if torch.cuda.is_available():
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        return "cuda"
    return "cpu"


@pytest.mark.parametrize("spec", zoo_vision.SPECS, ids=[s.name for s in zoo_vision.SPECS])
def test_zoo_vision(spec, device):
    row = zoo_vision.measure(spec, device, with_torch=False)
    failed = {k: (row.get(k), row.get(k + "_error")) for k in zoo_vision.TOL if not zoo_vision.ok(row, k)}
    if spec.name not in NOT_ONE_GRAPH:
        assert row["fullgraph"], row.get("fullgraph_error")
        assert (row["graphs"], row["breaks"]) == (1, 0), row["reasons"]
    if device == "cuda" and spec.name in CUDA_F32_TRAINING and list(failed) == ["inductor_training"]:
        pytest.xfail(f"float32 training through the inductor on CUDA: {failed}")
    assert not failed, failed
