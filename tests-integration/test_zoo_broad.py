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

# Training steps whose check is ill-conditioned at the tiny size, not wrong (non-strict xfail).
# shufflenet_v2 (2026-11-28): ember 9.1e-3 from float64 at its first batch, eager 3.0e-4, all
# of it one ReLU input (stage3.5.branch2.2) at 8.5e-7 of its tensor's largest value that
# float32 rounding puts on the other side of 0 in ember's run only: against a float64 run with
# that one mask element flipped, ember is 2.2e-4 and eager 9.2e-3. Over six batches ember is
# within 2x of eager on the other five, and on one of them eager is the one 0.25 away (a flip
# of its own). Batch norm over 8 values per channel in the last stages amplifies such a flip.
# ViT's 3.2 was a real bug, fixed: q, k, v sliced from a channels-last buffer reached the CPU
# flash attention with a last-dimension stride of 2 (Note [attention operands with a dense last
# dimension] in ember_inductor/layout.py); now 2.2e-6 against eager's 1.9e-6 from float64.
WRONG_TRAINING = {
    "shufflenet_v2_x1_0_b128": "one ReLU input near 0 rounds to the other side in ember's float32 run (see above)",
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
