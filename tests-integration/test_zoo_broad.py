"""The bench's gpu-broad suite through ember on the CPU at its tiny size (zoo_broad.py): the
default backend equals eager in inference and in a training step (zoo.TOL, or as close to eager
float64 as eager float32 is: zoo.within), on two calls with fresh inputs, in one graph (as
torch.compile captures each), compiled once, with no fallback.

    pytest -m slow tests-integration/test_zoo_broad.py

Slow (C++ compiles and backward of 17 models on 2 cores): runs only when slow tests are asked for
with `-m slow` (or EMBER_ZOO_DEVICE is set, as test_zoo_hf.py); skipped without the model's
library (torchvision, timm, transformers).
"""
import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import zoo_broad  # noqa: E402
from test_zoo_hf import _asked_for_slow  # noqa: E402

pytestmark = pytest.mark.slow

# Training steps where ember's default backend (C++ on the CPU) is further from eager float64 than
# eager float32 is (zoo_broad.py prints the numbers; capture alone and aot_eager are right, so the
# difference is in the inductor's path), found when the suite was added (2026-11-27) and not fixed
# yet: float64 errors ember / eager.
WRONG_TRAINING = {
    "mobilenet_v3_large_b64": "7.5e-2 / 1.4e-5 on the 2nd input only, from features.6 (5x5 depthwise conv, BN)",
    "regnet_y_1_6gf_b64": "4.8e-1 / 8.8e-2 (batch norm over 8 values per channel in the last stage)",
    "shufflenet_v2_x1_0_b128": "2.7e-2 / 3.0e-4 on the 2nd input only; right with stage4 compiled alone",
    "vit_b_16_b32": "3.2 / 1.9e-6 (inference right: 1.2e-6; torchvision's nn.MultiheadAttention blocks)",
}


@pytest.mark.parametrize("phase", ["inference", "training"])
@pytest.mark.parametrize("name", zoo_broad.NAMES)
def test_zoo_broad(name, phase, request):
    if not _asked_for_slow(request.config):
        pytest.skip("runs with -m slow: C++ compiles and backward of 17 models")
    if not zoo_broad.available(name):
        pytest.skip(f"needs {', '.join(zoo_broad.models.MODELS[name].requires)}")
    if phase == "training" and name in WRONG_TRAINING:
        request.applymarker(pytest.mark.xfail(reason=WRONG_TRAINING[name], strict=True))
    check = zoo_broad.run_check(name, phase)
    assert zoo_broad.within(check, "inductor", phase), check
    assert (check.graphs, check.breaks, check.recompiles) == (1, [], 0), check
