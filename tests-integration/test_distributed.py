"""ember under torch.distributed on the CPU (issue 21): 2 processes, gloo.

Each scenario runs a few training steps of a small transformer twice on each rank, eagerly and
compiled, from the same initial parameters and each rank's own data, and returns what the test
compares: the parameters after 3 steps, the gradients DDP all-reduced, how many pieces the
captured graph was split into (Note [DDP buckets] in ember/ddp.py) and how many buckets DDP
built. One spawn runs every scenario of a backend (starting 2 processes costs more than the
scenarios); each scenario's failure is kept as its own traceback, so each test reports its own.

Tolerances: float32; the compiled graphs compute the same formulas in another order.
"""
from __future__ import annotations

import contextlib
import pathlib
import sys
import traceback

import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from distributed_helpers import run_ranks  # noqa: E402

import ember  # noqa: E402

pytestmark = pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(),
                                reason="torch.distributed with gloo is not available")

TOL = dict(rtol=1e-4, atol=1e-5)
DIM = 16


class Block(torch.nn.Module):
    def __init__(self, dim=DIM):
        super().__init__()
        self.ln1 = torch.nn.LayerNorm(dim)
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.proj = torch.nn.Linear(dim, dim)
        self.ln2 = torch.nn.LayerNorm(dim)
        self.fc1 = torch.nn.Linear(dim, 2 * dim)
        self.fc2 = torch.nn.Linear(2 * dim, dim)

    def forward(self, x):
        q, k, v = self.qkv(self.ln1(x)).chunk(3, dim=-1)
        attn = torch.softmax(q @ k.transpose(-2, -1) / DIM ** 0.5, dim=-1)
        x = x + self.proj(attn @ v)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class TinyTransformer(torch.nn.Module):
    def __init__(self, blocks=2, dim=DIM):
        super().__init__()
        self.blocks = torch.nn.ModuleList([Block(dim) for _ in range(blocks)])
        self.head = torch.nn.Linear(dim, 4)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(x).mean(1)


class Branchy(torch.nn.Module):
    """A layer used on some steps only (find_unused_parameters)."""

    def __init__(self, dim=DIM):
        super().__init__()
        self.a = torch.nn.Linear(dim, dim)
        self.extra = torch.nn.Linear(dim, dim)
        self.b = torch.nn.Linear(dim, 4)

    def forward(self, x, use_extra: bool):
        x = torch.relu(self.a(x))
        if use_extra:
            x = torch.relu(self.extra(x))
        return self.b(x).mean(1)


def _block_bytes() -> int:
    return sum(p.numel() * p.element_size() for p in Block().parameters())


# A bucket holds about one block: several buckets, so several pieces.
BUCKET_CAP_MB = _block_bytes() / 2**20


def _data(rank, steps=3):
    g = torch.Generator().manual_seed(100 + rank)  # each rank its own data
    return [torch.randn(2, 5, DIM, generator=g) for _ in range(steps)]


def _loss(out):
    return out.pow(2).sum()


class _Pieces:
    """A backend that counts the graphs (pieces) it is given, then compiles them with `backend`."""

    def __init__(self, backend):
        self.inner = backend
        self.graphs = 0

    def __call__(self, gm, example_inputs):
        self.graphs += 1
        from ember.backends import build_compiler  # the named backend's compiler
        from ember.settings import make_settings
        settings = make_settings(backend_name=self.inner, fullgraph=False, dynamic=None, mode=None, options=None)
        return build_compiler(self.inner, settings)(gm, example_inputs)


def _state(model):
    return {"params": [p.detach().clone() for p in model.parameters()],
            "grads": [None if p.grad is None else p.grad.clone() for p in model.parameters()]}


def _ddp_train(rank, wrap, backend, steps=3, ddp_kwargs=None, sync_every=1):
    """`steps` SGD steps of TinyTransformer under DDP; wrap is "eager", "outer"
    (ember.compile(DDP(m))) or "inner" (DDP(ember.compile(m)))."""
    torch.manual_seed(0)
    model = TinyTransformer()
    kwargs = dict(bucket_cap_mb=BUCKET_CAP_MB, **(ddp_kwargs or {}))
    counter = _Pieces(backend)
    if wrap == "eager":
        ddp = run = DDP(model, **kwargs)
    elif wrap == "outer":
        ddp = DDP(model, **kwargs)
        run = ember.compile(ddp, backend=counter)
    else:
        ddp = run = DDP(ember.compile(model, backend=counter), **kwargs)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    first_grads = None
    for i, x in enumerate(_data(rank, steps)):
        sync = (i + 1) % sync_every == 0
        with contextlib.nullcontext() if sync else ddp.no_sync():
            _loss(run(x)).backward()
        if first_grads is None and sync:
            first_grads = _state(model)["grads"]
        if sync:
            opt.step()
            opt.zero_grad()
    buckets = ddp._get_ddp_logging_data().get("rebuilt_bucket_sizes", "")
    return {**_state(model), "first_grads": first_grads, "pieces": counter.graphs,
            "buckets": len([b for b in str(buckets).split(",") if b.strip()])}


def _find_unused(rank, compiled, backend):
    torch.manual_seed(0)
    model = Branchy()
    ddp = DDP(model, find_unused_parameters=True)
    run = ember.compile(ddp, backend=backend) if compiled else ddp
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, use_extra in zip(_data(rank, 4), (False, True, False, True)):
        _loss(run(x, use_extra)).backward()
        opt.step()
        opt.zero_grad()
    return _state(model)


def _scenarios(backend):
    return {
        "outer": lambda r: (_ddp_train(r, "eager", backend), _ddp_train(r, "outer", backend)),
        "inner": lambda r: (_ddp_train(r, "eager", backend), _ddp_train(r, "inner", backend)),
        "no_sync": lambda r: (_ddp_train(r, "eager", backend, steps=4, sync_every=2),
                              _ddp_train(r, "outer", backend, steps=4, sync_every=2)),
        "static_graph": lambda r: (_ddp_train(r, "eager", backend, ddp_kwargs=dict(static_graph=True)),
                                   _ddp_train(r, "inner", backend, ddp_kwargs=dict(static_graph=True))),
        "find_unused": lambda r: (_find_unused(r, False, backend), _find_unused(r, True, backend)),
    }


def ddp_rank(rank, backend):
    """Every DDP scenario on this rank: name -> (eager result, compiled result) or a traceback."""
    results = {}
    for name, scenario in _scenarios(backend).items():
        ember.reset()
        try:
            results[name] = scenario(rank)
        except Exception:
            results[name] = traceback.format_exc()
        dist.barrier()
    return results


_RESULTS: dict = {}


def _results(backend):
    if backend not in _RESULTS:
        _RESULTS[backend] = run_ranks(ddp_rank, backend)
    return _RESULTS[backend]


def _scenario(backend, name):
    per_rank = [r[name] for r in _results(backend)]
    for rank, result in enumerate(per_rank):
        if isinstance(result, str):
            pytest.fail(f"rank {rank}, scenario {name}:\n{result}")
    return per_rank


def _assert_close_lists(got, want, what):
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        if w is None or g is None:
            assert g is None and w is None, f"{what} {i}: {g} vs {w}"
        else:
            torch.testing.assert_close(g, w, **TOL, msg=lambda m: f"{what} {i}: {m}")


BACKENDS = ["eager", "inductor"]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("wrap", ["outer", "inner"])
def test_compiled_ddp_step_equals_eager_ddp(backend, wrap):
    for eager, compiled in _scenario(backend, wrap):
        _assert_close_lists(compiled["params"], eager["params"], "parameter")


@pytest.mark.parametrize("backend", BACKENDS)
def test_gradients_all_reduced_equal_eager_ddp(backend):
    ranks = _scenario(backend, "outer")
    for eager, compiled in ranks:
        _assert_close_lists(compiled["first_grads"], eager["first_grads"], "gradient")
    # all-reduced: both ranks hold the same gradients although their data differ
    _assert_close_lists(ranks[0][1]["first_grads"], ranks[1][1]["first_grads"], "rank 0 vs 1 gradient")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("wrap", ["outer", "inner"])
def test_graph_split_into_one_piece_per_bucket(backend, wrap):
    for eager, compiled in _scenario(backend, wrap):
        assert eager["buckets"] >= 3  # the small cap makes several buckets
        assert compiled["pieces"] == compiled["buckets"] == eager["buckets"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_no_sync_accumulation_equals_eager(backend):
    for eager, compiled in _scenario(backend, "no_sync"):
        _assert_close_lists(compiled["first_grads"], eager["first_grads"], "accumulated gradient")
        _assert_close_lists(compiled["params"], eager["params"], "parameter")


@pytest.mark.parametrize("backend", BACKENDS)
def test_static_graph_equals_eager(backend):
    for eager, compiled in _scenario(backend, "static_graph"):
        _assert_close_lists(compiled["params"], eager["params"], "parameter")


@pytest.mark.parametrize("backend", BACKENDS)
def test_find_unused_parameters_equals_eager(backend):
    for eager, compiled in _scenario(backend, "find_unused"):
        _assert_close_lists(compiled["params"], eager["params"], "parameter")
        _assert_close_lists(compiled["grads"], eager["grads"], "gradient")
