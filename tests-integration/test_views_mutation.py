"""Compositions of views and in-place updates through ember.compile, against eager (issue 13).

A write through one view must be seen through the base and through every other view of the
same storage; a mutated input must hold eager's value after the call. Each single op passes its
OpInfo samples alone: what broke were compositions (slice/select/index scatters over one
buffer, views of views, views taken before a mutation), so each program here mixes several.

Every program runs through the default backend (C++ kernels on CPU), the inductor's Triton path
(kernels run by Triton's interpreter on CPU), aot_eager and eager, twice with fresh inputs; the
outputs, their dtypes, which outputs share memory with an input, and every input after the call
are compared with eager. float32 tolerances: rtol=1e-4, atol=1e-5 (generated kernels).
"""
from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from typing import Callable

import pytest
import torch
from torch.utils import _pytree as pytree

import ember

TOL = dict(rtol=1e-4, atol=1e-5)


@dataclass(frozen=True)
class Program:
    fn: Callable
    make: Callable[[], list]  # fresh inputs
    fallback_ok: frozenset = frozenset()  # backends allowed to run it eagerly (with a warning)
    no_prims: bool = False  # uses ops with no prim (complex and bitcast views): see `check`


PROGRAMS: dict[str, Program] = {}


def program(*shapes, make=None, fallback_ok=(), no_prims=False):
    """Registers `fn`, called on fresh randn inputs of `shapes` (or on `make()`)."""
    def wrap(fn):
        maker = make or (lambda: [torch.randn(s) for s in shapes])
        PROGRAMS[fn.__name__] = Program(fn, maker, frozenset(fallback_ok), no_prims)
        return fn
    return wrap


# --- writes through views of an input ---------------------------------------------------------

@program((4, 4))
def select_fill_then_column_sub(x):  # issue 13, item 10
    x[1].fill_(0.0)
    x[:, 2] -= 3
    return x + 0


@program((4, 4))
def view_of_view_of_input(x):
    x[1:3][:, 0].neg_()
    x.t()[1].mul_(2)
    return x.sum(0)


@program((4, 4), (4,))
def transpose_select_add(x, y):
    x.t()[0].add_(y)
    return x * 1


@program((4, 4))
def reshape_view_of_input_zeroed(x):
    x.view(2, 8)[1].zero_()
    return x.mean()


@program((4, 4))
def unsqueeze_squeeze_chain_on_input(x):
    x.unsqueeze(1).squeeze(1)[2].fill_(1.0)
    x.unsqueeze(0)[0, :, 3] = 7.0
    return x * 2


@program((4, 4))
def view_output_of_mutated_input(x):
    v = x[0]
    v.add_(1)
    return v  # aliases the input


@program((4, 4))
def mutated_input_returned_transposed(x):
    x.mul_(2)
    return x.t(), x.view(-1)


@program((6, 4))
def stepped_slice_of_input(x):
    x[::2] += 1
    x[1::3, 1:] *= 2
    return x.sum()


# --- writes through views of an intermediate ---------------------------------------------------

@program((4, 4))
def flat_view_then_transposed_setitem(x):  # issue 13, item 10
    b = x.clone()
    v = b.view(-1)
    v.add_(1)
    t = b.t()
    t[1] = 3.0
    return b, v.sum()


@program((4, 4))
def stale_view_is_regenerated(x):
    y = x * 2
    v = y[0]  # taken before the base changes
    y.add_(1)
    return v * 1


@program((4, 4))
def stale_view_output(x):
    y = x.clone()
    v = y[:, 0]
    y.mul_(2)
    return v


@program((4, 4))
def overlapping_slices(x):
    y = x.clone()
    a = y[0:3]
    b = y[1:4]
    a.mul_(2)
    b.add_(1)
    return y, a, b


@program((4, 4))
def intermediate_and_its_view_returned(x):
    y = x * 2
    v = y[0]
    v.add_(1)
    return y, v


@program((4, 6))
def transpose_slice_write(x):
    y = x.clone()
    y.transpose(0, 1)[1:3] = 0.0
    y[:, 4:].transpose(0, 1)[0, 2] = 9.0
    return y


@program((2, 3, 4), (3,))
def select_chain_3d(x, t):
    y = x.clone()
    y[1, :, 2] = t
    y[0][1][3] += 5
    return y


@program((4, 4))
def split_views_written(x):
    y = x.clone()
    a, b = y.split(2)
    a.add_(1)
    b.mul_(2)
    c, d = y.chunk(2, dim=1)
    d.copy_(c)
    return y, a


@program((4, 3))
def unbind_views_written(x):
    y = x.clone()
    r0, r1, r2 = y.unbind(1)
    r1.fill_(0.5)
    r2.add_(r0)
    return y


@program((4, 4))
def detach_is_an_alias(x):
    y = x * 1
    d = y.detach()
    d.add_(1)
    return y


@program((3, 4))
def expand_read_after_base_write(x):
    y = x.clone()
    e = y[0:1].expand(3, 4)
    y[0].add_(1)
    return e * 1


@program((5, 4))
def loop_of_row_updates(x):
    y = x.clone()
    for i in range(3):
        y[i + 1] += y[i]
    return y


@program((4, 4))
def setitem_broadcast_from_other_row(x):
    y = x.clone()
    y[1:3] = y[0]
    y[:, 0] = y[:, 3] * 2
    return y


@program((4, 4))
def outputs_sharing_an_intermediate(x):
    y = x * 2
    return y, y[1], y.t(), y.view(2, 8)[1]


@program((4, 4), fallback_ok={"inductor", "triton", "aot_eager"})
def views_written_after_a_graph_break(x):  # a view and its base both inputs of one graph: eager
    y = x * 1
    v = y[0]
    w = x[1]
    if y.sum() > 1e9:  # a data-dependent branch: a graph break, v and w cross it
        v = v * 0
    v.add_(1)  # a view of an intermediate
    w.mul_(3)  # a view of the input, passed to the next graph with the input
    return y * 2, x.sum(0)


# --- indexed assignment (index_put) composed with slices ----------------------------------------

@program(make=lambda: [torch.rand(4, 5)])
def mask_assign_then_column(x):  # issue 13, item 11
    y = x.clone()
    y[y > 0.5] = 1.0
    y[:, -1] = 2.0
    return y


@program((3, 4))
def index_assign_then_read_modify_write(x):  # issue 13, item 11
    n, m = x.shape
    y = torch.zeros(n + 1, m)
    i = torch.tensor([0, 2])
    y[i] = x[i] * 3
    y[i, 1] += 1
    return y


@program((4, 4))
def mask_on_a_row_view(x):
    y = x.clone()
    row = y[0]
    row[row > 0] = 0.0
    y[1:3][y[1:3] < 0] = -1.0
    return y


@program((5, 3), (4, 3))
def index_put_accumulate_then_slice(x, v):
    y = x.clone()
    idx = torch.tensor([0, 2, 2, 4])
    y.index_put_((idx,), v, accumulate=True)
    y[1:3] *= 0.5
    return y


@program((4, 4))
def input_index_put_through_view(x):
    idx = torch.tensor([1, 3])
    x[:, 1][idx] = 0.0
    x[2:][:, idx] += 1.0
    return x.sum(1)


@program((4, 4), make=lambda: [torch.randn(4, 4), torch.rand(4, 2) > 0.5])
def masked_fill_on_slice(x, mask):
    y = x.clone()
    y[:, :2].masked_fill_(mask, 0.0)
    y[:, 2:].masked_fill_(mask, 5.0)
    return y


@program(make=lambda: [torch.randn(4, 5), torch.randn(4, 2)])
def scatter_into_slice(x, src):
    y = x.clone()
    idx = torch.tensor([[0, 2], [1, 3], [3, 0], [2, 1]])
    y[:, 1:].scatter_(1, idx, src)
    return y


@program((5, 4), (2, 4))
def index_copy_and_fill_on_views(x, s):
    y = x.clone()
    y[1:].index_copy_(0, torch.tensor([0, 3]), s)
    y.t().index_fill_(0, torch.tensor([2]), -2.0)
    return y


@program((4, 4), (2, 2))
def two_index_tensors(x, v):
    y = x.clone()
    i, j = torch.tensor([0, 3]), torch.tensor([1, 2])
    y[i[:, None], j] = v
    y[i, j] += 10.0
    y[1:3][:, j] = -1.0  # columns of a row slice
    return y


@program((4, 5), make=lambda: [torch.randn(4, 5), torch.tensor([True, False, True, False, True])])
def boolean_columns_and_ellipsis(x, cols):
    y = x.clone()
    y[:, cols] = 0.0
    y[..., 1] = 3.0
    y[None, 2] = 4.0
    y[-2:, -1] -= 1.0
    return y


@program((4, 6), (4, 2))
def out_variant_and_index_add_into_views(x, s):
    y = x.clone()
    torch.add(s, 1.0, out=y[:, 0:2])
    y[:, 2:].index_add_(1, torch.tensor([0, 3]), s)
    y.T[5].copy_(s[:, 0])
    return y


@program(make=lambda: [torch.randn(4, 6)])
def reshape_copy_is_not_a_view(x):
    flat = x.t().reshape(-1)  # a copy: writes to it do not reach x
    flat.add_(100.0)
    same = x.reshape(-1)  # a view: writes to it do
    same[:3] = 0.0
    x.contiguous()[1, 1] = 7.0  # contiguous() of a contiguous tensor is the tensor itself
    return flat, x.movedim(0, 1).unflatten(0, (2, 3)) * 1


@program((3, 4), no_prims=True)
def bitcast_view_written(x):
    y = x.clone()
    bits = y.view(torch.int32)
    bits[0].bitwise_and_(-2)
    return y, bits


class KVCache(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("k", torch.zeros(2, 8, 4))
        self.register_buffer("steps", torch.zeros((), dtype=torch.long))

    def forward(self, new, pos: int):
        self.k[:, pos:pos + new.shape[1]] = new
        self.k[:, 0].mul_(0.5)
        self.steps += 1
        return self.k[:, :pos + new.shape[1]].sum(1)


@pytest.mark.parametrize("backend", ["inductor", "triton", "aot_eager"])
def test_module_buffer_updated_through_slices(backend):
    eager, mine = KVCache(), KVCache()
    compiled = ember.compile(mine, **BACKENDS[backend])
    for pos in (0, 0, 2):  # a new int recompiles
        new = torch.randn(2, 3, 4)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = compiled(new, pos)
        assert not [str(c.message) for c in caught if "ember" in str(c.message)]
        _assert_same(out, eager(new, pos))
        _assert_same(list(mine.buffers()), list(eager.buffers()))


# --- diagonals, as_strided ------------------------------------------------------------------

@program((4, 4))
def diagonal_writes(x):
    y = x.clone()
    y.diagonal().fill_(1.0)
    torch.diagonal(y, 1).add_(2.0)
    y.fill_diagonal_(0.5)
    return y


@program((4, 4))
def diagonal_of_input(x):
    x.diagonal().mul_(10)
    return x.diagonal(-1) * 1


@program((4, 4))
def as_strided_write(x):
    y = x.clone()
    y.as_strided((2, 2), (4, 1), 1).mul_(3.0)
    return y


@program((4, 4))
def as_strided_read_after_write(x):
    y = x * 1
    y[0].fill_(2.0)
    return y.as_strided((3, 2), (1, 4), 2) + 0


@program((4, 4))
def as_strided_of_a_slice(x):
    y = x.clone()
    v = y[1:]
    v.as_strided((2, 2), (4, 1), 5).mul_(3.0)
    y.add_(1)
    return y, v.as_strided((2, 3), (1, 4), 4) * 1


# --- inputs that are not contiguous, or are views of a larger tensor ---------------------------

@program(make=lambda: [torch.randn(4, 5).t()])
def transposed_input_written_through_views(x):
    x[1].fill_(0.0)
    x[:, 2] += 1
    return x * 1


@program(make=lambda: [torch.randn(6, 4)[1:5]])
def input_with_storage_offset(x):
    x[0].mul_(2)
    x.t()[3] = 1.0
    return x.sum(0), x[1:3]


@program(make=lambda: [torch.randn(5, 4)[1:]])
def as_strided_of_input_with_storage_offset(x):
    v = x.as_strided((2, 2), (4, 1), x.storage_offset() + 1)
    x.mul_(2)  # v is regenerated from x's new value
    v.add_(1)  # and written back through as_strided_scatter
    return v * 1, x.sum()


@program(make=lambda: [torch.randn(4, 4).t()], fallback_ok={"inductor", "triton"})
def as_strided_of_transposed_input(x):  # prims' as_strided reads values, not a storage: falls back
    return x.as_strided((2, 2), (1, 4), 1) * 2


@program(make=lambda: [torch.randn(4, 8)[:, ::2]])
def strided_input_index_put(x):
    x[x > 0] = 0.0
    x[:, 1] -= 1
    return x + 0


# --- complex views (issue 13, item 13): the inductor has no complex kernels and falls back ------

@program((4, 2), fallback_ok={"inductor", "triton"})
def view_as_complex_of_input(x):
    return torch.view_as_complex(x)


@program((4, 2), fallback_ok={"inductor", "triton"}, no_prims=True)
def view_as_complex_then_real(x):
    c = torch.view_as_complex(x * 1)
    return torch.view_as_real(c * 2), c.abs()


@program((3, 2), fallback_ok={"inductor", "triton"}, no_prims=True)
def real_and_imag_writes(x):
    c = torch.view_as_complex(x.clone())
    c.real.mul_(2.0)
    c.imag.add_(1.0)
    return c, torch.view_as_real(c)


# --- the harness ---------------------------------------------------------------------------------

BACKENDS = {
    "inductor": dict(),  # the default backend: C++ kernels for CPU tensors
    "triton": dict(options={"backend": "triton"}),  # Triton kernels under the interpreter
    "aot_eager": dict(backend="aot_eager"),
    "eager": dict(backend="eager"),
}


def _sharing(outputs, inputs) -> list:
    """Which of the outputs and inputs share memory: a view must stay a view."""
    ts = [t for t in [*pytree.tree_leaves(outputs), *inputs] if isinstance(t, torch.Tensor)]
    ptrs = [t.untyped_storage().data_ptr() for t in ts]
    return [[p == q for q in ptrs] for p in ptrs]


def _assert_same(actual, expected):
    for a, e in zip(pytree.tree_leaves(actual), pytree.tree_leaves(expected), strict=True):
        if isinstance(e, torch.Tensor):
            assert a.dtype == e.dtype and a.shape == e.shape
            torch.testing.assert_close(a, e, **TOL)
        else:
            assert a == e


def check(name: str, backend: str):
    check_program(PROGRAMS[name], backend)


def check_program(prog: Program, backend: str):
    """`prog` through `backend`, twice with fresh inputs, against eager (the module docstring)."""
    if prog.no_prims and backend in ("inductor", "triton") and os.environ.get("EMBER_CHECK") == "1":
        pytest.skip("an op with no prim reaches the inductor, which runs it with ATen; the "
                    "prims-level boundary check (EMBER_CHECK=1) rejects such a graph by design")
    compiled = ember.compile(prog.fn, **BACKENDS[backend])
    for _ in range(2):  # a second call with fresh inputs goes through the guards
        inputs = prog.make()
        eager_in = [t.clone() for t in inputs]
        mine_in = [t.clone() for t in inputs]
        expected = prog.fn(*eager_in)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            actual = compiled(*mine_in)
        fell_back = [str(w.message) for w in caught if "ember" in str(w.message)]
        if backend not in prog.fallback_ok:
            assert not fell_back, fell_back
        _assert_same(actual, expected)
        for k, (a, e) in enumerate(zip(mine_in, eager_in)):
            torch.testing.assert_close(a, e, **TOL, msg=lambda m: f"input {k} after the call: {m}")
        assert _sharing(actual, mine_in) == _sharing(expected, eager_in)


@pytest.mark.parametrize("backend", ["inductor", "aot_eager", "eager"])
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_composition(name, backend):
    check(name, backend)


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_composition_triton_interpreted(name):
    check(name, "triton")


# --- training: gradients flow through the functionalized writes -----------------------------------

def _setitem_and_scaled_row(x, w):
    y = x * w[0]
    y[:, 0] = 0.0
    y[1] *= 2
    return (y ** 2).sum()


def _inplace_through_transposed_and_flat_views(x, w):
    h = x @ w
    h.t()[0].add_(1.0)
    v = h.view(-1)
    v.mul_(2.0)
    return h.sum() + v[3]


def _index_and_mask_assignment(x, w):
    y = torch.zeros(5, 3)
    i = torch.tensor([0, 3])
    y[i] = x[i] @ w
    y[y > 0.5] = 0.5
    y[i, 1] += x[i, 2]
    return y.sum(), y


def _diagonal_and_select_writes(x, w):
    y = (x @ w).clone()
    y.diagonal().mul_(3.0)
    y[2].fill_(0.0)
    return y.tanh().sum()


TRAINING = {f.__name__.lstrip("_"): f for f in (
    _setitem_and_scaled_row, _inplace_through_transposed_and_flat_views, _index_and_mask_assignment,
    _diagonal_and_select_writes)}


@pytest.mark.parametrize("backend", ["inductor", "triton", "aot_eager"])
@pytest.mark.parametrize("name", list(TRAINING))
def test_training_composition(name, backend):
    fn = TRAINING[name]
    compiled = ember.compile(fn, **BACKENDS[backend])
    for _ in range(2):
        x, w = torch.randn(5, 3), torch.randn(3, 3)
        grads = []
        for f in (fn, compiled):
            xs, ws = x.clone().requires_grad_(), w.clone().requires_grad_()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                out = f(xs, ws)
            assert not [str(c.message) for c in caught if "ember" in str(c.message)]
            loss = out[0] if isinstance(out, tuple) else out
            loss.backward()
            grads.append((out, xs.grad, ws.grad))
        _assert_same(grads[1], grads[0])


def test_aliased_inputs_one_of_them_mutated():
    # the graph treats inputs as independent: with both arguments one tensor it must not
    # silently drop the write seen through the other
    def f(a, b):
        a.add_(1.0)
        return b * 2

    compiled = ember.compile(f)
    for _ in range(2):
        x = torch.randn(4)
        e = x.clone()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = compiled(x, x)
        torch.testing.assert_close(out, f(e, e), **TOL)
        torch.testing.assert_close(x, e, **TOL)


@pytest.mark.parametrize("backend", ["inductor", "triton", "eager"])
def test_mutated_input_saved_for_a_backward_raises_as_in_eager(backend):
    """The inductor writes a mutated input in place from its kernel (Note [mutated inputs
    written in place]): the input's version still changes, so a backward that saved the old
    value raises, as in eager, instead of using the new value silently."""
    def update(b):
        b.mul_(2.0).add_(1.0)

    compiled = ember.compile(update, **BACKENDS[backend])
    for _ in range(2):  # a second call with new tensors: the cached graph
        w = torch.randn(8, requires_grad=True)
        buf = torch.randn(8)
        expected = buf * 2 + 1
        y = (w * buf).sum()  # saves buf
        compiled(buf)
        torch.testing.assert_close(buf, expected, **TOL)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.backward()
