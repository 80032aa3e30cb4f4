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
# difference is in the inductor's path). Found when the suite was added (2026-11-27); mobilenet_v3
# and regnet_y were batch norm's float32 sums (Note [batch-norm sums in double on the CPU] in
# ember_prims/decomps/norms.py) and pass now. Not strict: shufflenet's remaining difference sits in
# gradients near zero, and ViT's passed in one run after that change, unexplained.
WRONG_TRAINING = {
    "shufflenet_v2_x1_0_b128": "9.2e-3 / 3.0e-4 after batch norm's double sums (2.7e-2 before)",
    "vit_b_16_b32": "3.2 / 1.9e-6 once (inference right: 1.2e-6; torchvision's nn.MultiheadAttention blocks)",
}


@pytest.mark.parametrize("phase", ["inference", "training"])
@pytest.mark.parametrize("name", zoo_broad.NAMES)
def test_zoo_broad(name, phase, request):
    if not _asked_for_slow(request.config):
        pytest.skip("runs with -m slow: C++ compiles and backward of 17 models")
    if not zoo_broad.available(name):
        pytest.skip(f"needs {', '.join(zoo_broad.models.MODELS[name].requires)}")
    if phase == "training" and name in WRONG_TRAINING:
        request.applymarker(pytest.mark.xfail(reason=WRONG_TRAINING[name], strict=False))
    check = zoo_broad.run_check(name, phase)
    assert zoo_broad.within(check, "inductor", phase), check
    assert (check.graphs, check.breaks, check.recompiles) == (1, [], 0), check
