"""Running a function on 2 CPU processes (gloo), for the distributed tests.

`run_ranks(fn, *args)` spawns the processes (torch.multiprocessing, spawn), joins a gloo group on
a free port (so parallel test workers never collide), runs `fn(rank, *args)` on each and returns
what each returned (torch.save'd through a temporary folder). An exception on any rank fails the
call with that rank's traceback.
"""
from __future__ import annotations

import os
import socket
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

WORLD_SIZE = 2


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _entry(rank: int, port: int, folder: str, cache_dir: str, fn, args) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), EMBER_CACHE_DIR=cache_dir,
                      OMP_NUM_THREADS="1")
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=WORLD_SIZE)
    try:
        result = fn(rank, *args)
        dist.barrier()
    finally:
        dist.destroy_process_group()
    torch.save(result, os.path.join(folder, f"rank{rank}.pt"))


def run_ranks(fn, *args, cache_dir: str | None = None) -> list:
    """fn(rank, *args) on each of 2 gloo processes; their results, by rank. `fn` must be a
    module-level function (the processes import it). The ranks share `cache_dir` (EMBER_CACHE_DIR)."""
    with tempfile.TemporaryDirectory() as folder:
        cache = cache_dir or os.environ.get("EMBER_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "ember")
        mp.spawn(_entry, args=(free_port(), folder, cache, fn, args), nprocs=WORLD_SIZE, join=True)
        return [torch.load(os.path.join(folder, f"rank{r}.pt"), weights_only=False) for r in range(WORLD_SIZE)]
