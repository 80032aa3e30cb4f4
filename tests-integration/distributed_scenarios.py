"""The distributed scenarios of test_distributed.py, run on each of 2 gloo processes.

Each scenario runs a few training steps of a small transformer twice on each rank, eagerly and
compiled, from the same initial parameters and each rank's own data, and returns what the test
compares: the parameters after 3 steps, the gradients DDP all-reduced, how many pieces the
captured graph was split into (Note [DDP buckets] in ember/ddp.py) and how many buckets DDP
built. They live in a module of their own so that the spawned processes can import them.
"""
from __future__ import annotations

import contextlib
import traceback

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

import ember

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
        with contextlib.nullcontext() if sync else run.no_sync():  # the wrapper reaches DDP's
            loss = _loss(run(x))
            producers = _gradient_producers(loss, model.parameters())
            loss.backward()
        if first_grads is None and sync:
            first_grads = _state(model)["grads"]
        if sync:
            opt.step()
            opt.zero_grad()
    buckets = ddp._get_ddp_logging_data().get("rebuilt_bucket_sizes", "")
    return {**_state(model), "first_grads": first_grads, "pieces": counter.graphs, "producers": producers,
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


def _step(ddp, x):
    return _loss(ddp(x))


def _step_function(rank, compiled, backend):
    """A compiled training-step function that calls the DDP module (DDP's forward runs natively)."""
    torch.manual_seed(0)
    model = TinyTransformer()
    ddp = DDP(ember.compile(model, backend=backend) if compiled else model, bucket_cap_mb=BUCKET_CAP_MB)
    step = ember.compile(_step, backend=backend) if compiled else _step
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for x in _data(rank):
        step(ddp, x).backward()
        opt.step()
        opt.zero_grad()
    return _state(model)


def _fsdp_train(rank, how, backend):
    """3 SGD steps of TinyTransformer with fully_shard per block and at the root; `how`: "eager",
    "model" (ember.compile of the sharded model) or "blocks" (ember.compile of each block)."""
    from torch.distributed.fsdp import fully_shard
    torch.manual_seed(0)
    model = TinyTransformer()
    for block in model.blocks:
        fully_shard(block)
    fully_shard(model)
    counter = _Pieces(backend)
    run = model
    if how == "model":
        run = ember.compile(model, backend=counter)
    elif how == "blocks":
        for i, block in enumerate(model.blocks):
            model.blocks[i] = ember.compile(block, backend=counter)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for x in _data(rank):
        _loss(run(x)).backward()
        opt.step()
        opt.zero_grad()
    return {"params": [p.full_tensor().detach().clone() for p in model.parameters()], "graphs": counter.graphs}


def _gradient_producers(loss, params) -> int:
    """How many autograd nodes hand gradients to `params` directly. A compiled graph is one node
    whose backward hands over all its parameters' gradients at its end: one piece per bucket
    makes one producer per bucket, each of which finishes (and so lets DDP all-reduce its
    bucket) before the backward of the pieces before it runs."""
    wanted = {id(p) for p in params}
    producers, seen, todo = set(), set(), [loss.grad_fn]
    while todo:
        node = todo.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        for child, _ in node.next_functions:
            if child is not None and id(getattr(child, "variable", None)) in wanted:
                producers.add(node)
            todo.append(child)
    return len(producers)


def _scenarios(backend):
    return {
        "outer": lambda r: (_ddp_train(r, "eager", backend), _ddp_train(r, "outer", backend)),
        "inner": lambda r: (_ddp_train(r, "eager", backend), _ddp_train(r, "inner", backend)),
        "no_sync": lambda r: (_ddp_train(r, "eager", backend, steps=4, sync_every=2),
                              _ddp_train(r, "outer", backend, steps=4, sync_every=2)),
        "static_graph": lambda r: (_ddp_train(r, "eager", backend, ddp_kwargs=dict(static_graph=True)),
                                   _ddp_train(r, "inner", backend, ddp_kwargs=dict(static_graph=True))),
        "find_unused": lambda r: (_find_unused(r, False, backend), _find_unused(r, True, backend)),
        "step_function": lambda r: (_step_function(r, False, backend), _step_function(r, True, backend)),
        "fsdp_model": lambda r: (_fsdp_train(r, "eager", backend), _fsdp_train(r, "model", backend)),
        "fsdp_blocks": lambda r: (_fsdp_train(r, "eager", backend), _fsdp_train(r, "blocks", backend)),
    }


def every_scenario(rank, backends):
    """Every scenario of every backend on this rank: (backend, name) -> (eager result, compiled
    result), or the traceback of its failure (so that one failure does not hide the others)."""
    results = {}
    for backend in backends:
        for name, scenario in _scenarios(backend).items():
            ember.reset()
            try:
                results[backend, name] = scenario(rank)
            except Exception:
                results[backend, name] = traceback.format_exc()
            dist.barrier()
    return results
