"""The per-model subprocess: build one model, measure it under every variant, report as JSON lines.

    python -m bench.worker SPEC.json

SPEC.json (written by runner.py) names the model, device, dtype, phases, variants, mode, run
configuration, seed, a deadline and the events file. Each line appended to the events file is one
JSON object, flushed at once, so the parent can show progress and, if this process dies (a
segfault, the OOM killer, a timeout), knows which (variant, phase) it died in:

    {"event": "model", "phases": [...], "params": N}
    {"event": "skipped", "reason": "..."}
    {"event": "start", "variant": V, "phase": P}
    {"event": "compiled", "variant": V, "phase": P, "first_call_s": S}
    {"event": "result", "variant": V, "phase": P, "status": "ok" | "error" | "timeout" | "skipped", ...}

Order inside a phase: the eager reference (not timed), then the variants as listed (eager first).
Every variant starts from the same weights and sees the same input batches.
"""
from __future__ import annotations

import copy
import ctypes
import gc
import json
import os
import signal
import sys
import time
import traceback
from contextlib import nullcontext
from pathlib import Path
from typing import Any, Callable

PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """Linux: be killed when the parent dies (the parent put us in our own session, so a signal
    to its process group, from a time limit or Ctrl-C, would not reach us)."""
    try:
        ctypes.CDLL("libc.so.6").prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        return
    if os.getppid() == 1:  # the parent died before prctl
        os._exit(1)


if __name__ == "__main__":
    _die_with_parent()  # first, before the seconds that importing torch takes

import torch  # noqa: E402
from torch import nn  # noqa: E402

from bench import measure  # noqa: E402
from bench.measure import RunConfig, Timer  # noqa: E402
from bench.models import MODELS, Batch, Workload  # noqa: E402

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16, "float64": torch.float64}


class VariantTimeout(BaseException):
    """Raised by SIGALRM. A BaseException, so that `except Exception` inside a compiler does not
    swallow it."""


class Events:
    def __init__(self, path: str):
        self._f = open(path, "a", buffering=1)

    def emit(self, event: str, **fields: Any) -> None:
        self._f.write(json.dumps({"event": event, "t": time.time(), **fields}) + "\n")
        self._f.flush()


# --------------------------------------------------------------------------- variants

def _compiler(variant: dict, mode: str | None) -> Callable[[Callable], Callable]:
    """How a variant wraps the model: eager as is, ember.compile, or torch.compile."""
    kind, backend = variant["kind"], variant.get("backend")
    if kind == "eager":
        return lambda fn: fn
    if kind == "torch":
        def wrap(fn):
            torch.compiler.reset()
            return torch.compile(fn, backend=backend, mode=mode)
        return wrap
    if kind == "ember":
        def wrap(fn):
            import ember  # imported here: a broken or half-written ember must not stop the others

            try:  # each variant compiles from scratch; a failing reset is ember's bug, not a stop
                ember.reset()
            except Exception:  # noqa: BLE001
                traceback.print_exc()
            kwargs = {"backend": backend}
            if mode is not None:
                kwargs["mode"] = mode
            return ember.compile(fn, **kwargs)
        return wrap
    raise ValueError(f"unknown variant kind {kind!r}")


# --------------------------------------------------------------------------- one phase, one variant

OPTIMIZERS = {
    "sgd": lambda params: torch.optim.SGD(params, lr=1e-3, momentum=0.9),
    "adamw": lambda params: torch.optim.AdamW(params, lr=1e-3),
}


class Phase:
    """Everything shared by the variants of one phase: the batches and the eager reference."""

    def __init__(self, workload: Workload, initial_state: dict | None, phase: str, device: torch.device,
                 cfg: RunConfig, seed: int):
        self.workload, self.phase, self.initial_state = workload, phase, initial_state
        self.module = workload.fn if isinstance(workload.fn, nn.Module) else None
        self.batches = []
        for i in range(cfg.pool):
            gen = torch.Generator(device=device)
            gen.manual_seed(seed * 1000 + i)
            self.batches.append(workload.make_batch(gen, phase))
        self.reference: tuple[list, list] | None = None
        self.whole = False  # set per variant: the step function is the whole training step
        self.optimizer_name = "sgd"  # a key of OPTIMIZERS
        self._ref64: tuple[list, list] | bool | None = None

    def reset(self) -> None:
        if self.module is not None:
            self.module.load_state_dict(self.initial_state)
            self.module.train(self.phase == "train")

    def grad_context(self):
        return torch.no_grad() if self.phase == "infer" else nullcontext()

    def params(self, module: nn.Module | None = None) -> list[nn.Parameter]:
        module = module if module is not None else self.module
        return [p for p in module.parameters() if p.requires_grad] if module is not None else []

    def first_call(self, fn: Callable, opt, module: nn.Module | None = None, batch: Batch | None = None
                   ) -> tuple[list, list]:
        """One call on batch 0 from the initial weights: the outputs and, in training, the loss and
        the gradients (read before the optimizer step)."""
        b = batch if batch is not None else self.batches[0]
        if self.whole and batch is None:
            loss = fn(b)
            return measure.detach_cpu(loss), self._grads(module)
        out = fn(*b.args, **b.kwargs)
        if self.phase == "infer":
            return measure.detach_cpu(out), []
        loss = self.workload.loss(out, b)
        loss.backward()
        grads = self._grads(module)
        outs = measure.detach_cpu(loss)
        if opt is not None:
            opt.step()
            opt.zero_grad(set_to_none=True)
        return outs, grads

    def _grads(self, module) -> list:
        return [p.grad.detach().to("cpu", copy=True) if p.grad is not None else torch.zeros(())
                for p in self.params(module)]

    def reference64(self) -> tuple[list, list] | None:
        """The same first call in float64, on a copy of the model: the arbiter when a variant
        disagrees with eager float32 (see measure.no_worse_than_eager). None if it cannot run."""
        if self._ref64 is None:
            try:
                module = copy.deepcopy(self.module) if self.module is not None else None
                if module is not None:
                    module.load_state_dict(self.initial_state)
                    module.to(torch.float64).train(self.phase == "train")
                fn = module if module is not None else self.workload.fn
                with self.grad_context():
                    self._ref64 = self.first_call(fn, None, module, _to64(self.batches[0]))
            except Exception:  # noqa: BLE001 - without it, the plain tolerance decides
                traceback.print_exc()
                self._ref64 = False
        return self._ref64 or None

    def whole_step(self, fn: Callable, opt) -> Callable:
        """The documents' training step as one function (`--train-step whole`): the compilers
        get zero_grad, forward, loss, backward and the optimizer step. Gradients stay after it."""
        loss_fn = self.workload.loss

        def train(b):
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(fn(*b.args, **b.kwargs), b)
            loss.backward()
            opt.step()
            return loss
        return train

    def step_fn(self, fn: Callable, opt) -> Callable[[int], Any]:
        batches, loss_fn = self.batches, self.workload.loss

        if self.whole:
            def whole(i):
                return fn(batches[i % len(batches)])
            return whole

        if self.phase == "infer":
            def step(i):
                b = batches[i % len(batches)]
                return fn(*b.args, **b.kwargs)
            return step

        def train_step(i):
            b = batches[i % len(batches)]
            loss = loss_fn(fn(*b.args, **b.kwargs), b)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            return loss
        return train_step

    def optimizer(self):
        if self.phase != "train":
            return None
        # --optimizer: SGD with momentum (default: a cheap, stateful step) or AdamW; run eagerly for
        # every variant alike, or compiled with the step under --train-step whole.
        return OPTIMIZERS[self.optimizer_name](self.params())

    def compute_reference(self) -> None:
        self.reset()
        with self.grad_context():
            self.reference = self.first_call(self.workload.fn, self.optimizer())


def measure_variant(ph: Phase, variant: dict, mode: str | None, timer: Timer, cfg: RunConfig,
                    dtype: torch.dtype, events: Events, train_step: str = "model") -> dict:
    name = variant["name"]
    ph.reset()
    opt = ph.optimizer()
    whole = train_step == "whole" and ph.phase == "train"
    with ph.grad_context():
        fn = _compiler(variant, mode)(ph.whole_step(ph.workload.fn, opt) if whole else ph.workload.fn)
        ph.whole = whole
        try:
            first_s, (outs, grads) = timer.wall(lambda: ph.first_call(fn, opt))
            events.emit("compiled", variant=name, phase=ph.phase, first_call_s=first_s)
            # Eager alternates with a compiled variant (its own optimizer: momentum is per step path).
            baseline = None
            if variant["kind"] != "eager":
                eager_opt = ph.optimizer()
                eager_fn = ph.whole_step(ph.workload.fn, eager_opt) if whole else ph.workload.fn
                baseline = ph.step_fn(eager_fn, eager_opt)
            timing = measure.time_calls(timer, ph.step_fn(fn, opt), cfg, start=1, baseline=baseline)
            mem_step = ph.step_fn(fn, opt)

            def memory_calls():
                for i in range(cfg.memory_calls):
                    mem_step(i)  # outputs not kept: the peak is one call's

            peak, reserved = measure.peak_memory(timer.device, memory_calls)
        finally:
            ph.whole = False
    ref_outs, ref_grads = ph.reference
    err = measure.max_rel_error(outs, ref_outs)
    grad_err = measure.max_rel_error(grads, ref_grads) if ph.phase == "train" else None
    tol, grad_tol = measure.tolerance(dtype), measure.tolerance(dtype, grads=True)
    within = err <= tol and (grad_err is None or grad_err <= grad_tol)
    accuracy = None
    if not within and (ref64 := ph.reference64()) is not None:
        within = (measure.no_worse_than_eager(outs, ref_outs, ref64[0], tol)
                  and measure.no_worse_than_eager(grads, ref_grads, ref64[1], grad_tol))
        accuracy = (f"beyond tolerance vs eager, but as close to float64 as eager (vs float64: "
                    f"{max(measure.max_rel_error(outs, ref64[0]), measure.max_rel_error(grads, ref64[1])):.1e}, "
                    f"eager {max(measure.max_rel_error(ref_outs, ref64[0]), measure.max_rel_error(ref_grads, ref64[1])):.1e})"
                    if within else "beyond tolerance vs eager and less accurate than eager vs float64")
    return {
        "status": "ok", "first_call_s": first_s, "ms": timing.median_s * 1e3, "min_ms": timing.min_s * 1e3,
        "reps": timing.reps,
        "eager_paired_ms": None if timing.baseline_median_s is None else timing.baseline_median_s * 1e3,
        "max_rel_err": err, "grad_max_rel_err": grad_err, "tolerance": tol,
        "grad_tolerance": grad_tol if ph.phase == "train" else None, "within_tolerance": within,
        "accuracy_note": accuracy, "peak_mb": peak, "reserved_mb": reserved,
    }


def _to64(b: Batch) -> Batch:
    def conv(x):
        return x.to(torch.float64) if isinstance(x, torch.Tensor) and x.is_floating_point() else x

    return Batch(tuple(conv(a) for a in b.args), {k: conv(v) for k, v in b.kwargs.items()}, conv(b.target))


def _error_text(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    return first[:300]


def _on_alarm(signum, frame):
    raise VariantTimeout()


def _run_guarded(seconds: float | None, thunk: Callable[[], dict]) -> dict:
    """Run `thunk` under a SIGALRM timeout; failures become a result row, never an exit."""
    if seconds is not None:
        signal.setitimer(signal.ITIMER_REAL, max(seconds, 0.01))
    try:
        return thunk()
    except VariantTimeout:
        return {"status": "timeout", "error": f"timed out after {seconds:.0f} s"}
    except Exception as exc:  # noqa: BLE001 - every failure is reported in its row
        traceback.print_exc()
        kind = "oom" if "out of memory" in str(exc).lower() else "error"
        return {"status": "error", "error_kind": kind, "error": _error_text(exc)}
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


# --------------------------------------------------------------------------- main

def run(spec: dict) -> None:
    events = Events(spec["events"])
    device, dtype = torch.device(spec["device"]), DTYPES[spec["dtype"]]
    cfg = RunConfig(**spec["run"])
    timer = Timer(device)
    signal.signal(signal.SIGALRM, _on_alarm)
    if device.type == "cpu":
        measure.steady_malloc()
    if spec.get("tf32"):
        torch.set_float32_matmul_precision("high")
    torch.manual_seed(spec["seed"])

    model = MODELS[spec["model"]]
    try:
        workload = model.build(device, dtype)
    except ImportError as exc:
        events.emit("skipped", reason=f"needs {exc.name or exc}")
        return
    except Exception as exc:  # noqa: BLE001
        traceback.print_exc()
        events.emit("skipped", status="error", reason=f"build failed: {_error_text(exc)}")
        return
    phases = [p for p in spec["phases"] if p in workload.phases]
    n_params = sum(p.numel() for p in workload.fn.parameters()) if isinstance(workload.fn, nn.Module) else 0
    events.emit("model", phases=phases, params=n_params)
    # The weights every variant of every phase starts from (kept on the host: not in GPU peaks).
    initial_state = ({k: v.detach().to("cpu", copy=True) for k, v in workload.fn.state_dict().items()}
                     if isinstance(workload.fn, nn.Module) else None)

    skip = {tuple(s) for s in spec.get("skip", [])}
    todo = [(p, v) for p in phases for v in spec["variants"] if (v["name"], p) not in skip]
    limit = _Limits(spec.get("deadline"), spec["variant_timeout"])
    for phase in phases:
        variants = [v for p, v in todo if p == phase]
        if not variants:
            continue
        ph = Phase(workload, initial_state, phase, device, cfg, spec["seed"])
        ph.optimizer_name = spec.get("optimizer", "sgd")
        ref = _run_guarded(limit.next(_weight(phase, None), todo),
                           lambda: (ph.compute_reference(), {"status": "ok"})[1])
        for v in variants:
            todo.remove((phase, v))
            events.emit("start", variant=v["name"], phase=phase)
            timeout = limit.next(_weight(phase, v), todo)
            if ref["status"] != "ok":
                result = {**ref, "error": f"eager reference failed: {ref.get('error', ref['status'])}"}
            elif timeout is not None and timeout < 1.0:
                result = {"status": "skipped", "error": "out of time budget"}
            else:
                result = _run_guarded(timeout, lambda: measure_variant(ph, v, spec.get("mode"), timer, cfg, dtype, events,
                                                                           spec.get("train_step", "model")))
            _release(v)
            events.emit("result", variant=v["name"], phase=phase, **result)
        del ph


def _weight(phase: str, variant: dict | None) -> float:
    """An item's expected share of the model's time: compiling dominates, a backward doubles it.
    `variant` None is the eager reference."""
    if variant is None or variant["kind"] == "eager":
        return EAGER_WEIGHT
    return 2.0 if phase == "train" else 1.0


EAGER_WEIGHT = 0.1


class _Limits:
    """Time limits per item: the per-variant limit, or the item's weighted share of the time left
    to the model (what an item leaves unused goes to the next)."""

    def __init__(self, deadline: float | None, per_variant: float | None):
        self.deadline, self.per_variant = deadline, per_variant

    def next(self, weight: float, todo_after: list[tuple[str, dict]]) -> float | None:
        limits = [self.per_variant] if self.per_variant else []
        if self.deadline is not None and weight <= EAGER_WEIGHT:
            # Eager work (the reference, the eager variant) is needed by every other item and
            # bounded by the model's own speed: it may use all the time left.
            limits.append(self.deadline - time.time())
        elif self.deadline is not None:
            rest = sum(_weight(p, v) for p, v in todo_after)
            # Items ahead get a little more than their share (half of the rest's weight counts):
            # an item that fails fast is common, one that needs all of its share is not.
            limits.append((self.deadline - time.time()) * weight / (weight + 0.5 * rest))
        return min(limits) if limits else None


def _release(variant: dict) -> None:
    """Drop what a compiled variant keeps alive (code caches, CUDA graph pools) before the next."""
    if variant["kind"] == "torch":
        torch.compiler.reset()
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    run(json.loads(Path(argv[0]).read_text()))


if __name__ == "__main__":
    main()
