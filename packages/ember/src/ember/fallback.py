"""What happens when ember fails: the eager result with one warning, or an error under fullgraph.

Note [one failure path] (ARCHITECTURE.md, "Every failure has one path"): an exception raised by
ember while it compiles or first runs a graph (the backend's compile, autograd's lazy trace of a
new grad mode, the forward or backward compile of each functional graph, the first call of a
compiled forward or backward) ends in one place, `Fallback.fail`:

- without fullgraph: one warning per captured graph, attributed to the user's line (the graph's
  first operation, read from the nodes' `meta["stack_trace"]`), and the failing piece runs as
  torch would run it: the captured graph eagerly, or a functional forward/backward graph run
  op by op (`gm.forward`), which is always correct, so a compiled forward may be followed by
  an eager backward and the gradients are still exact;
- with fullgraph=True: `BackendCompilerFailed`, naming the user's function, file and line.

A boundary check that fails (Note [checked boundaries], checks.py) raises `ember.SpecError`
whatever fullgraph says.

Capture's own graph breaks and eager fallbacks are capture's (ember_capture.runtime); this
module covers everything the backend does with a captured graph.
"""
from __future__ import annotations

import dataclasses
import re
import warnings
from collections.abc import Callable
from typing import Any

import torch

from ember.checks import as_spec_error
from ember.errors import BackendCompilerFailed, UsageError
from ember.introspect import attr_or

_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<fn>\S+)')


@dataclasses.dataclass(frozen=True)
class Site:
    """Where a captured graph starts in the user's code."""

    function: str
    filename: str
    lineno: int

    def __str__(self) -> str:
        return f"{self.function} ({self.filename}:{self.lineno})"


def site_of(gm: torch.fx.GraphModule) -> Site | None:
    """The user's frame of the graph's first operation: the outermost frame of its stack trace,
    which is the function that was captured."""
    for node in gm.graph.nodes:
        if node.op in ("call_function", "call_method", "call_module"):
            match = _FRAME.search(node.meta.get("stack_trace") or "")
            if match:
                return Site(match["fn"], match["file"], int(match["line"]))
    return None


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}".rstrip(": ")


SNAPSHOT_BYTES = 512 * 2**20  # Fallback.first_call: inputs copied before a first call, at most


class Fallback:
    """The failure policy of one captured graph (Note [one failure path])."""

    def __init__(self, backend_name: str, fullgraph: bool, site: Site | None) -> None:
        self.backend_name = backend_name
        self.fullgraph = fullgraph
        self.site = site
        self.warned = False

    def fail(self, stage: str, exc: BaseException) -> None:
        """Report that `stage` failed with `exc`: raise under fullgraph, else warn once."""
        where = f" of {self.site}" if self.site else ""
        if isinstance(exc, BackendCompilerFailed):  # raised by a nested stage already
            raise exc
        spec = as_spec_error(exc)  # its __cause__ is the layer's own error
        if spec is not None:  # Note [checked boundaries]: a violation is a bug, never a fallback
            raise spec
        if self.fullgraph:
            raise BackendCompilerFailed(f"backend {self.backend_name!r} failed at the {stage} of the "
                                        f"graph{where}: {_one_line(exc)}") from exc
        if self.warned:
            return
        self.warned = True
        message = (f"ember: backend {self.backend_name!r} failed at the {stage} of a graph{where} "
                   f"({_one_line(exc)}); that graph runs eagerly")
        if self.site is None:
            warnings.warn(message, stacklevel=3)
        else:
            warnings.warn_explicit(message, UserWarning, self.site.filename, self.site.lineno)

    def compile(self, compiler: Callable, gm: torch.fx.GraphModule, example_inputs: list,
                stage: str, *, boxed: bool) -> Callable:
        """`compiler(gm, example_inputs)`, or `gm.forward` if it fails; the result's first call is
        guarded the same way (a compiled graph that fails when first run reruns as `gm.forward`).
        boxed: the result is called `f(list)` (ember_autograd's convention), else `f(*args)`
        (capture's)."""
        try:
            compiled = compiler(gm, example_inputs)
        except Exception as exc:  # noqa: BLE001 - reported by fail(), never hidden
            self.fail(f"{stage} compile", exc)
            return gm.forward
        if attr_or(compiled, "__self__") is gm or attr_or(compiled, "ember_guarded", False):
            return compiled  # the graph itself, or guarded already (AotComposition)
        # Note [compiled mutations] (ember_autograd): inputs the compiled graph may write itself
        mutated = sorted({i for _, i in gm.graph.output_node().meta.get("ember_mutations", ())})
        return self.first_call(compiled, gm.forward, f"first call of the compiled {stage}", boxed, mutated)

    def first_call(self, compiled: Callable, eager: Callable, stage: str, boxed: bool,
                   mutated: list[int] | tuple = ()) -> Callable:
        """`compiled`, except that if its first call raises and `eager` does not on the same
        inputs, that call and every later one run `eager` (called `f(*args)`); if eager raises
        too, the error is the user's and propagates, with no warning. With boxed, the result is called `f(list)`, and calls
        `compiled` that way if it says so (`_boxed_call`).

        mutated: positions of inputs the compiled graph may write in place (the inductor writes a
        mutated input's new value into it: Note [mutated inputs written in place]). A first call
        that fails after such a write (a kernel ran, a later one raised) would hand `eager`
        inputs that already hold some new values, and its result would apply the mutation twice
        (`x.neg_()` undone): so they are copied before the first call and restored before
        `eager` runs. Only the first call pays for the copies, and only up to SNAPSHOT_BYTES in
        all (a compiled optimizer step of a large model mutates every parameter and its state:
        copying them could exhaust memory; such a graph keeps the earlier behaviour)."""
        inner_boxed = attr_or(compiled, "_boxed_call", False)
        direct = compiled if inner_boxed else (lambda a: compiled(*a))
        state: list[Any] = [None]

        def call_first(args: list) -> Any:
            written = [i for i in mutated if i < len(args) and isinstance(args[i], torch.Tensor)]
            if sum(args[i].numel() * args[i].element_size() for i in written) > SNAPSHOT_BYTES:
                written = []
            with torch.no_grad():
                before = [(i, args[i].clone()) for i in written]
            try:
                out = direct(list(args))  # a copy: a boxed callee may clear the list it gets
            except Exception as exc:  # noqa: BLE001 - reported by fail(), never hidden
                with torch.no_grad():
                    for i, old in before:
                        args[i].copy_(old)
                del before
                out = eager(*args)  # raises the user's own error (bad input), if it is one
                state[0] = lambda a: eager(*a)
                self.fail(stage, exc)
                return out
            del before
            state[0] = direct
            return out

        state[0] = call_first
        if boxed:
            def run(args: list) -> Any:
                return state[0](args)
            run._boxed_call = True
        else:
            def run(*args: Any) -> Any:
                return state[0](args)
        run.compiled_graph = attr_or(compiled, "compiled_graph")  # inspection, see backends
        run.wrapped = compiled
        return run

    def every_call(self, compiled: Callable, eager: Callable) -> Callable:
        """`compiled(*args)`; when it raises, `eager(*args)` decides: if eager raises too, the error
        is the user's program's and propagates; if not, ember failed (say, compiling a graph for
        a grad mode first met now) and the graph runs eagerly from then on. For callables that
        mutate nothing before they fail (ember_autograd's functional graphs)."""
        state: list[Callable] = [compiled]

        def run(*args: Any) -> Any:
            try:
                return state[0](*args)
            except Exception as exc:  # noqa: BLE001 - decided below, never hidden
                if state[0] is eager or isinstance(exc, UsageError):
                    raise
                out = eager(*args)  # raises the user's own error, if it is one
                state[0] = eager
                self.fail("call", exc)
                return out

        run.wrapped = compiled
        run.ember_guarded = True
        return run
