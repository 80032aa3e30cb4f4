"""The inductor's configuration: one frozen, validated dataclass, passed in (never a global).

Environment variables are read by the facade, once; this module never reads them.
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field

BACKENDS = ("auto", "cpp", "triton")
CONV_LAYOUTS = ("auto", "channels_last", "preserve")
LOG_KINDS = frozenset({"output_code", "ir", "schedule", "fallback", "timings"})
# torch.compile's option names -> ours ("trace.enabled" is "trace_enabled" by the dot rule)
ALIASES = {
    "triton.cudagraphs": "cudagraphs",
    "max_autotune_gemm": "max_autotune",
    "max_autotune_pointwise": "autotune",
    "triton.autotune_pointwise": "autotune",
}


def default_compile_workers() -> int:
    """Workers that compile a graph's kernels (Triton: worker processes, Note [Triton compiled in
    worker processes]; C++: translation units): the cores this process may use, from 4 to 16. On an H200's 16-core host, Triton's compile of densenet121's 68
    kernels took 8.7 s on 4 threads and 7.9 s on 16, and the launcher stubs built with them
    (one gcc each, Note [launcher stubs built in parallel]) run 4 at a time on 4 threads."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 4)
    return max(4, min(16, cores))


@dataclass(frozen=True)
class InductorOptions:
    """Options of `ember_inductor.compile_graph`.

    >>> InductorOptions.from_dict({"trace.enabled": True}).trace_enabled
    True
    """

    backend: str = "auto"              # auto: triton for CUDA tensors, cpp for CPU tensors
    cache_dir: str = "~/.cache/ember"  # compiled kernels, keyed by source hash
    trace_enabled: bool = False        # write IR and code of each compile to trace_dir
    trace_dir: str | None = None       # default: <cache_dir>/trace
    autotune: bool = False             # triton: benchmark a few block sizes
    cudagraphs: bool = False           # triton: replay the wrapper as a CUDA graph
    debug_verify: bool = False         # check the input graph against the spec (verify.py)
    max_fusion_size: int = 64          # most graph nodes fused into one kernel
    combo_kernels: bool = True         # triton: independent kernels share one launch (horizontal.py)
    logs: frozenset = field(default_factory=frozenset)  # e.g. {"output_code"}; see LOG_KINDS
    cpp_compiler: str = "g++"
    cpp_flags: tuple = ("-O3", "-march=native", "-fopenmp", "-ffp-contract=off")
    num_threads: int | None = None     # OpenMP threads of C++ kernels (None: OpenMP's default)
    compile_workers: int = field(default_factory=lambda: default_compile_workers())  # kernels compiled in parallel
    conv_layout: str = "auto"          # auto: channels_last in graphs with 2-D convolutions;
                                       # see Note [channels-last convolutions]
    # torch.compile's documented options (its spellings are accepted: see ALIASES)
    max_autotune: bool = False         # triton: GEMM templates autotuned against cuBLAS (templates/)
    epilogue_fusion: bool = True       # with max_autotune: pointwise consumers of a matmul in its epilogue
    fallback_random: bool = False      # random ops draw torch's numbers (the facade keeps them ATen ops)
    shape_padding: bool = False        # pad matmul dims to aligned sizes where it pays (shape_padding.py)
    trace_graph_diagram: bool = False  # write the fused graph as a diagram (diagram.py) into trace_dir

    def __post_init__(self):
        if self.backend not in BACKENDS:
            raise ValueError(f"InductorOptions.backend must be one of {BACKENDS}, got {self.backend!r}")
        if self.conv_layout not in CONV_LAYOUTS:
            raise ValueError(f"InductorOptions.conv_layout must be one of {CONV_LAYOUTS}, got {self.conv_layout!r}")
        if isinstance(self.logs, (set, list, tuple)):
            object.__setattr__(self, "logs", frozenset(self.logs))
        if isinstance(self.logs, str):
            object.__setattr__(self, "logs", frozenset(s for s in self.logs.split(",") if s))
        if isinstance(self.cpp_flags, list):
            object.__setattr__(self, "cpp_flags", tuple(self.cpp_flags))
        unknown = set(self.logs) - LOG_KINDS
        if unknown:
            raise ValueError(f"unknown log kinds {sorted(unknown)}; valid: {sorted(LOG_KINDS)}")
        for f in dataclasses.fields(self):
            _check_type(f.name, getattr(self, f.name), f.type)
        if self.max_fusion_size < 1:
            raise ValueError("InductorOptions.max_fusion_size must be >= 1")

    @classmethod
    def from_dict(cls, options: dict | None = None, **overrides) -> "InductorOptions":
        """Build from a user dict; "trace.enabled" and "trace_enabled" both name one field."""
        valid = {f.name for f in dataclasses.fields(cls)}
        kwargs = {}
        for key, value in {**(options or {}), **overrides}.items():
            name = ALIASES.get(key, key).replace(".", "_")
            if name not in valid:
                dotted = sorted({_spelling(n) for n in valid} | set(ALIASES))
                raise ValueError(f"unknown inductor option {key!r}; valid options: {', '.join(dotted)}")
            kwargs[name] = value
        return cls(**kwargs)

    def replace(self, **changes) -> "InductorOptions":
        return dataclasses.replace(self, **changes)

    @property
    def resolved_cache_dir(self) -> str:
        return os.path.expanduser(self.cache_dir)

    @property
    def resolved_trace_dir(self) -> str:
        return os.path.expanduser(self.trace_dir or os.path.join(self.cache_dir, "trace"))

    def cache_key(self) -> tuple:
        """The fields that change generated code or built binaries (they enter the cache key)."""
        return (self.cpp_compiler, self.cpp_flags, self.autotune)


_TYPES = {"str": str, "bool": bool, "int": int, "frozenset": frozenset, "tuple": tuple}


def _spelling(name: str) -> str:
    """The name users write: "trace_graph_diagram" -> "trace.graph_diagram"."""
    return name.replace("trace_", "trace.", 1) if name.startswith("trace_") else name


def _check_type(name, value, annotation):
    allowed = [_TYPES[t.strip()] for t in str(annotation).split("|") if t.strip() in _TYPES]
    if "None" in str(annotation) and value is None:
        return
    if bool in allowed and int not in allowed and not isinstance(value, bool):
        raise TypeError(f"InductorOptions.{name}: option {_spelling(name)!r} must be bool "
                        f"(valid: True or False), got {value!r}")
    if allowed and not isinstance(value, tuple(allowed)):
        raise TypeError(f"InductorOptions.{name}: option {_spelling(name)!r} must be {annotation}, "
                        f"got {value!r}")
