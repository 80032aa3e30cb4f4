"""Validated settings of one `ember.compile` call: a frozen dataclass made once, passed down.

Environment variables are read here and nowhere else (STYLE.md rule 6):
  EMBER_LOGS       comma-separated log names: capture's (graph_breaks, recompiles, guards, graph),
                   the inductor's (output_code, ir, schedule, fallback, timings), the facade's
                   (aot_graphs, cudagraphs), or all; TORCH_LOGS' names mean what they mean there
                   (TORCH_LOG_NAMES: graph_code, perf_hints, +dynamo, +ember, ...)
  EMBER_CACHE_DIR  where compiled kernels are cached on disk (default ~/.cache/ember)
  EMBER_CHECK=1    run every layer's verifier at its boundary (Note [checked boundaries], checks.py)
  EMBER_RAISE_INTERNAL=1  an internal error of capture raises instead of becoming a graph break
                   with a warning (Note [internal errors] in ember_capture.config)
  EMBER_DEBUG=1    keep ember's frames and the chained internal exception in the tracebacks of
                   the errors ember raises (hidden by default: they point at the user's code)
  EMBER_TRACE=DIR  write the compile report of every compile of the program to one HTML file in
                   DIR (trace.py); per compile: options={"trace.enabled": True}
  EMBER_WARM_START=0  no warm-start cache on disk (warm_start.py); options={"warm_start": ...} wins
  EMBER_PROGRESS=0 no progress line on long compiles (progress.py); 1 shows it even off a terminal

The switches are also options, for any backend: `options={"check": True}` (and "raise_internal",
"debug"); the other options go to the backend.
"""
from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any

from ember.errors import InvalidArgument

MODES: dict[str | None, dict[str, Any]] = {
    # mode -> inductor option overrides it implies
    None: {},
    "default": {},
    "reduce-overhead": {"cudagraphs": True},
    # GEMM templates autotuned against cuBLAS, epilogues fused, and the block-size autotuner
    "max-autotune": {"autotune": True, "max_autotune": True, "cudagraphs": True},
    "max-autotune-no-cudagraphs": {"autotune": True, "max_autotune": True},
}

# Option names accepted for torch.compile's spelling: the name ember's inductor options use.
OPTION_ALIASES: dict[str, str] = {
    "triton.cudagraphs": "cudagraphs",
}

CAPTURE_LOGS = frozenset({"graph_breaks", "recompiles", "guards", "graph"})
INDUCTOR_LOGS = frozenset({"output_code", "ir", "schedule", "fallback", "timings"})
# aot_graphs: ember_autograd's forward and backward graphs; cudagraphs: what CUDA graphs
# recorded, and what ran without them
FACADE_LOGS = frozenset({"aot_graphs", "cudagraphs"})
LOG_NAMES = CAPTURE_LOGS | INDUCTOR_LOGS | FACADE_LOGS | {"all"}
# The names TORCH_LOGS users know -> ember's logs that print the same facts. A leading "+"
# (TORCH_LOGS' verbose) is accepted on any name: ember's logs have one level.
TORCH_LOG_NAMES: dict[str, frozenset[str]] = {
    "graph_code": frozenset({"graph"}),  # the captured FX graph's code
    "perf_hints": frozenset({"fallback", "cudagraphs"}),  # ops left to torch, graphs not replayed
    "dynamo": CAPTURE_LOGS,  # TORCH_LOGS' components: each layer's logs
    "aot": frozenset({"aot_graphs"}),
    "inductor": INDUCTOR_LOGS,
    "ember": LOG_NAMES - {"all"},
}
# option -> environment variable: the facade's own switches, valid whatever the backend
SWITCHES = {"check": "EMBER_CHECK", "raise_internal": "EMBER_RAISE_INTERNAL", "debug": "EMBER_DEBUG"}
# The compile report's options (trace.py), valid whatever the backend: option -> (type, default)
TRACE_OPTIONS: dict[str, tuple[type, Any]] = {
    "trace.enabled": (bool, False),  # add this compile to the program's HTML report
    "trace.dir": (str, None),  # where the report is written (EMBER_TRACE, else <cache_dir>/trace)
    "trace.profile": (bool, False),  # time each kernel's calls; the report shows them
    "trace.graph_diagram": (bool, True),  # the fused-graph diagrams in the report
}
# Trace options the inductor also takes (its per-graph trace folders), when a compile gives them
INDUCTOR_TRACE = frozenset({"trace.enabled", "trace.dir", "trace.graph_diagram"})


@dataclasses.dataclass(frozen=True)
class Settings:
    backend_name: str  # the registry name, or the callable's __name__ for custom backends
    fullgraph: bool
    dynamic: bool | None
    mode: str | None
    options: Mapping[str, Any]  # user options merged with the mode's; validated by the backend
    logs: frozenset[str]
    cache_dir: str
    check: bool = False  # every layer's verifier on (EMBER_CHECK)
    raise_internal: bool = False  # capture's internal errors raise (EMBER_RAISE_INTERNAL)
    debug: bool = False  # ember's frames stay in error tracebacks (EMBER_DEBUG)
    trace: Mapping[str, Any] = dataclasses.field(default_factory=dict)  # TRACE_OPTIONS' values
    progress: bool | None = None  # EMBER_PROGRESS: None: on a terminal only
    warm_start: bool = True  # the lowering and inductor results cached on disk (EMBER_WARM_START)


def _check_type(name: str, value: Any, types: tuple[type, ...], valid: str) -> None:
    if not isinstance(value, types):
        raise InvalidArgument(f"ember.compile: {name}={value!r} is a {type(value).__name__}; valid: {valid}")


def read_logs(env: Mapping[str, str]) -> frozenset[str]:
    """EMBER_LOGS -> ember's log names; TORCH_LOGS' names (graph_code, +dynamo) are translated."""
    raw = env.get("EMBER_LOGS", "")
    names = {n.strip().lstrip("+") for n in raw.split(",") if n.strip()}
    unknown = names - LOG_NAMES - TORCH_LOG_NAMES.keys()
    if unknown:
        raise InvalidArgument(
            f"EMBER_LOGS names unknown logs {sorted(unknown)}; valid: {', '.join(sorted(LOG_NAMES))}, "
            f"or TORCH_LOGS' names {', '.join(sorted(TORCH_LOG_NAMES))} (a leading + is accepted)")
    if "all" in names:
        return LOG_NAMES - {"all"}
    return frozenset().union(*(TORCH_LOG_NAMES.get(n, {n}) for n in names))


def make_settings(*, backend_name: str, fullgraph: Any, dynamic: Any, mode: Any, options: Any,
                  env: Mapping[str, str] | None = None) -> Settings:
    """Validate compile()'s arguments; raise InvalidArgument naming the valid choices."""
    env = os.environ if env is None else env
    _check_type("fullgraph", fullgraph, (bool,), "True or False")
    if dynamic is not None:
        _check_type("dynamic", dynamic, (bool,), "None, True or False")
    if mode is not None:
        _check_type("mode", mode, (str,), f"None or one of {sorted(m for m in MODES if m)}")
        if mode not in MODES:
            raise InvalidArgument(
                f"ember.compile: unknown mode {mode!r}; valid modes: {sorted(m for m in MODES if m)}")
    if options is not None:
        _check_type("options", options, (dict,), "a dict of backend options, or None")
        bad_keys = [k for k in options if not isinstance(k, str)]
        if bad_keys:
            raise InvalidArgument(f"ember.compile: option keys must be strings, got {bad_keys!r}")
    if mode is not None and options is not None:
        raise InvalidArgument("ember.compile: give either mode or options, not both "
                              "(a mode is a named set of options)")
    merged = dict(MODES[mode]) if mode is not None else {
        OPTION_ALIASES.get(k, k): v for k, v in (options or {}).items()}
    switches = {name: _read_switch(var, env) for name, var in SWITCHES.items()}
    for name in SWITCHES:
        if name in merged:
            value = merged.pop(name)
            _check_type(f"options[{name!r}]", value, (bool,), "True or False")
            switches[name] = switches[name] or value
    cache_dir = env.get("EMBER_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "ember")
    trace = _read_trace(merged, env, cache_dir)
    warm_start = not env.get("EMBER_WARM_START", "").strip() or _read_switch("EMBER_WARM_START", env)
    if "warm_start" in merged:
        value = merged.pop("warm_start")
        _check_type("options['warm_start']", value, (bool,), "True or False")
        warm_start = value  # the program's own choice wins over the environment's
    progress = None if not env.get("EMBER_PROGRESS", "").strip() else _read_switch("EMBER_PROGRESS", env)
    return Settings(backend_name=backend_name, fullgraph=fullgraph, dynamic=dynamic, mode=mode,
                    options=merged, logs=read_logs(env), cache_dir=cache_dir, trace=trace,
                    progress=progress, warm_start=warm_start, **switches)


def _read_trace(merged: dict, env: Mapping[str, str], cache_dir: str) -> dict[str, Any]:
    """Take the trace options out of `merged` (they are the facade's, whatever the backend)."""
    trace: dict[str, Any] = {name: default for name, (_, default) in TRACE_OPTIONS.items()}
    given = []
    for name, (kind, _) in TRACE_OPTIONS.items():
        if name in merged:
            value = merged.pop(name)
            if not isinstance(value, kind):
                valid = "True or False" if kind is bool else "a folder (str)"
                raise InvalidArgument(f"ember.compile: options[{name!r}] must be {valid}, got {value!r}")
            trace[name] = value
            given.append(name)
    trace["given"] = frozenset(given)
    where = env.get("EMBER_TRACE", "").strip()
    if where:
        trace["trace.enabled"] = True
    trace["trace.dir"] = os.path.expanduser(trace["trace.dir"] or where or os.path.join(cache_dir, "trace"))
    return trace


def _read_switch(var: str, env: Mapping[str, str]) -> bool:
    raw = env.get(var, "").strip().lower()
    if raw in ("", "0", "false", "no", "off"):
        return False
    if raw in ("1", "true", "yes", "on"):
        return True
    raise InvalidArgument(f"{var}={raw!r}; valid: 1 or 0")
