"""List and tuple iterators as inputs (Note [Iterators from the inputs]): an iterator passed by
the user is traced over its sequence (before: the whole frame ran eagerly), and the same
iterator object is left at eager's position; a loop's iterator at a graph break inside the loop
stays opaque to the resume function (test_capture_loops.py: one compile serves every iteration).

Compared with eager on fresh inputs over several calls, with backend="eager" (capture alone) and
the default backend; float32 tolerances: eager backend exact, inductor rtol=1e-5 atol=1e-6.
"""
import pytest
import torch

import ember

TOL = {"eager": dict(rtol=0, atol=0), "inductor": dict(rtol=1e-5, atol=1e-6)}
BACKENDS = ["eager", "inductor"]


class Block(torch.nn.Module):
    def __init__(self, breaks: bool):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)
        self.breaks = breaks

    def forward(self, x):
        y = self.lin(x)
        if self.breaks:
            print("", end="")  # a graph break inside the Sequential's loop
        return y.relu()


@pytest.mark.parametrize("backend", BACKENDS)
def test_sequential_with_a_break_through_each_backend(backend):
    model = torch.nn.Sequential(*[Block(i == 2) for i in range(5)]).eval()
    compiled = ember.compile(model, backend=backend)
    with torch.no_grad():
        for _ in range(3):
            x = torch.randn(3, 8)
            torch.testing.assert_close(compiled(x), model(x), **TOL[backend])


def take_two_then_next(it, scale):
    out = []
    for x in it:
        out.append(x * scale)
        if len(out) == 2:
            break
    return out, next(it)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", [list, tuple])
def test_an_iterator_argument_is_left_where_eager_leaves_it(backend, kind):
    compiled = ember.compile(take_two_then_next, backend=backend, fullgraph=True)
    for start in (0, 1, 1, 2):  # a new position recompiles; the same one hits
        items = kind(torch.randn(3) for _ in range(6))
        mine, theirs = iter(items), iter(items)
        for _ in range(start):
            next(mine), next(theirs)
        got, want = compiled(mine, 2.0), take_two_then_next(theirs, 2.0)
        for g, w in zip(got[0] + [got[1]], want[0] + [want[1]]):
            torch.testing.assert_close(g, w, **TOL[backend])
        rest_mine, rest_theirs = list(mine), list(theirs)  # the same iterator, at eager's position
        assert len(rest_mine) == len(rest_theirs)
        for g, w in zip(rest_mine, rest_theirs):
            assert g is w


def sum_rest(it):
    total = torch.zeros(3)
    for x in it:
        total = total + x
    return total


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_exhausted_and_a_fresh_iterator(backend):
    compiled = ember.compile(sum_rest, backend=backend, fullgraph=True)
    items = [torch.randn(3) for _ in range(4)]
    mine, theirs = iter(items), iter(items)
    torch.testing.assert_close(compiled(mine), sum_rest(theirs), **TOL[backend])
    assert list(mine) == [] and list(theirs) == []
    torch.testing.assert_close(compiled(mine), sum_rest(theirs), **TOL[backend])  # exhausted: zeros
    other = [torch.randn(3) for _ in range(4)]
    torch.testing.assert_close(compiled(iter(other)), sum_rest(iter(other)), **TOL[backend])


def appends_while_iterating(xs, it):
    out = []
    for x in it:
        out.append(x + 1)
        if len(xs) < 4:
            xs.append(x * 10)  # the iterator sees the new items, as a list iterator does
    return out


def test_an_iterator_over_a_list_the_loop_appends_to():
    compiled = ember.compile(appends_while_iterating, backend="eager", fullgraph=True)
    base = [torch.randn(2), torch.randn(2)]
    mine_list, their_list = list(base), list(base)
    got = compiled(mine_list, iter(mine_list))
    want = appends_while_iterating(their_list, iter(their_list))
    assert len(got) == len(want) and len(mine_list) == len(their_list)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w)
