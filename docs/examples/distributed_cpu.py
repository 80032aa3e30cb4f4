"""docs/distributed.md's example: ember under DDP and FSDP2 on the CPU, 2 processes, gloo.

    python docs/examples/distributed_cpu.py

Each rank trains a small model for 3 steps with DDP, then with FSDP2, eagerly and compiled, and
checks that the compiled parameters equal the eager ones. (Under torchrun, the body of `main` is
all you need: torchrun starts the processes and sets the rank, world size and address.)
"""
import os
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.fsdp import fully_shard
from torch.nn.parallel import DistributedDataParallel as DDP

import ember


class Block(torch.nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.norm = torch.nn.LayerNorm(dim)
        self.fc1 = torch.nn.Linear(dim, 4 * dim)
        self.fc2 = torch.nn.Linear(4 * dim, dim)

    def forward(self, x):
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.norm(x))))


class Model(torch.nn.Module):
    def __init__(self, dim=16, depth=3):
        super().__init__()
        self.blocks = torch.nn.ModuleList(Block(dim) for _ in range(depth))
        self.head = torch.nn.Linear(dim, 1)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def train(model, rank, steps=3):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    data = torch.Generator().manual_seed(rank)  # each rank its own batches
    for _ in range(steps):
        x = torch.randn(8, 16, generator=data)
        model(x).pow(2).mean().backward()  # DDP all-reduces / FSDP reduce-scatters the gradients here
        opt.step()
        opt.zero_grad()


def ddp_parameters(rank, compiled):
    torch.manual_seed(0)
    model = Model()
    # A small bucket cap makes several buckets; ember splits the graph at them, so each
    # bucket's all-reduce starts while the backward of the earlier layers still runs.
    ddp = DDP(model, bucket_cap_mb=0.01)
    train(ember.compile(ddp) if compiled else ddp, rank)  # or DDP(ember.compile(model))
    return [p.detach().clone() for p in model.parameters()]


def fsdp_parameters(rank, compiled):
    torch.manual_seed(0)
    model = Model()
    for block in model.blocks:
        fully_shard(block)  # one FSDP unit per block: its all-gather and reduce-scatter
    fully_shard(model)
    # FSDP's hooks run natively; each unit's forward is compiled between them.
    train(ember.compile(model) if compiled else model, rank)
    return [p.full_tensor().detach().clone() for p in model.parameters()]


def main(rank, world_size, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    for name, run in (("DDP", ddp_parameters), ("FSDP2", fsdp_parameters)):
        for eager, compiled in zip(run(rank, False), run(rank, True)):
            torch.testing.assert_close(compiled, eager, rtol=1e-4, atol=1e-5)
        if rank == 0:
            print(f"{name}: compiled parameters after 3 steps equal eager's")
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


if __name__ == "__main__":
    mp.spawn(main, args=(2, free_port()), nprocs=2)
