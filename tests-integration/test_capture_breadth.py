"""Capture breadth (issue 13) end to end: the Python constructs that capture now models, through
ember.compile with the default backend (inductor) and backend="eager", compared against eager
on two calls with fresh inputs. The capture-level cases are in
packages/ember-capture/tests/test_breadth.py.

float32 tolerances: eager backend rtol=1e-5, atol=1e-5; inductor rtol=1e-4, atol=1e-5.
"""
import collections
import dataclasses
import itertools

import pytest
import torch

import ember

TOL = {"eager": dict(rtol=1e-5, atol=1e-5), "inductor": dict(rtol=1e-4, atol=1e-5)}


class Output(collections.OrderedDict):
    """A Hugging Face ModelOutput, reduced: a dataclass over OrderedDict, indexed by position."""

    def __post_init__(self):
        for field in dataclasses.fields(self):
            if getattr(self, field.name) is not None:
                self[field.name] = getattr(self, field.name)

    def __getitem__(self, k):
        return dict(self.items())[k] if isinstance(k, str) else tuple(self.values())[k]


@dataclasses.dataclass
class BlockOutput(Output):
    hidden: torch.Tensor = None
    attn: torch.Tensor = None


class Registry(dict):
    def get(self, key):
        return super().get(key) or {}


REGISTRY = Registry(act={"slope": 0.1})


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    @torch.no_grad()
    def rotary(self, x):
        return x.cos()

    def forward(self, x):
        slope = REGISTRY.get("act")["slope"]
        scales = collections.defaultdict(lambda: 1.0)
        h = torch.nn.LeakyReLU(slope)(self.lin(x)) * scales["missing"]
        parts = [h * a for a, _ in itertools.product([1.0, 0.5], [0])]
        out = BlockOutput(hidden=sum(parts) + self.rotary(x))
        try:
            extra = [x][1]
        except IndexError:
            extra = x.mean()
        return out[0] + extra


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_breadth_block(backend, recorder):
    torch.manual_seed(0)
    model = Block().eval()
    compiled = ember.compile(model, backend=recorder if backend == "eager" else backend)
    with torch.no_grad():
        for shape in ((4, 8), (6, 8)):
            x = torch.randn(*shape)
            torch.testing.assert_close(compiled(x), model(x), **TOL[backend])
    if backend == "eager":
        assert len(recorder.graphs) == 2  # one per shape: no graph break


def cells_across_break(x):
    scale = 2.0

    def inner(t):
        return t * scale

    y = inner(x).relu()
    print("graph break")
    scale = 3.0
    return inner(y) + 1


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_frame_with_cells_resumes(backend, recorder, capsys):
    compiled = ember.compile(cells_across_break, backend=recorder if backend == "eager" else backend)
    for shape in ((3,), (5,)):
        x = torch.randn(*shape)
        torch.testing.assert_close(compiled(x), cells_across_break(x), **TOL[backend])
    if backend == "eager":
        assert len(recorder.graphs) == 4  # two per shape, around the print
