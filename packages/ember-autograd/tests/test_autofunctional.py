"""Auto-functionalization (Note [auto-functionalization]) and list arguments (foreach ops): ops
that write their arguments become functional calls; inputs' final values equal eager's."""
import pathlib
import sys

import pytest
import torch
import torch.fx

from ember_autograd import AotTraceError, trace_inference
from ember_autograd.autofunctional import auto_functional

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import test_functionalize as functionalize_tests  # noqa: E402
from test_functionalize import targets  # noqa: E402

aten = torch.ops.aten


@torch.library.custom_op("ember_test_autograd_af::add_into", mutates_args=("out",))
def add_into(out: torch.Tensor, x: torch.Tensor) -> None:
    out.add_(x)


@add_into.register_fake
def _(out, x):
    return None


@torch.library.custom_op("ember_test_autograd_af::bump", mutates_args=("a", "b"))
def bump(a: torch.Tensor, x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    a.add_(1)
    b.mul_(2)
    return x * a.sum()


@bump.register_fake
def _(a, x, b):
    return torch.empty_like(x)


def run_both(fn, *inputs):
    """test_functionalize's run_both, checked: outputs and inputs after the call equal eager's."""
    eager_out, aot_out, eager_in, aot_in, compiled = functionalize_tests.run_both(fn, *inputs)
    functionalize_tests.assert_same(eager_out, aot_out)
    functionalize_tests.assert_same(eager_in, aot_in)
    return compiled


def test_generated_op_schema_and_kernels():
    auto = auto_functional(torch.ops.ember_test_autograd_af.bump.default)
    assert str(auto.op._schema) == ("ember_autograd::ember_test_autograd_af__bump(Tensor a, Tensor x, Tensor b)"
                                    " -> Tensor[]")
    assert auto.written == ("a", "b") and auto.n_fresh == 1
    assert auto_functional(torch.ops.ember_test_autograd_af.bump.default) is auto  # defined once
    a, x, b = torch.ones(2), torch.ones(2), torch.ones(2)
    fresh, new_a, new_b = auto.op(a, x, b)  # the eager kernel: runs on clones
    torch.testing.assert_close(fresh, torch.full((2,), 4.0))
    torch.testing.assert_close(new_a, torch.full((2,), 2.0))
    torch.testing.assert_close(new_b, torch.full((2,), 2.0))
    assert (a == 1).all() and (b == 1).all()
    with torch._subclasses.fake_tensor.FakeTensorMode() as mode:  # the fake kernel
        out = auto.op(*(mode.from_tensor(t) for t in (a, x, b)))
    assert [tuple(t.shape) for t in out] == [(2,), (2,), (2,)]


def test_custom_op_writing_an_input_golden():
    def f(acc, x):
        add_into(acc, x * 3)
        return (acc.sum(),)

    traced = trace_inference(torch.fx.symbolic_trace(f), [torch.zeros(4), torch.randn(4)])
    assert traced.gm.code.strip().splitlines()[1:] == [
        "    mul_tensor = torch.ops.aten.mul.Tensor(primals_2, 3);  primals_2 = None",
        "    ember_test_autograd_af__add_into_default = torch.ops.ember_autograd.ember_test_autograd_af__add_into"
        ".default(primals_1, mul_tensor);  primals_1 = mul_tensor = None",
        "    getitem = ember_test_autograd_af__add_into_default[0];  ember_test_autograd_af__add_into_default = None",
        "    sum_default = torch.ops.aten.sum.default(getitem)",
        "    return (sum_default, getitem)",  # the input's new value: the runtime copies it back
    ]
    assert traced.signature.mutated_inputs == (0,)
    run_both(f, torch.zeros(4), torch.randn(4))


def test_custom_op_writes_through_views_and_intermediates():
    def f(acc, x):
        add_into(acc[1:], x[1:])  # a slice of an input
        add_into(acc.t()[0], x[:, 0])  # a column through a transpose
        t = x.sin()
        v = t[0]  # a view taken before the write: replayed after it
        y = bump(t, x, acc)  # an intermediate and an input, a fresh return
        return (v * 1, y, t)

    compiled = run_both(f, torch.randn(4, 3), torch.randn(4, 3))
    assert compiled.artifacts.signature.mutated_inputs == (0,)
    assert aten.slice_scatter.default in targets(compiled.artifacts.forward)


def test_foreach_in_place_uses_the_functional_foreach():
    def f(a, b, c):
        torch._foreach_add_([a, b], [c, c], alpha=2.0)
        torch._foreach_mul_([a, b], 3.0)
        return (a + b,)

    compiled = run_both(f, torch.randn(3), torch.randn(3), torch.randn(3))
    ops = targets(compiled.artifacts.forward)
    assert aten._foreach_add.List in ops and aten._foreach_mul.Scalar in ops
    assert compiled.artifacts.signature.mutated_inputs == (0, 1)


def test_overlapping_writes_are_refused():
    def twice(a):
        torch._foreach_add_([a, a], 1.0)
        return (a,)

    def crossed(a, b):
        torch._foreach_add_([a, b], [b, a])  # eager's second add reads the first's result
        return (a,)

    def opaque(a):
        add_into(a[0], a[1])
        return (a,)

    for fn, n in ((twice, 1), (crossed, 2), (opaque, 1)):
        with pytest.raises(AotTraceError, match="share memory") as info:
            trace_inference(torch.fx.symbolic_trace(fn), [torch.randn(2, 3) for _ in range(n)])
        assert info.value.kind == "aliased_arguments"


def test_disjoint_views_of_one_input_are_written():
    def f(x):
        torch._foreach_mul_(x.unbind(1), 2.0)  # interleaved columns: disjoint
        torch._foreach_add_([x[0], x[1:]], [x[0], x[1:]])  # each reads its own position
        return (x * 1,)

    run_both(f, torch.randn(3, 4))


def test_generated_names_never_collide():
    lib = torch.library.Library("ember_test_af_names", "FRAGMENT")
    lib.define("a__b(Tensor(a!) x) -> ()")
    lib.define("a.b(Tensor(a!) x) -> ()")  # mangled alike: ember_test_af_names__a__b
    def add_one(x):
        x.add_(1)

    def add_two(x):
        x.add_(2)

    lib.impl("a__b", add_one, "CompositeExplicitAutograd")
    lib.impl("a.b", add_two, "CompositeExplicitAutograd")
    ops = torch.ops.ember_test_af_names
    one, two = auto_functional(ops.a__b.default), auto_functional(ops.a.b)
    assert one.op is not two.op
    assert one.op(torch.zeros(1))[0].item() == 1 and two.op(torch.zeros(1))[0].item() == 2
