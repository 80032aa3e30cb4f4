"""The parent process: one worker subprocess per model, progress, time limits, crash recovery.

Isolation: each model runs in its own `python -m bench.worker` process, so a crash, an OOM kill or
a hung compile costs that model's row only. If a worker dies in the middle of a (variant, phase),
that pair is reported as "crashed" (with the signal or exit code and the log's last line) and a
fresh worker resumes with the pairs still to do.

Time: `budget` (seconds for the whole suite) is shared among the models still to run in
proportion to their `cost`; unused time rolls over to the next. The worker receives its deadline
and splits it among its (variant, phase) pairs the same way, enforcing each share with SIGALRM;
the parent kills a worker that overruns its deadline by more than a grace period.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from bench.measure import RunConfig
from bench.models import MODELS

TOOLS_DIR = Path(__file__).resolve().parent.parent
KILL_GRACE_S = 15.0


@dataclass(frozen=True)
class Options:
    models: tuple[str, ...]
    device: str = "cpu"
    dtype: str = "float32"
    phases: tuple[str, ...] = ("infer", "train")
    backends: tuple[str, ...] = ("inductor",)
    mode: str | None = None
    torch_compile: bool = True
    torch_backend: str = "inductor"
    run: RunConfig = field(default_factory=RunConfig)
    seed: int = 0
    variant_timeout: float | None = 600.0
    model_timeout: float | None = 1800.0
    budget: float | None = None
    tf32: bool = False
    cold_cache: bool = True
    warm_cache: bool = False  # each model again, in a new process on the caches its first run filled
    train_step: str = "model"  # "whole": the compilers get the whole training step (issue 17)
    optimizer: str = "sgd"  # the training step's optimizer: worker.OPTIMIZERS

    def variants(self) -> list[dict]:
        vs = [{"name": "eager", "kind": "eager"}]
        vs += [{"name": f"ember:{b}", "kind": "ember", "backend": b} for b in self.backends]
        if self.torch_compile:
            vs.append({"name": "torch.compile", "kind": "torch", "backend": self.torch_backend})
        return vs


class Progress:
    """Progress on stderr: a live status line on a terminal, one line per event otherwise."""

    def __init__(self, stream=sys.stderr, live: bool | None = None):
        self.stream = stream
        self.live = stream.isatty() if live is None else live
        self.prefix, self.current, self.since, self.shown = "", "", time.time(), ""

    def model(self, i: int, n: int, name: str) -> None:
        self.prefix, self.since = f"[{i}/{n}] {name}", time.time()
        self._say("starting")

    def event(self, ev: dict) -> None:
        kind = ev["event"]
        if kind == "start":
            self.since = time.time()
            what = "first call" if ev["variant"] == "eager" else "compiling (first call)"
            self._say(f"{ev['phase']:5} {ev['variant']}: {what}")
        elif kind == "compiled":
            self._say(f"{ev['phase']:5} {ev['variant']}: first call {ev['first_call_s']:.1f} s, timing")
        elif kind == "result":
            ms = f"{ev['ms']:.3f} ms" if ev.get("ms") is not None else ev.get("error", "")
            self._say(f"{ev['phase']:5} {ev['variant']}: {ev['status']} {ms}", final=True)
        elif kind == "skipped":
            self._say(f"skipped: {ev['reason']}", final=True)

    def tick(self) -> None:
        if self.live and self.current:
            self._write(f"{self.current} ({time.time() - self.since:.0f} s)")

    def done(self, record: dict) -> None:
        self._say(f"done in {record['wall_s']:.0f} s ({record['status']})", final=True)

    def _say(self, text: str, final: bool = False) -> None:
        line = f"{self.prefix}  {text}"
        if self.live:
            self.current = "" if final else line
            self._write(line)
            if final:
                self.stream.write("\n")
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def _write(self, line: str) -> None:
        if line != self.shown:
            self.shown = line
            self.stream.write("\r\033[K" + line[:200])
            self.stream.flush()


def run_suite(opts: Options, work_dir: Path, progress: Progress | None = None) -> list[dict]:
    """Run every model of `opts` (each in its own process); returns one record per model."""
    progress = progress or Progress()
    work_dir.mkdir(parents=True, exist_ok=True)
    env, cache = _worker_env(opts, work_dir)
    start, records = time.time(), []
    try:
        for i, name in enumerate(opts.models, 1):
            progress.model(i, len(opts.models), name)
            deadline = _model_deadline(opts, start, opts.models[i - 1:])
            record = run_model(name, opts, work_dir, env, deadline, progress)
            if opts.warm_cache and record["status"] != "skipped":
                progress.model(i, len(opts.models), f"{name} (warm caches)")
                (work_dir / "warm").mkdir(exist_ok=True)
                merge_warm(record, run_model(name, opts, work_dir / "warm", env, deadline, progress))
            progress.done(record)
            records.append(record)
    finally:
        if cache is not None:
            shutil.rmtree(cache, ignore_errors=True)  # compiled kernels: large, and of no later use
    return records


def _model_deadline(opts: Options, suite_start: float, remaining: tuple[str, ...]) -> float | None:
    now, limits = time.time(), []
    if opts.model_timeout:
        limits.append(now + opts.model_timeout)
    if opts.budget:
        left = suite_start + opts.budget - now
        costs = [MODELS[m].cost for m in remaining]
        limits.append(now + max(left, 0) * costs[0] / sum(costs))
    return min(limits) if limits else None


def merge_warm(cold: dict, warm: dict) -> None:
    """Each result of `cold` gets `warm_first_call_s`: the same (variant, phase)'s first call in
    the second process, whose compile caches (ember's warm start, torch.compile's FX graph and
    Triton caches) the first run filled."""
    firsts = {(r["variant"], r["phase"]): r.get("first_call_s") for r in warm.get("results", [])
              if r.get("status") == "ok"}
    for r in cold.get("results", []):
        if firsts.get((r["variant"], r["phase"])) is not None:
            r["warm_first_call_s"] = firsts[(r["variant"], r["phase"])]


def _worker_env(opts: Options, work_dir: Path) -> tuple[dict, Path | None]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TOOLS_DIR), env.get("PYTHONPATH")]))
    env["PYTHONUNBUFFERED"] = "1"
    if opts.cold_cache:
        # Compile seconds are reported cold: ember's, torch.compile's and Triton's caches start
        # empty for this suite run (shared by its models, as they would be for a user).
        cache = Path(tempfile.mkdtemp(prefix="ember-bench-cache-"))
        env["EMBER_CACHE_DIR"] = str(cache / "ember")
        env["TORCHINDUCTOR_CACHE_DIR"] = str(cache / "inductor")
        env["TRITON_CACHE_DIR"] = str(cache / "triton")
        return env, cache
    return env, None


def run_model(name: str, opts: Options, work_dir: Path, env: dict, deadline: float | None,
              progress: Progress) -> dict:
    spec = MODELS[name]
    record = {"model": name, "description": spec.description, "status": "ok", "reason": None,
              "phases": [], "params": None, "results": [], "wall_s": 0.0}
    t0 = time.time()
    missing = spec.missing()
    if missing:
        record.update(status="skipped", reason=f"needs {', '.join(missing)} (not installed)")
        progress.event({"event": "skipped", "reason": record["reason"]})
        return record

    if deadline is not None and deadline - time.time() < 10.0:  # not even time to start a process
        record.update(status="skipped", reason="out of time budget")
        progress.event({"event": "skipped", "reason": record["reason"]})
        return record

    safe = name.replace("/", "_")
    log_path, events_path = work_dir / f"{safe}.log", work_dir / f"{safe}.events.jsonl"
    for p in (log_path, events_path):
        p.unlink(missing_ok=True)
    results: dict[tuple[str, str], dict] = {}
    variants = [v["name"] for v in opts.variants()]
    for attempt in range(len(variants) * len(opts.phases) + 1):
        outcome = _run_worker(name, opts, work_dir, env, deadline, results, progress,
                              log_path, events_path, attempt)
        record["phases"] = outcome["phases"] or record["phases"]
        record["params"] = outcome["params"] if outcome["params"] is not None else record["params"]
        if outcome["skipped"]:
            record.update(status=outcome["skipped"].get("status", "skipped"), reason=outcome["skipped"]["reason"])
            break
        if outcome["returncode"] == 0:
            break
        why = _death(outcome, log_path)
        pending = outcome["pending"]
        if pending is not None and not outcome["killed"]:
            results[pending] = {"status": "crashed", "error": why}
            continue  # a fresh worker resumes after the pair that killed its predecessor
        # Killed for time, or died outside any pair (building the model, the eager reference):
        # every pair not yet reported shares that fate.
        if not record["phases"]:  # died before the model was built: one row says so
            record.update(status="error", reason=f"while building the model: {why}")
            break
        status = "timeout" if outcome["killed"] else "crashed"
        for ph in record["phases"]:
            for v in variants:
                results.setdefault((v, ph), {"status": status, "error": why})
        break
    record["results"] = [{"variant": v, "phase": ph, **res} for (v, ph), res in results.items()]
    record["log"] = str(log_path)
    record["wall_s"] = time.time() - t0
    return record


def _run_worker(name, opts, work_dir, env, deadline, results, progress, log_path, events_path, attempt) -> dict:
    spec = {
        "model": name, "device": opts.device, "dtype": opts.dtype, "phases": list(opts.phases),
        "variants": opts.variants(), "mode": opts.mode, "train_step": opts.train_step, "optimizer": opts.optimizer, "run": asdict(opts.run), "seed": opts.seed,
        "variant_timeout": opts.variant_timeout, "tf32": opts.tf32,
        "deadline": None if deadline is None else deadline - 5.0,
        "skip": [list(k) for k in results], "events": str(events_path),
    }
    spec_path = work_dir / f"{name}.spec{attempt}.json"
    spec_path.write_text(json.dumps(spec, indent=1))
    outcome = {"phases": [], "params": None, "skipped": None, "pending": None, "killed": False}
    with open(log_path, "a") as log:
        proc = subprocess.Popen([sys.executable, "-m", "bench.worker", str(spec_path)], stdout=log,
                                stderr=subprocess.STDOUT, env=env, cwd=TOOLS_DIR, start_new_session=True)
        offset = events_path.stat().st_size if events_path.exists() else 0
        try:
            while True:
                done = proc.poll() is not None
                offset = _read_events(events_path, offset, outcome, results, progress)
                if done:
                    break
                if deadline is not None and time.time() > deadline + KILL_GRACE_S:
                    _kill(proc)
                    outcome["killed"] = True
                    _read_events(events_path, offset, outcome, results, progress)
                    break
                progress.tick()
                time.sleep(0.2)
        finally:
            if proc.poll() is None:  # Ctrl-C or SIGTERM in the parent: take the worker down too
                _kill(proc)
    outcome["returncode"] = proc.returncode
    return outcome


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the worker and its compile subprocesses
    except ProcessLookupError:
        pass
    proc.wait()


def _read_events(path: Path, offset: int, outcome: dict, results: dict, progress: Progress) -> int:
    if not path.exists():
        return offset
    with open(path, "rb") as f:
        f.seek(offset)
        chunk = f.read()
    complete = chunk[: chunk.rfind(b"\n") + 1]  # a line being written is read next time
    for line in complete.decode().splitlines():
        ev = json.loads(line)
        kind = ev["event"]
        if kind == "model":
            outcome["phases"], outcome["params"] = ev["phases"], ev["params"]
        elif kind == "skipped":
            outcome["skipped"] = ev
        elif kind == "start":
            outcome["pending"] = (ev["variant"], ev["phase"])
        elif kind == "result":
            outcome["pending"] = None
            results[(ev["variant"], ev["phase"])] = {
                k: v for k, v in ev.items() if k not in ("event", "t", "variant", "phase")}
        progress.event(ev)
    return offset + len(complete)


def _death(outcome: dict, log_path: Path) -> str:
    rc = outcome["returncode"]
    if outcome["killed"]:
        how = "killed: past its time limit"
    elif rc is not None and rc < 0:
        how = f"worker died ({signal.Signals(-rc).name})"
    else:
        how = f"worker exited with code {rc}"
    tail = [ln for ln in log_path.read_text(errors="replace").splitlines() if ln.strip()][-1:] if log_path.exists() else []
    return how + (f"; last log line: {tail[0][:200]}" if tail else "")
