"""A CompiledGraph as plain data, and back: what a warm start loads instead of compiling.

`to_artifact(compiled)` keeps what the passes made (the wrapper source, each kernel's source
and spec, the wrapper's constants, the input layouts, IR text, schedule, fallbacks);
`from_artifact(artifact, options)` rebuilds the callable: the kernels are built from their
sources (the C++ libraries come from the on-disk kernel cache when present, Triton's from its
cache) and the wrapper source is executed again. Lowering, fusion, buffer planning and rendering
do not run. Whoever stores the artifact (the facade's warm-start cache) pickles it; the
wrapper's constants hold ops (OpOverloads), devices, dtypes and tensors.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from ember_inductor.compile import CompiledGraph, build_launchers
from ember_inductor.options import InductorOptions
from ember_inductor.wrapper import WrapperWriter

ARTIFACT_VERSION = 4  # 3: input layouts say whether an input must start its storage (Note [input offsets]);
# 4: buffers are allocated from template tensors (Note [allocation from a template]); each kernel's
# backend is stored (a GPU graph's CPU kernels are C++: Note [host scalars])
_BASE = frozenset(WrapperWriter().namespace) | {"__builtins__", "call"}


def to_artifact(compiled: CompiledGraph) -> dict[str, Any]:
    namespace = compiled._fn.__globals__
    launchers = {k.name for k in compiled.kernels} | {f"{k.name}_c" for k in compiled.kernels}
    constants = {k: v for k, v in namespace.items() if k not in _BASE and k not in launchers}
    # A kernel's loop description (sympy) is not needed to build or launch it: its arguments are.
    kernels = [dataclasses.replace(k, kernel=dataclasses.replace(k.kernel, ranges=(), reduction_ranges=(), ops=(),
                                                                 stages=())) for k in compiled.kernels]
    return {"version": ARTIFACT_VERSION, "source": compiled.source, "kernels": kernels,
            "ir": compiled.ir, "timings": dict(compiled.timings), "fallbacks": list(compiled.fallbacks),
            "layouts": list(compiled._layouts), "backend": compiled.backend, "constants": constants,
            "schedule": list(compiled.schedule), "written_in_place": list(compiled.written_in_place),
            "kernel_backends": list(compiled.kernel_backends)}


def from_artifact(artifact: dict[str, Any], options: InductorOptions) -> CompiledGraph:
    if artifact.get("version") != ARTIFACT_VERSION:
        raise ValueError(f"artifact version {artifact.get('version')!r}, expected {ARTIFACT_VERSION}")
    kernels = artifact["kernels"]
    backends = artifact["kernel_backends"]
    launchers = build_launchers(kernels, backends, options)
    namespace = dict(WrapperWriter().namespace)
    namespace.update(artifact["constants"])
    for k in kernels:
        launch = namespace[k.name] = launchers[k.name]
        c_fn = getattr(launch, "c_function", None)
        if c_fn is not None:  # the wrapper calls the C entry point directly (wrapper.py)
            namespace[f"{k.name}_c"] = c_fn
    exec(compile(artifact["source"], "<ember_inductor wrapper>", "exec"), namespace)  # noqa: S102
    compiled = CompiledGraph(namespace["call"], artifact["source"], kernels, artifact["ir"], {},
                             artifact["fallbacks"], artifact["layouts"], artifact["backend"])
    compiled.schedule = artifact["schedule"]
    compiled.written_in_place = list(artifact["written_in_place"])
    compiled.kernel_backends = list(backends)
    compiled.loaded_from_cache = True
    return compiled
