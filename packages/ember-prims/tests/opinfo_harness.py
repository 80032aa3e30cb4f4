"""Run torch's OpInfo samples and check every decomposition the samples reach against ATen.

`Interceptor` sits under autograd: each ATen op that an OpInfo sample runs, forward or backward,
reaches it with concrete arguments; if the op has a decomposition, the decomposition runs on the
same arguments under `StrictDecompose` (which expands the table recursively and allows only prims
and externs at the leaves) and is compared with ATen's result. Backward ops (gelu_backward,
native_layer_norm_backward, ...) are reached by running torch.autograd.grad on the sample, so
they are checked against torch.autograd's own kernels on the same samples.

Shared by tests/test_opinfo.py and scripts/coverage_table.py.
"""
from __future__ import annotations

import dataclasses
import itertools

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils import _pytree as pytree

import ember_prims
from ember_prims._library import is_prim

RANDOM_OPS = {"rand", "randn", "rand_like", "randn_like", "bernoulli", "native_dropout"}
UNINITIALISED_OPS = {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided"}
TOLERANCES = {  # (rtol, atol) per dtype
    torch.float64: (1e-7, 1e-7), torch.float32: (1.3e-5, 1e-5),
    torch.bfloat16: (1.6e-2, 1e-2), torch.float16: (1e-3, 1e-3),
}
SAMPLES_PER_DTYPE = 3  # OpInfo sample inputs used per (op, dtype); keeps the suite fast


class StrictDecompose(TorchDispatchMode):
    """Expand the table recursively; only prims and externs may run, plus `aten.copy_`, with which
    the decompositions of mutating ATen ops (native_batch_norm's running statistics) write back."""

    def __init__(self, table):
        super().__init__()
        self.table = table

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in self.table:
            with self:
                return self.table[func](*args, **kwargs)
        if is_prim(func) or func in ember_prims.EXTERN_OPS or ember_prims.is_metadata_query(func) or \
                func is torch.ops.aten.copy_.default:
            return func(*args, **kwargs)
        raise ember_prims.UndecomposedOpError(f"{func} reached, with no decomposition")


@dataclasses.dataclass
class Result:
    passed: int = 0
    failed: int = 0
    errors: list = dataclasses.field(default_factory=list)


def _compare(expected, actual, name):
    if isinstance(expected, (tuple, list)):
        if not isinstance(actual, (tuple, list)) or len(expected) != len(actual):
            raise AssertionError(f"expected {len(expected)} results, got {type(actual).__name__}")
        for e, a in zip(expected, actual):
            _compare(e, a, name)
        return
    if not isinstance(expected, torch.Tensor):
        if expected != actual:
            raise AssertionError(f"expected {expected!r}, got {actual!r}")
        return
    if not isinstance(actual, torch.Tensor):
        raise AssertionError(f"expected a tensor, got {type(actual).__name__}")
    if expected.shape != actual.shape or expected.dtype != actual.dtype:
        raise AssertionError(f"expected {tuple(expected.shape)}/{expected.dtype}, "
                             f"got {tuple(actual.shape)}/{actual.dtype}")
    if name in RANDOM_OPS or name in UNINITIALISED_OPS:
        return
    rtol, atol = TOLERANCES.get(expected.dtype, (0, 0))
    torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=True)


class Interceptor(TorchDispatchMode):
    def __init__(self, table, results):
        super().__init__()
        self.table, self.results = table, results

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        dense = all(t.layout == torch.strided for t in pytree.tree_leaves((args, kwargs))
                    if isinstance(t, torch.Tensor))
        if func not in self.table:
            self.results.setdefault("unhandled", set()).add(str(func))
        elif dense:
            res = self.results.setdefault(func, Result())
            try:
                with StrictDecompose(self.table):
                    got = self.table[func](*args, **kwargs)
                _compare(out, got, func._opname)
                res.passed += 1
            except Exception as e:  # noqa: BLE001 - every failure is recorded and reported
                res.failed += 1
                if len(res.errors) < 3:
                    res.errors.append(f"{type(e).__name__}: {str(e)[:300]}")
        return out


def pick_dtypes(opinfo):
    supported = opinfo.supported_dtypes("cpu")
    first = torch.float32 if torch.float32 in supported else torch.int64 if torch.int64 in supported else None
    second = next((d for d in (torch.bfloat16, torch.float64, torch.int32, torch.bool) if d in supported
                   and d != first), None)
    return [d for d in (first, second) if d is not None]


def _grad_inputs(sample):
    leaves = [t for t in pytree.tree_leaves((sample.input, sample.args, sample.kwargs))
              if isinstance(t, torch.Tensor) and t.requires_grad]
    return leaves


def run_opinfo(opinfo, table=None, samples_per_dtype=SAMPLES_PER_DTYPE, backward=True, results=None):
    """Run the samples of one OpInfo; returns {aten overload: Result}."""
    table = ember_prims.table() if table is None else table
    results = {} if results is None else results
    for dtype in pick_dtypes(opinfo):
        want_grad = backward and opinfo.supports_autograd and dtype.is_floating_point
        try:
            samples = list(itertools.islice(opinfo.sample_inputs("cpu", dtype, requires_grad=want_grad),
                                           samples_per_dtype))  # lazily: some OpInfos have thousands
        except Exception:  # noqa: BLE001 - a sample generator that fails on this build is skipped
            continue
        for sample in samples:
            torch.manual_seed(0)
            try:
                with Interceptor(table, results):
                    out = opinfo.op(sample.input, *sample.args, **sample.kwargs)
            except Exception:  # noqa: BLE001 - the ATen op itself rejects the sample
                continue
            leaves = _grad_inputs(sample) if want_grad else []
            outs = [o for o in pytree.tree_leaves(out) if isinstance(o, torch.Tensor)
                    and o.requires_grad and o.dtype.is_floating_point and o.layout == torch.strided]
            if leaves and outs:
                grads = [torch.randn(o.shape, dtype=o.dtype) for o in outs]
                try:
                    with Interceptor(table, results):
                        torch.autograd.grad(outs, leaves, grads, allow_unused=True)
                except Exception:  # noqa: BLE001 - e.g. a non-differentiable output
                    pass
    return results
