"""Warm start: the results of autograd lowering and of the inductor, cached on disk.

Note [warm start]: a second process that compiles the same model skips straight to loading
kernels. Two caches, one per layer whose work is worth keeping, both in cache_store.py's files:

- "autograd": captured graph + arguments -> ember_autograd's traced and partitioned forward
  and backward graphs (and the signature that rebuilds the user's outputs); the trace and the
  partition do not run (ember_autograd's `AotConfig.lowering_cache` hook).
- "inductor": prims graph + example inputs -> the inductor's CompiledGraph as data
  (ember_inductor.artifacts); lowering, fusion, planning and rendering do not run, and the
  kernels load from the kernel cache (C++ libraries by source hash, Triton's own cache).

The key of each is the SHA-256 of everything that changes what is stored: the graph's
fingerprint (graph_key.py: ops, arguments, shapes, strides, dtypes, devices), each argument's
metadata, the grad and autocast mode, the options that change code, the device (its CUDA
capability), and the code version: the versions of torch, Triton and Python and a hash of the
source files of ember's lowering layers (ember_autograd, ember_prims, ember_inductor, the
facade), so an edit to any of them starts a new cache. Graphs with parts that have no stable
description (symbolic sizes, submodules, objects known by address) are compiled every time.

On by default, for CPU and GPU graphs (Note [warm start on GPUs]);
`options={"warm_start": False}` or EMBER_WARM_START=0 turns it off, and
`ember.cache_stats()` counts hits, misses, stores and corrupt entries per cache.
`ember.save_cache_artifacts()` returns every entry as bytes and `ember.load_cache_artifacts(blob)`
writes them into another machine's cache (the kernels' binaries are rebuilt there from the
cached sources: they depend on the machine). Loading runs `pickle`: load only blobs you made.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib.metadata
import os
import sys
import time
import warnings
from typing import Any, Callable

import torch

import ember_autograd
import ember_inductor
import ember_prims
from ember_autograd.partition import Partition
from ember_inductor.artifacts import from_artifact, to_artifact

from ember import cache_store, graph_key
from ember.settings import make_settings

# InductorOptions fields that do not change what compile_graph makes (everything else keys it)
_NOT_CODE = frozenset({"cache_dir", "trace_enabled", "trace_dir", "trace_graph_diagram", "logs",
                       "compile_workers", "debug_verify"})


@functools.lru_cache(maxsize=None)
def code_version() -> str:
    """torch, Triton and Python versions and a hash of the lowering layers' sources."""
    digest = hashlib.sha256()
    for module in (ember_autograd, ember_prims, ember_inductor, sys.modules["ember"]):
        root = os.path.dirname(module.__file__)
        for folder, _, files in sorted(os.walk(root)):
            for name in sorted(files):
                if name.endswith((".py", ".json", ".h", ".cpp")):
                    with open(os.path.join(folder, name), "rb") as f:
                        digest.update(name.encode() + f.read())
    try:
        triton = importlib.metadata.version("triton")
    except importlib.metadata.PackageNotFoundError:
        triton = "none"
    return f"torch {torch.__version__} triton {triton} python {sys.version.split()[0]} code {digest.hexdigest()}"


def _device_tag(values: list) -> str:
    devices = sorted({str(v.device) for v in values if isinstance(v, torch.Tensor)})
    tags = []
    for d in devices:
        device = torch.device(d)
        if device.type == "cuda" and torch.cuda.is_available():
            tags.append(f"{d}:{torch.cuda.get_device_name(device)}:{torch.cuda.get_device_capability(device)}")
        else:
            tags.append(d)
    return ",".join(tags)


def make_key(*parts: str) -> str:
    return hashlib.sha256("\n".join((code_version(), *parts)).encode()).hexdigest()


# --- the inductor's cache ----------------------------------------------------------------------------

def inductor_compile(cache_dir: str) -> Callable:
    """`ember_inductor.compile_graph`, through the "inductor" cache in `cache_dir`."""

    def compile_graph(gm: torch.fx.GraphModule, example_inputs: list, options: Any) -> Any:
        key = _inductor_key(gm, example_inputs, options)
        if key is not None:
            start = time.perf_counter()
            artifact = cache_store.read(cache_dir, "inductor", key)
            if artifact is not None:
                try:
                    compiled = from_artifact(artifact, options)
                except Exception as exc:  # stored by another version of a backend: compile again
                    cache_store.COUNTERS["inductor"]["corrupt"] += 1
                    warnings.warn(f"ember: a warm-start inductor entry could not be loaded ({type(exc).__name__}: "
                                  f"{exc}); it is compiled again", RuntimeWarning, stacklevel=2)
                else:
                    compiled.timings = {"cache_load": time.perf_counter() - start}
                    return compiled
        compiled = ember_inductor.compile_graph(gm, example_inputs, options)
        if key is not None:
            cache_store.write(cache_dir, "inductor", key, to_artifact(compiled))
        return compiled

    return compile_graph


def _inductor_key(gm: torch.fx.GraphModule, example_inputs: list, options: Any) -> str | None:
    if options.logs or options.trace_enabled:  # what they print comes from the passes: run them
        return None
    described = _graph_and_inputs(gm, example_inputs)
    if described is None:
        return None
    return make_key("inductor", *described, graph_key.describe_fields(options, _NOT_CODE))


def _graph_and_inputs(gm: torch.fx.GraphModule, inputs: list) -> tuple[str, str, str] | None:
    """The graph's fingerprint, its inputs' metadata and their devices; None if uncacheable."""
    graph = graph_key.fingerprint(gm)
    if graph is None:
        return None
    try:
        return graph, graph_key.describe(list(inputs)), _device_tag(list(inputs))
    except cache_store.Uncacheable:
        return None


# Note [warm start on GPUs]: graphs on a GPU are warm-started like CPU graphs. What is cached is
# the same data (the wrapper's source, the kernels' Triton sources and launch configs, the GEMM
# templates' choices); the Triton binaries come from Triton's own cache (TRITON_CACHE_DIR) or are
# rebuilt from the cached source, and the device's CUDA capability is part of the key
# (`_device_tag`). Measured on an H100 (docs/performance.md, "Warm start on the GPU"): resnet50
# b32 and BERT-base training steps reach their first call in 3.1-4.4 and 2.1-2.9 s instead of
# 18-30 and 24-25 s, and the warm process's loss and gradients are the cold process's (BERT's
# exactly, resnet50's within 1.7e-6: cuDNN's backward may sum in another order). Until that
# run, GPU graphs needed EMBER_WARM_START=1.


# --- ember_autograd's cache --------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class LoweringCache:
    """ember_autograd's `AotConfig.lowering_cache`: (captured graph, arguments, mode) ->
    (Signature, Partition) for "training", (Signature, forward graph) for "inference"."""

    cache_dir: str
    label: str  # the composition (decompositions, partitioner) whose lowering this is

    def key(self, gm: torch.fx.GraphModule, args: list, mode: str, config: Any) -> str | None:
        described = _graph_and_inputs(gm, args)
        if described is None:
            return None
        autocast = [(d, torch.get_autocast_dtype(d)) for d in ("cpu", "cuda") if torch.is_autocast_enabled(d)]
        config_text = graph_key.describe_fields(config, frozenset({"lowering_cache"}))
        return make_key("autograd", self.label, mode, *described, repr(autocast),
                        str(torch.is_grad_enabled()), str(torch.get_default_dtype()), config_text)

    def load(self, gm: torch.fx.GraphModule, args: list, mode: str, config: Any) -> Any:
        key = self.key(gm, args, mode, config)
        value = None if key is None else cache_store.read(self.cache_dir, "autograd", key)
        if value is None:
            return None
        try:
            graphs = [graph_key.from_data(d) for d in value["graphs"]]
        except Exception as exc:  # a graph that does not rebuild: lowered again
            cache_store.COUNTERS["autograd"]["corrupt"] += 1
            warnings.warn(f"ember: a warm-start autograd entry could not be loaded ({type(exc).__name__}: {exc}); "
                          "it is lowered again", RuntimeWarning, stacklevel=2)
            return None
        if mode == "training":
            forward, backward = graphs
            return value["signature"], Partition(forward, backward, value["saved"], value["saved_bytes"])
        return value["signature"], graphs[0]

    def store(self, gm: torch.fx.GraphModule, args: list, mode: str, config: Any, value: Any) -> None:
        key = self.key(gm, args, mode, config)
        if key is None:
            return
        signature, lowered = value
        try:
            if mode == "training":
                data = {"signature": signature, "graphs": [graph_key.to_data(lowered.forward),
                                                           graph_key.to_data(lowered.backward)],
                        "saved": list(lowered.saved), "saved_bytes": lowered.saved_bytes}
            else:
                data = {"signature": signature, "graphs": [graph_key.to_data(lowered)]}
        except cache_store.Uncacheable:
            cache_store.COUNTERS["autograd"]["uncacheable"] += 1
            return
        cache_store.write(self.cache_dir, "autograd", key, data)


# --- the user's verbs -----------------------------------------------------------------------------

def cache_stats() -> dict[str, dict[str, int]]:
    """Counts per warm-start cache ("autograd", "inductor") in this process: hit, miss, store,
    corrupt, uncacheable::

        import ember
        stats = ember.cache_stats()
        assert set(stats) == {"autograd", "inductor"}
    """
    return {kind: dict(cache_store.COUNTERS[kind]) for kind in ("autograd", "inductor")}


def _cache_dir() -> str:
    return make_settings(backend_name="inductor", fullgraph=False, dynamic=None, mode=None, options=None).cache_dir


def save_cache_artifacts(cache_dir: str | None = None) -> bytes:
    """Every warm-start entry of this machine's cache (`cache_dir`, default EMBER_CACHE_DIR or
    ~/.cache/ember) as one blob, for `load_cache_artifacts` on another machine (or in a fresh
    container)."""
    return cache_store.save_all(os.path.expanduser(cache_dir or _cache_dir()))


def load_cache_artifacts(blob: bytes, cache_dir: str | None = None) -> int:
    """Write the entries of a `save_cache_artifacts()` blob into this machine's cache; returns
    how many. Compiles that follow load them instead of lowering and generating code."""
    return cache_store.load_all(os.path.expanduser(cache_dir or _cache_dir()), blob)
