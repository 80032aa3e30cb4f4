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

import json
import signal
import sys
import time
import traceback
from contextlib import nullcontext
from pathlib import Path
from typing import Any, Callable

import torch
from torch import nn

from bench import measure
from bench.measure import RunConfig, Timer
from bench.models import MODELS, Batch, Workload

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

class Phase:
    """Everything shared by the variants of one phase: the batches and the eager reference."""

    def __init__(self, workload: Workload, phase: str, device: torch.device, cfg: RunConfig, seed: int):
        self.workload, self.phase = workload, phase
        self.module = workload.fn if isinstance(workload.fn, nn.Module) else None
        self.initial_state = (
            {k: v.detach().to("cpu", copy=True) for k, v in self.module.state_dict().items()}
            if self.module is not None else None
        )
        self.batches = []
        for i in range(cfg.pool):
            gen = torch.Generator(device=device)
            gen.manual_seed(seed * 1000 + i)
            self.batches.append(workload.make_batch(gen, phase))
        self.reference: tuple[list, list] | None = None

    def reset(self) -> None:
        if self.module is not None:
            self.module.load_state_dict(self.initial_state)
            self.module.train(self.phase == "train")

    def grad_context(self):
        return torch.no_grad() if self.phase == "infer" else nullcontext()

    def params(self) -> list[nn.Parameter]:
        return [p for p in self.module.parameters() if p.requires_grad] if self.module is not None else []

    def first_call(self, fn: Callable, opt) -> tuple[list, list]:
        """One call on batch 0 from the initial weights: the outputs and, in training, the gradients
        (read before the optimizer step)."""
        b = self.batches[0]
        out = fn(*b.args, **b.kwargs)
        if self.phase == "infer":
            return measure.detach_cpu(out), []
        loss = self.workload.loss(out, b)
        loss.backward()
        grads = [p.grad.detach().to("cpu", copy=True) if p.grad is not None else torch.zeros(())
                 for p in self.params()]
        outs = measure.detach_cpu(loss)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return outs, grads

    def step_fn(self, fn: Callable, opt) -> Callable[[int], Any]:
        batches, loss_fn = self.batches, self.workload.loss

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
        # SGD with momentum: a cheap, stateful step, run eagerly for every variant alike.
        return torch.optim.SGD(self.params(), lr=1e-3, momentum=0.9)

    def compute_reference(self) -> None:
        self.reset()
        with self.grad_context():
            self.reference = self.first_call(self.workload.fn, self.optimizer())


def measure_variant(ph: Phase, variant: dict, mode: str | None, timer: Timer, cfg: RunConfig,
                    dtype: torch.dtype, events: Events) -> dict:
    name = variant["name"]
    ph.reset()
    opt = ph.optimizer()
    with ph.grad_context():
        fn = _compiler(variant, mode)(ph.workload.fn)
        first_s, (outs, grads) = timer.wall(lambda: ph.first_call(fn, opt))
        events.emit("compiled", variant=name, phase=ph.phase, first_call_s=first_s)
        median_s, reps = measure.time_calls(timer, ph.step_fn(fn, opt), cfg, start=1)
        mem_step = ph.step_fn(fn, opt)
        peak = measure.peak_memory_mb(
            timer.device, lambda: [mem_step(i) for i in range(cfg.memory_calls)])
    ref_outs, ref_grads = ph.reference
    err = measure.max_rel_error(outs, ref_outs)
    grad_err = measure.max_rel_error(grads, ref_grads) if ph.phase == "train" else None
    tol, grad_tol = measure.tolerance(dtype), measure.tolerance(dtype, grads=True)
    within = err <= tol and (grad_err is None or grad_err <= grad_tol)
    return {
        "status": "ok", "first_call_s": first_s, "ms": median_s * 1e3, "reps": reps,
        "max_rel_err": err, "grad_max_rel_err": grad_err, "tolerance": tol,
        "grad_tolerance": grad_tol if ph.phase == "train" else None, "within_tolerance": within,
        "peak_mb": peak,
    }


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
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


# --------------------------------------------------------------------------- main

def run(spec: dict) -> None:
    events = Events(spec["events"])
    device, dtype = torch.device(spec["device"]), DTYPES[spec["dtype"]]
    cfg = RunConfig(**spec["run"])
    timer = Timer(device)
    signal.signal(signal.SIGALRM, _on_alarm)
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

    skip = {tuple(s) for s in spec.get("skip", [])}
    deadline = spec.get("deadline")
    todo = [(p, v) for p in phases for v in spec["variants"] if (v["name"], p) not in skip]
    for phase in phases:
        variants = [v for p, v in todo if p == phase]
        if not variants:
            continue
        ph = Phase(workload, phase, device, cfg, spec["seed"])
        ref = _run_guarded(_share(deadline, spec["variant_timeout"], 1 + len(todo)),
                           lambda: (ph.compute_reference(), {"status": "ok"})[1])
        for v in variants:
            todo.remove((phase, v))
            events.emit("start", variant=v["name"], phase=phase)
            timeout = _share(deadline, spec["variant_timeout"], 1 + len(todo))
            if ref["status"] != "ok":
                result = {**ref, "error": f"eager reference failed: {ref.get('error', ref['status'])}"}
            elif timeout is not None and timeout < 1.0:
                result = {"status": "skipped", "error": "out of time budget"}
            else:
                result = _run_guarded(timeout, lambda: measure_variant(ph, v, spec.get("mode"), timer, cfg, dtype, events))
            events.emit("result", variant=v["name"], phase=phase, **result)
        del ph


def _share(deadline: float | None, per_variant: float | None, remaining_items: int) -> float | None:
    """This item's time limit: the per-variant limit, or its share of the time left to the model."""
    limits = [per_variant] if per_variant else []
    if deadline is not None:
        limits.append((deadline - time.time()) / max(remaining_items, 1))
    return min(limits) if limits else None


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    run(json.loads(Path(argv[0]).read_text()))


if __name__ == "__main__":
    main()
