"""Ops that write their arguments compile through the AOT backends (Note [auto-functionalization]
in ember_autograd/autofunctional.py): torch.library custom ops declared with `mutates_args`, which
have no functional twin, and the foreach ops, which take and return lists of tensors. Before,
either made the AOT trace fail (`no_functional_variant`, or "'list' object has no attribute
'shape'") and the graph ran eagerly with a warning.

Every program runs as test_views_mutation's do (`check_program`): through the default backend
(C++ kernels on CPU), the inductor's Triton path (Triton's interpreter on CPU), aot_eager and
eager, twice with fresh inputs, with no warning from ember; results, every input after the call
and which outputs share memory with an input equal eager's (float32: rtol=1e-4, atol=1e-5).
"""
from __future__ import annotations

import pathlib
import sys
import warnings

import pytest
import torch

import ember

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from test_views_mutation import BACKENDS, TOL, Program, check_program  # noqa: E402


# --- custom ops that write their arguments ------------------------------------------------------

@torch.library.custom_op("ember_test_autofunc::add_into", mutates_args=("out",))
def add_into(out: torch.Tensor, x: torch.Tensor) -> None:
    out.add_(x)


@add_into.register_fake
def _(out, x):
    return None


@torch.library.custom_op("ember_test_autofunc::scale_both", mutates_args=("a", "b"))
def scale_both(a: torch.Tensor, b: torch.Tensor, x: torch.Tensor, alpha: float) -> None:
    a.mul_(x)
    b.add_(x, alpha=alpha)


@scale_both.register_fake
def _(a, b, x, alpha):
    return None


@torch.library.custom_op("ember_test_autofunc::count_and_scale", mutates_args=("counter",))
def count_and_scale(counter: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    counter.add_(1)
    return x * counter


@count_and_scale.register_fake
def _(counter, x):
    return torch.empty_like(x)


@torch.library.custom_op("ember_test_autofunc::push_all", mutates_args=("bufs",))
def push_all(bufs: list[torch.Tensor], x: torch.Tensor) -> None:
    for i, b in enumerate(bufs):
        b.mul_(0.5).add_(x * (i + 1))


@push_all.register_fake
def _(bufs, x):
    return None


PROGRAMS: dict[str, Program] = {}


def program(*shapes):
    def wrap(fn):
        PROGRAMS[fn.__name__] = Program(fn, lambda: [torch.randn(s) for s in shapes])
        return fn
    return wrap


@program((4,), (4,))
def one_written_input(acc, x):
    add_into(acc, x * 3)
    return acc.sum()


@program((3, 4), (3, 4), (3, 4))
def two_written_inputs(a, b, x):
    scale_both(a, b, x.sin(), 0.5)
    return a + b


@program((4, 5), (5,))
def written_view_of_an_input(acc, x):
    add_into(acc[1], x)  # a row of acc: the write reaches acc
    add_into(acc.t()[2], x[:4].cos())  # a column, through a transpose
    return acc * 2


@program((4, 5), (4, 5))
def written_intermediate(x, y):
    t = x * 2
    add_into(t, y)
    v = t.view(-1)  # a view of the intermediate taken before the next write sees it
    add_into(t, y.exp())
    return v.sum(), t.tanh()


@program((3,), (3, 2))
def written_and_returned(counter, x):
    y = count_and_scale(counter, x.t().contiguous())
    return y + counter.sum()


@program((3, 2), (2, 3), (3, 2))
def written_list_argument(a, b, x):
    push_all([a, b.t().contiguous(), torch.zeros_like(a)], x)  # a list: a, two temporaries
    push_all([a[0], b[:, 1]], x[1])  # views of inputs in a list
    return a.sum() + b.sum()


# --- foreach ops ----------------------------------------------------------------------------------

@program((3,), (3,))
def foreach_in_place(a, b):
    torch._foreach_add_([a, b], 1.0)
    torch._foreach_mul_([a, b], [a, b])
    return a + b


@program((3, 4), (5,), (3, 4), (5,))
def foreach_sgd_momentum(p1, p2, g1, g2):
    # a hand-written optimizer step: the momentum buffers are temporaries here, the parameters
    # are inputs updated in place
    bufs = torch._foreach_mul([g1, g2], 0.9)
    torch._foreach_add_(bufs, [g1, g2], alpha=0.1)
    torch._foreach_add_([p1, p2], bufs, alpha=-0.01)
    torch._foreach_addcmul_([p1, p2], [g1, g2], [g1, g2], value=1e-3)
    return p1.sum() + p2.sum()


@program((2, 3), (4,), (2, 3), (4,))
def foreach_out_of_place(a, b, c, d):
    s = torch._foreach_add([a, b], [c, d])
    r = torch._foreach_sqrt(torch._foreach_abs(s))
    m = torch._foreach_maximum(r, [c, d])
    return (*m, torch._foreach_norm([a, b])[1])


@program((4, 4), (4,))
def foreach_writes_views_of_an_input(x, y):
    torch._foreach_mul_([x[0], x[1:, 1], x[2:, 2:]], 2.0)  # views of one input, disjoint
    torch._foreach_add_(list(x.unbind(1)), [y, y, y, y])  # its columns: interleaved, disjoint
    return x.sum(0)


# --- ATen ops with no functional twin -------------------------------------------------------------

@program((4, 3), (3,))
def aten_out_factories(x, t):
    torch.zeros(3, out=t)
    torch.arange(3, out=x[0])  # into a row of x
    torch.full((3,), 2.0, out=x[:, 1][:3])
    return x + t.sum()


@pytest.mark.parametrize("backend", ["inductor", "aot_eager", "eager"])
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_mutating_ops_compile(name, backend):
    check_program(PROGRAMS[name], backend)


@pytest.mark.parametrize("name", ["two_written_inputs", "written_view_of_an_input", "foreach_sgd_momentum"])
def test_mutating_ops_triton_interpreted(name):
    check_program(PROGRAMS[name], "triton")


def test_fullgraph_compiles_a_custom_op_that_writes():
    compiled = ember.compile(written_view_of_an_input, fullgraph=True)
    acc, x = torch.randn(4, 5), torch.randn(5)
    ref = acc.clone()
    torch.testing.assert_close(compiled(acc, x), written_view_of_an_input(ref, x))
    torch.testing.assert_close(acc, ref)


# --- training: a buffer written by a custom op, read by the differentiated computation ---------

class RunningScale(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)
        self.register_buffer("running", torch.zeros(3))

    def forward(self, x):
        h = self.lin(x)
        add_into(self.running, h.detach().mean(0) * 0.1)
        return (h * self.running).pow(2).sum()


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_training_reads_a_buffer_a_custom_op_wrote(backend):
    torch.manual_seed(0)
    mine, ref = RunningScale(), RunningScale()
    ref.load_state_dict(mine.state_dict())
    compiled = ember.compile(mine, **BACKENDS[backend])
    for _ in range(2):
        x = torch.randn(5, 4)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            compiled(x).backward()
        assert [str(w.message) for w in caught] == []
        ref(x).backward()
        torch.testing.assert_close(mine.running, ref.running, **TOL)
        for (name, p), q in zip(mine.named_parameters(), ref.parameters()):
            torch.testing.assert_close(p.grad, q.grad, **TOL, msg=lambda m: f"{name}.grad: {m}")


# --- what stays eager: writes that overlap (Note [overlapping writes]) ----------------------------

def same_tensor_written_twice(a):
    torch._foreach_add_([a, a], 1.0)  # eager adds 2
    return a * 1


def overlapping_views_written(x):
    torch._foreach_mul_([x[0], x[:, 1]], 2.0)  # eager doubles x[0, 1] twice
    return x * 1


def written_argument_read_as_another(acc):
    add_into(acc, acc)  # the kernel's order of reads and writes is its own
    return acc * 1


@pytest.mark.parametrize("fn", [same_tensor_written_twice, overlapping_views_written,
                                written_argument_read_as_another])
@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_overlapping_writes_run_eagerly(fn, backend):
    compiled = ember.compile(fn, **BACKENDS[backend])
    a = torch.randn(3, 3)
    ref = a.clone()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = compiled(a)
    torch.testing.assert_close(out, fn(ref))
    torch.testing.assert_close(a, ref)
    messages = [str(w.message) for w in caught]
    assert len(messages) == 1 and "share memory" in messages[0], messages
    with pytest.raises(Exception, match="share memory"):
        ember.compile(fn, fullgraph=True, **BACKENDS[backend])(a.clone())


# --- sizes that change between calls: the graph is recompiled with symbolic sizes -----------------

SIZED = {
    "written_view_of_an_input": lambda n: [torch.randn(4, n), torch.randn(n)],
    "written_list_argument": lambda n: [torch.randn(n, 2), torch.randn(2, n), torch.randn(n, 2)],
    "foreach_sgd_momentum": lambda n: [torch.randn(n, 4), torch.randn(n), torch.randn(n, 4), torch.randn(n)],
}


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize("name", list(SIZED))
def test_mutating_ops_with_changing_sizes(name, backend):
    fn = PROGRAMS[name].fn
    compiled = ember.compile(fn, **BACKENDS[backend])
    for n in (5, 6, 9):
        inputs = SIZED[name](n)
        eager_in, mine_in = [t.clone() for t in inputs], [t.clone() for t in inputs]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            actual = compiled(*mine_in)
        assert [str(w.message) for w in caught] == []
        torch.testing.assert_close(actual, fn(*eager_in), **TOL)
        for a, e in zip(mine_in, eager_in):
            torch.testing.assert_close(a, e, **TOL)


def fills_with_normal(x):
    t = torch.empty_like(x)
    t.normal_(mean=2.0, std=0.5)  # aten.normal_ has no functional twin
    return x + t


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_random_in_place_op_without_a_functional_twin(backend):
    compiled = ember.compile(fills_with_normal, **BACKENDS[backend])
    for _ in range(2):
        x = torch.randn(4000)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            noise = compiled(x) - x
        assert [str(w.message) for w in caught] == []
        assert abs(noise.mean().item() - 2.0) < 0.05 and abs(noise.std().item() - 0.5) < 0.05


# --- a hand-written optimizer step over foreach ops -----------------------------------------------

@torch.no_grad()
def sgd_momentum_step(params, grads, bufs, lr: float, momentum: float):
    torch._foreach_mul_(bufs, momentum)
    torch._foreach_add_(bufs, grads)
    torch._foreach_add_(params, bufs, alpha=-lr)


def _train(step) -> list:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    params = list(model.parameters())
    bufs = [torch.zeros_like(p) for p in params]
    for i in range(3):
        x = torch.randn(5, 4, generator=torch.Generator().manual_seed(i))
        model(x).pow(2).sum().backward()
        step(params, [p.grad for p in params], bufs, 0.1, 0.9)
        for p in params:
            p.grad = None
    return [p.detach() for p in params] + bufs


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_foreach_optimizer_step_updates_parameters_in_place(backend):
    """Parameters that require grad, updated under no_grad by foreach ops (an inference graph:
    ErrorKind.INFERENCE_ONLY), with momentum buffers as inputs written in place."""
    compiled = ember.compile(sgd_momentum_step, **BACKENDS[backend])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mine = _train(compiled)
    assert [str(w.message) for w in caught if "ember" in str(w.message)] == []
    for a, e in zip(mine, _train(sgd_momentum_step)):
        torch.testing.assert_close(a, e, **TOL)
