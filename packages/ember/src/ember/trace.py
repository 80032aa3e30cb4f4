"""The program's compile report: one HTML file per program run (report_html.py).

Note [one report per run]: every `ember.compile` whose settings enable tracing
(`options={"trace.enabled": True}`, or `EMBER_TRACE=DIR` for every compile of the program) adds
its compile record to the process's one `ProgramTrace`. The file
`<trace dir>/ember_report_<pid>.html` is written when the program exits and whenever
`ember.write_report()` is called; its path is printed once, on the first traced compile.
Writing at exit rather than after each graph keeps a model with hundreds of graphs from
rendering the page hundreds of times.

With `"trace.profile": True`, each compiled graph's kernels are timed on every call (the
wrapper's launchers are replaced by timed ones; on CUDA each call synchronizes, so profiled
runs are slower) and the report shows calls, total and per-call time per kernel::

    import os, tempfile, torch, ember
    where = tempfile.mkdtemp()
    f = ember.compile(lambda x: torch.relu(x) * 2,
                      options={"trace.enabled": True, "trace.dir": where, "trace.profile": True})
    f(torch.randn(64))
    path = ember.write_report(os.path.join(where, "report.html"))  # or at exit, to the run's trace dir
    assert "kernel-times" in open(path).read()
"""
from __future__ import annotations

import atexit
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import torch

from ember import report_html
from ember.record import CompileRecord, Step
from ember.report import CompileReport


class ProgramTrace:
    """The records of the traced compiles of this process, and where their report goes."""

    def __init__(self) -> None:
        self.records: list[CompileRecord] = []
        self.directory: str | None = None
        self.diagrams = True
        self._lock = threading.Lock()
        self._exit_hook = False

    def add(self, record: CompileRecord, trace: dict[str, Any]) -> None:
        with self._lock:
            if self.directory is None:
                self.directory = trace["trace.dir"]
                print(f"ember: the compile report will be written to {self.path()} (at exit, or by "
                      "ember.write_report())", file=sys.stderr)
            self.records.append(record)
            self.diagrams = self.diagrams and trace["trace.graph_diagram"]
            if not self._exit_hook:
                atexit.register(self.write_quietly)
                self._exit_hook = True
        if trace["trace.profile"]:
            record.listeners.append(_profile_kernels)

    def path(self) -> str:
        return os.path.join(self.directory or ".", f"ember_report_{os.getpid()}.html")

    def write(self, path: str | None = None) -> str:
        """Render every record to one file, written atomically (a reader never sees half a page)."""
        with self._lock:
            reports = [CompileReport.of(r) for r in self.records]
        if not self.diagrams:
            for r in reports:
                for g in r.graphs:
                    for s in g.stages:
                        s.diagram = ""
        target = path or self.path()
        os.makedirs(os.path.dirname(os.path.abspath(target)), exist_ok=True)
        tmp = f"{target}.{os.getpid()}.{threading.get_ident()}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(report_html.render(reports))
        os.replace(tmp, target)
        return target

    def write_quietly(self) -> None:
        try:
            self.write()
        except Exception as exc:  # at exit: say so, never raise over the program's own exit
            print(f"ember: could not write the compile report: {type(exc).__name__}: {exc}", file=sys.stderr)


PROGRAM = ProgramTrace()


def write_report(path: str | None = None) -> str:
    """Write the HTML compile report of this program's traced compiles now (it is also written at
    exit); returns its path. Without a traced compile, the report of none is written to the
    current directory."""
    return PROGRAM.write(path)


# --- kernel profiling ---------------------------------------------------------------------------

def _profile_kernels(record: CompileRecord, step: Step) -> None:
    compiled = step.artifact
    if step.layer != "inductor" or getattr(compiled, "kernel_times", None) is not None:
        return
    fn = getattr(compiled, "_fn", None)
    namespace = getattr(fn, "__globals__", None)
    if namespace is None:
        return
    compiled.kernel_times = times = {}
    sync = torch.cuda.synchronize if compiled.backend == "triton" and torch.cuda.is_available() else None
    for k in compiled.kernels:
        for name in (k.name, f"{k.name}_c"):  # the launcher, and the C entry point the wrapper may call
            if callable(namespace.get(name)):
                namespace[name] = _timed(namespace[name], k.name, times, sync)


def _timed(launch: Callable, name: str, times: dict, sync: Callable | None) -> Callable:
    def run(*args: Any) -> Any:
        if sync is not None:
            sync()
        start = time.perf_counter()
        out = launch(*args)
        if sync is not None:
            sync()
        calls, total = times.get(name, (0, 0.0))
        times[name] = (calls + 1, total + time.perf_counter() - start)
        return out

    return run
