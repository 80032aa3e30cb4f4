"""Every decomposition against ATen on torch's OpInfo samples (float32 plus one more dtype),
forward and, through torch.autograd on the same samples, backward. See opinfo_harness.py.

The OpInfos run are tests/opinfo_selection.json: one OpInfo per ATen op of the table, picked by
scripts/coverage_table.py --discover, each with at most SAMPLES_PER_DTYPE samples per dtype.
"""
import json
import pathlib

import pytest

import opinfo_harness as H

HERE = pathlib.Path(__file__).resolve().parent
SELECTION = json.loads((HERE / "opinfo_selection.json").read_text())

# Failures that are understood; each is counted in the coverage table of docs/prims.md.
KNOWN_FAILURES = {
    "aten.as_strided.default": "samples whose input is a view into a larger storage: as_strided then "
                               "reads storage outside the input's values, which value-semantics prims never see",
    "aten.index.Tensor": "boolean-mask indices have a data-dependent output shape",
    "aten.index_put.default": "boolean-mask indices have a data-dependent shape (a single full mask with "
                              "one value is supported, as a where)",
    "aten.baddbmm.default": "bfloat16: ATen adds the bias before rounding the product; the extern bmm rounds first",
    "aten.addr.default": "bfloat16: ATen's kernel rounds its intermediate steps differently on some samples",
    "aten.native_layer_norm_backward.default": "normalising over one element: ATen's x_hat is exactly 0, ours "
                                               "is rounding noise scaled by 1/sqrt(eps)",
}


@pytest.fixture(scope="module")
def opinfos():
    from torch.testing._internal.common_methods_invocations import op_db
    return {(f"{oi.name}.{oi.variant_test_name}" if oi.variant_test_name else oi.name): oi for oi in op_db}


@pytest.mark.parametrize("key", SELECTION)
def test_opinfo_samples(key, opinfos):
    if key not in opinfos:
        pytest.skip(f"{key} is not in this torch's op_db")
    results = H.run_opinfo(opinfos[key])
    results.pop("unhandled", None)
    failed = {str(op): r.errors for op, r in results.items() if r.failed and str(op) not in KNOWN_FAILURES}
    assert not failed, failed
