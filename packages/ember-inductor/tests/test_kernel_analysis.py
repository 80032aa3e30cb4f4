"""Note [shared kernel analyses]: what both code generators compute alike about a kernel (the
accumulator dtype, column-reduction detection) is one function each, and both render it.

Hand-built kernel descriptions (test_triton_specs.SpecBuilder) through both backends: the C++
one compiled, the Triton one under its interpreter on CPU tensors.
"""
from __future__ import annotations

import ast
import os
import pathlib
import sys

import pytest
import torch

from ember_inductor import InductorOptions
from ember_inductor.codegen.common import get_backend
from ember_inductor.kernel_analysis import accumulator_dtype, is_column_reduction

sys.path.insert(0, os.path.dirname(__file__))
from test_triton_specs import SpecBuilder  # noqa: E402

SRC = pathlib.Path(__file__).resolve().parents[1] / "src" / "ember_inductor"


def _row_sum(dtype, rows=3, cols=70):
    b = SpecBuilder("row_sum", (rows,), (cols,))
    x = b.load("x", b.x(0) * cols + b.r(0), dtype)
    b.store("out", b.x(0), b.reduce("sum", x))
    return b.build()


def _column_sum(rows=64, cols=5, extra_row_load=False):
    b = SpecBuilder("column_sum", (cols,), (rows,))
    v = b.load("x", b.r(0) * cols + b.x(0), torch.float32)
    if extra_row_load:  # a second operand read along the reduced dim
        v = b.pw("mul", v, b.load("w", b.r(0), torch.float32))
    b.store("out", b.x(0), b.reduce("sum", v))
    return b.build()


@pytest.mark.parametrize("kind,dtype,acc", [
    ("sum", torch.int32, torch.int64), ("prod", torch.int8, torch.int64), ("sum", torch.bool, torch.int64),
    ("amax", torch.int16, torch.int16), ("amin", torch.bool, torch.int32), ("any", torch.float32, torch.int32),
    ("sum", torch.float16, torch.float32), ("argmax", torch.bfloat16, torch.float32),
    ("sum", torch.float64, torch.float64),
])
def test_accumulator_dtype(kind, dtype, acc):
    assert accumulator_dtype(kind, dtype) == acc


def test_both_backends_accumulate_an_int32_sum_in_int64(tmp_path):
    """The C++ backend summed int32 in int64_t and Triton in int32 (failed before): both now
    render accumulator_dtype, and give eager's wrapped int32 result."""
    spec = _row_sum(torch.int32)
    options = InductorOptions(cache_dir=str(tmp_path))
    cpp = get_backend("cpp").render(spec, options).source
    triton = get_backend("triton").render(spec, options).source
    assert "int64_t acc" in cpp, cpp
    assert "tl.int64" in triton, triton
    x = torch.full((3, 70), 2**30, dtype=torch.int32)
    x[:, 0] = torch.arange(3, dtype=torch.int32)
    want = x.sum(1, dtype=torch.int64).to(torch.int32)  # what the prim's int32 result holds
    for name, source in (("cpp", cpp), ("triton", triton)):
        backend = get_backend(name)
        [launch] = backend.build([backend.render(spec, options)], options)
        out = torch.empty(3, dtype=torch.int32)
        launch(x, out)
        torch.testing.assert_close(out, want, rtol=0, atol=0, msg=name)


def test_a_bool_sum_counts_then_compares_on_both_backends(tmp_path):
    spec = _row_sum(torch.bool, rows=2, cols=70)
    options = InductorOptions(cache_dir=str(tmp_path))
    x = torch.zeros(2, 70, dtype=torch.bool)
    x[0, :2] = True   # an even count: a 1-bit accumulator would wrap to False
    for name in ("cpp", "triton"):
        backend = get_backend(name)
        [launch] = backend.build([backend.render(spec, options)], options)
        out = torch.empty(2, dtype=torch.bool)
        launch(x, out)
        assert out.tolist() == [True, False], name


def test_column_reduction_detection():
    assert is_column_reduction(_column_sum())
    assert not is_column_reduction(_row_sum(torch.float32))
    assert not is_column_reduction(_column_sum(extra_row_load=True))  # a load contiguous along r
    assert not is_column_reduction(_column_sum(rows=1, cols=1).__class__(  # no reduction ranges
        "pointwise", (5,), (), (), ()))


def test_the_ir_does_not_import_code_generation():
    """The kernel description and index arithmetic live outside codegen/: the IR and lowering
    import neither backends nor their registry."""
    for path in [SRC / "ir.py", *sorted((SRC / "lowering").glob("*.py"))]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith("ember_inductor.codegen"), (path.name, node.module)


def test_a_backend_refuses_a_device_it_cannot_address(tmp_path):
    """Backend.device_types is read: C++ kernels handed meta (or CUDA) tensors crashed the
    process at the first call (a segmentation fault before); now compiling says why."""
    import ember_prims
    from ember_inductor import compile_graph
    from ember_inductor.graph_builder import GraphBuilder
    b = GraphBuilder()
    b.output(b.call(ember_prims.ops.exp.default, b.input(torch.randn(4, device="meta"))))
    with pytest.raises(ValueError, match="cpp backend runs on cpu tensors, not meta ones"):
        compile_graph(b.build(), b.examples, InductorOptions(cache_dir=str(tmp_path), backend="cpp"))
