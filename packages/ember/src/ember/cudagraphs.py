"""CUDA graph replay for compiled forward/backward graphs (the `cudagraphs` backend).

Note [cudagraph safety]: a replayed CUDA graph reads its inputs from the addresses it was
captured with and writes its outputs to the same memory on every replay. So each call copies
the inputs into static buffers, replays, and returns clones of the outputs (a later replay must
not overwrite what the caller holds). Graphs whose inputs are not all CUDA tensors are not
captured: they run as they are. torch's CUDA generator supports capture, so random ops in an
ATen graph draw fresh numbers on each replay.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch


class CUDAGraphRunner:
    """Calls `fn(*inputs)`; from the third call on (two warm-ups), replays one captured graph."""

    _boxed_call = True

    def __init__(self, fn: Callable[..., Any], warmups: int = 2) -> None:
        self.fn = fn
        self.warmups = warmups
        self.calls = 0
        self.graph: torch.cuda.CUDAGraph | None = None
        self.static_inputs: list[torch.Tensor] = []
        self.static_outputs: Any = None
        self.tuple_out = True

    def __call__(self, args: list) -> Any:
        if not all(isinstance(a, torch.Tensor) and a.is_cuda for a in args):
            return self.fn(*args)
        self.calls += 1
        if self.graph is None and self.calls <= self.warmups:
            return self.fn(*args)
        if self.graph is None:
            self._capture(args)
        for static, new in zip(self.static_inputs, args):
            if static.data_ptr() != new.data_ptr():
                static.copy_(new)
        self.graph.replay()
        outs = [o.clone() if isinstance(o, torch.Tensor) else o for o in self.static_outputs]
        return tuple(outs) if self.tuple_out else outs

    def _capture(self, args: list) -> None:
        self.static_inputs = [a.detach().clone() for a in args]
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            self.fn(*self.static_inputs)  # warm up on the capture stream (allocator, cuBLAS handles)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            outs = self.fn(*self.static_inputs)
        self.tuple_out = isinstance(outs, tuple)
        self.static_outputs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
        if not isinstance(outs, (tuple, list)):
            self.tuple_out = True
        self.graph = graph


def cudagraph_compiler(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
    """A compiler for ember_autograd.aot: run the functional graph by torch, replayed as a CUDA graph."""
    return CUDAGraphRunner(gm.forward)
