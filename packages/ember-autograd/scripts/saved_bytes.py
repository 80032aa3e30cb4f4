"""Bytes the forward saves for the backward on the transformer block, per partitioner.

    python packages/ember-autograd/scripts/saved_bytes.py

Captures tests/models.py's `Block` (dim 32, 4 heads, dropout 0.1, input 4x16x32, training mode)
with torch.compile as the capture layer, then lowers the graph with each partitioner."""
from __future__ import annotations

import importlib.util
import pathlib
import sys

import torch

from ember_autograd import AotConfig, aot, default_partition, min_cut_partition

HERE = pathlib.Path(__file__).resolve().parent


def load_models():
    spec = importlib.util.spec_from_file_location("ember_autograd_test_models", HERE.parent / "tests" / "models.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dynamo looks classes' modules up by name
    spec.loader.exec_module(module)
    return module


def capture(model, *args):
    """The torch-level graph and example inputs that a capture layer hands to a backend."""
    graphs = []

    def backend(gm, example_inputs):
        graphs.append((gm, list(example_inputs)))
        return gm.forward

    torch.compile(model, backend=backend, fullgraph=True)(*args)
    assert len(graphs) == 1
    return graphs[0]


def saved_bytes() -> dict[str, int]:
    torch.manual_seed(0)
    block = load_models().Block(dim=32, heads=4, p=0.1)
    gm, inputs = capture(block, torch.randn(4, 16, 32))
    out = {}
    for partition in (default_partition, min_cut_partition):
        fn = aot(gm, inputs, fw_compiler=lambda g, i: g, partition=partition)
        out[partition.__name__] = fn.training.saved_bytes
    fn = aot(gm, inputs, fw_compiler=lambda g, i: g, config=AotConfig(recompute_pointwise=False))
    out["default_partition, no recompute"] = fn.training.saved_bytes
    return out


if __name__ == "__main__":
    for name, n in saved_bytes().items():
        print(f"{name:20s} {n:8d} bytes")
