"""Differential harness: small ordinary Python programs (python_programs.py), run eagerly and
through `ember.compile` (backend="eager": capture alone; "aot_eager" for the programs marked
`aot`; dynamic=True too for those marked `dynamic`), several calls each with the inputs and the
external state changed between calls.

Each program is built twice from two fresh loads of python_programs.py, so the eager world and
the compiled world have their own globals, classes and closures. After every call the results,
the arguments (mutated in place or not), the program's `state()` snapshot and the printed
output must be equal (a program's `around(i)`, a context manager, sets the caller's global state,
a default dtype or grad mode, around call i in both worlds): ints, bools and strings exactly, tensors with assert_close plus dtype,
shape and requires_grad. An exception raised eagerly must be raised, with the same type and
message, by the compiled function.
"""
from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import io
import math
import pathlib
import random
import sys
import warnings

import pytest
import torch

import ember

HERE = pathlib.Path(__file__).parent
_SOURCE = HERE / "python_programs.py"
_loads = 0


def fresh_world():
    """A new module object for python_programs.py: its own globals and classes."""
    global _loads
    _loads += 1
    name = f"_ember_python_programs_{_loads}"
    spec = importlib.util.spec_from_file_location(name, _SOURCE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


_INDEX = fresh_world()
NAMES = sorted(n for n in vars(_INDEX) if n.startswith("p_"))
AOT_NAMES = sorted(n for n in NAMES if getattr(_INDEX, n)().aot)
DYNAMIC_NAMES = sorted(n for n in NAMES if getattr(_INDEX, n)().dynamic)


def same(actual, expected, path="out"):
    """Equal as Python sees it, tensors by value; types must match (a world's own classes by
    name, since each world defines its own)."""
    ta, te = type(actual), type(expected)
    assert ta.__qualname__ == te.__qualname__, f"{path}: type {ta.__qualname__} != {te.__qualname__}"
    if isinstance(expected, torch.Tensor):
        assert actual.dtype == expected.dtype, f"{path}: dtype {actual.dtype} != {expected.dtype}"
        assert actual.shape == expected.shape, f"{path}: shape {actual.shape} != {expected.shape}"
        assert actual.requires_grad == expected.requires_grad, f"{path}: requires_grad"
        torch.testing.assert_close(actual.detach().as_subclass(torch.Tensor),
                                   expected.detach().as_subclass(torch.Tensor), rtol=1e-5, atol=1e-5,
                                   equal_nan=True, msg=lambda m: f"{path}: {m}")
    elif isinstance(expected, float):
        assert (math.isnan(actual) and math.isnan(expected)) or (
            actual == expected and math.copysign(1, actual) == math.copysign(1, expected)), \
            f"{path}: {actual!r} != {expected!r}"
    elif isinstance(expected, (list, tuple)):
        assert len(actual) == len(expected), f"{path}: len {len(actual)} != {len(expected)}"
        for i, (a, e) in enumerate(zip(actual, expected)):
            same(a, e, f"{path}[{i}]")
    elif isinstance(expected, dict):
        assert list(map(repr, actual)) == list(map(repr, expected)), f"{path}: keys {list(actual)} != {list(expected)}"
        for (ka, a), (ke, e) in zip(actual.items(), expected.items()):
            same(a, e, f"{path}[{ke!r}]")
    elif isinstance(expected, (set, frozenset)):
        assert sorted(map(repr, actual)) == sorted(map(repr, expected)), f"{path}: {actual} != {expected}"
    elif isinstance(expected, (int, str, bytes, type(None), bool, torch.dtype, torch.Size)):
        assert actual == expected, f"{path}: {actual!r} != {expected!r}"
    elif isinstance(expected, torch.Generator):
        same(actual.get_state(), expected.get_state(), f"{path}.get_state()")
    elif isinstance(expected, torch.nn.Module):
        same(dict(actual.state_dict()), dict(expected.state_dict()), f"{path}.state_dict()")
        same(actual.training, expected.training, f"{path}.training")
    elif dataclasses.is_dataclass(expected):
        same(dataclasses.asdict(actual), dataclasses.asdict(expected), path)
    elif hasattr(expected, "__dict__") and not isinstance(expected, type):
        same(vars(actual), vars(expected), f"{path}.__dict__")
    else:
        assert repr(actual) == repr(expected), f"{path}: {actual!r} != {expected!r}"


def split(inputs):
    if inputs and isinstance(inputs[-1], dict) and type(inputs[-1]).__name__ == "KW":
        return inputs[:-1], dict(inputs[-1])
    return inputs, {}


def run_one(fn, inputs, seed, around=None):
    args, kwargs = split(inputs)
    torch.manual_seed(seed)
    random.seed(seed)
    out = io.StringIO()
    with contextlib.redirect_stdout(out), (around or contextlib.nullcontext()):
        try:
            result = ("ok", fn(*args, **kwargs))
        except Exception as e:  # noqa: BLE001 -- the eager world's exceptions are part of the answer
            result = ("raised", type(e).__name__, str(e))
    return result, args, kwargs, out.getvalue()


def _build(world, name):
    torch.manual_seed(0)  # the two worlds' modules start with the same parameters
    return getattr(world, name)()


def run_program(name, backend, fullgraph=False, dynamic=None):
    worlds = [fresh_world(), fresh_world()]
    eager, comp = (_build(w, name) for w in worlds)
    compiled = ember.compile(comp.fn, backend=backend, fullgraph=fullgraph, dynamic=dynamic)
    for i in range(eager.calls):
        torch.manual_seed(1000 + i)
        e_inputs = eager.inputs(i)
        torch.manual_seed(1000 + i)
        c_inputs = comp.inputs(i)
        expected = run_one(eager.fn, e_inputs, seed=i, around=eager.around and eager.around(i))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            actual = run_one(compiled, c_inputs, seed=i, around=comp.around and comp.around(i))
        where = f"{name}, call {i}"
        same(actual[0], expected[0], f"{where}: result")
        same(actual[1:3], expected[1:3], f"{where}: arguments after the call")
        assert actual[3] == expected[3], f"{where}: printed {actual[3]!r} != {expected[3]!r}"
        if eager.state is not None:
            same(comp.state(), eager.state(), f"{where}: state")
        if isinstance(eager.fn, torch.nn.Module):
            same(comp.fn, eager.fn, f"{where}: module")
        if eager.mutate is not None and i + 1 < eager.calls:
            for world in (eager, comp):
                torch.manual_seed(2000 + i)  # a layer made here is the same in both worlds
                world.mutate(i)


@pytest.mark.parametrize("name", NAMES)
def test_program_capture_only(name):
    run_program(name, "eager")


@pytest.mark.parametrize("name", AOT_NAMES)
def test_program_aot_eager(name):
    run_program(name, "aot_eager")


@pytest.mark.parametrize("name", DYNAMIC_NAMES)
def test_program_dynamic(name):
    run_program(name, "eager", dynamic=True)
