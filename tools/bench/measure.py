"""How one call is timed, how peak memory is read, and how outputs are compared with eager.

Timing (per call, then the median):
- CUDA: `torch.cuda.synchronize()`, then a CUDA event before and after the call and
  `end.synchronize()`. The GPU is idle when the start event is recorded, so the interval covers
  the host's launch overhead as well as the kernels: a launch-bound workload is not flattered.
- CPU: `time.perf_counter()` around the call.

Peak memory is measured on separate calls after the timed ones, so the sampler never perturbs a
timing:
- CUDA: `torch.cuda.max_memory_allocated()` after `reset_peak_memory_stats()`: the absolute peak
  of the caching allocator, weights and inputs included.
- CPU: peak resident set size *above the baseline* just before those calls, sampled every
  millisecond from /proc/self/statm by a thread (no tracemalloc: torch's CPU allocations do not go
  through Python's allocator). For the RSS to follow the live working set, glibc's free memory is
  returned first (`malloc_trim`) and, during those calls only, every allocation of 64 KiB or more
  is its own mmap (`mallopt(M_MMAP_THRESHOLD)`), unmapped on free. For the timed calls the worker
  fixes glibc's thresholds at what its dynamic policy converges to (32 MiB mmap, 64 MiB trim), so
  that every variant is timed under the same allocator behaviour.
"""
from __future__ import annotations

import ctypes
import math
import os
import statistics
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

import torch

# Largest accepted max-relative-error against eager, per dtype: outputs / gradients after a step.
# Gradients go through twice as many kernels (and reductions reordered by fusion), hence 10x.
TOLERANCE = {
    torch.float32: 1e-3,
    torch.float64: 1e-7,
    torch.bfloat16: 3e-2,
    torch.float16: 1e-2,
}
GRAD_TOLERANCE_FACTOR = 10.0


@dataclass(frozen=True)
class RunConfig:
    """How many calls: `warmup`, then between `min_reps` and `max_reps` timed calls, aiming at
    `target_s` seconds in all; `pool` distinct input batches are cycled through."""

    warmup: int = 5
    min_reps: int = 10
    max_reps: int = 200
    target_s: float = 3.0
    pool: int = 4
    memory_calls: int = 2

    @classmethod
    def quick(cls) -> "RunConfig":
        return cls(warmup=2, min_reps=3, max_reps=30, target_s=0.5, pool=2, memory_calls=1)


class Timer:
    def __init__(self, device: torch.device):
        self.device = device
        self.cuda = device.type == "cuda"

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()

    def wall(self, thunk: Callable[[], Any]) -> tuple[float, Any]:
        """Seconds for one call including its host-side work (used for the compiling first call)."""
        self.sync()
        t0 = time.perf_counter()
        out = thunk()
        self.sync()
        return time.perf_counter() - t0, out

    def call(self, thunk: Callable[[], Any]) -> float:
        """Seconds for one steady-state call."""
        if not self.cuda:
            t0 = time.perf_counter()
            thunk()
            return time.perf_counter() - t0
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        thunk()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3


@dataclass(frozen=True)
class Timing:
    median_s: float
    min_s: float
    reps: int
    baseline_median_s: float | None = None  # eager, timed alternately with the variant


def time_calls(timer: Timer, step: Callable[[int], Any], cfg: RunConfig, start: int = 0,
               baseline: Callable[[int], Any] | None = None) -> Timing:
    """Warm up, then time calls `step(i)` (i picks the input batch) and report the median.

    With `baseline` (eager), its calls alternate with the variant's, one each, so both see the
    same machine: on a shared, loaded CPU the speed drifts over seconds, and a speedup computed
    from two medians taken a minute apart measures the drift. The reps are chosen from the
    variant's warm-up time, over `target_s` for the variant and its baseline together.
    """
    def warm(fn):
        return [timer.call(lambda i=i: fn(i)) for i in range(start, start + cfg.warmup)]

    estimate = statistics.median(warm(step) or [0.0])
    if baseline is not None:
        estimate += statistics.median(warm(baseline) or [0.0])
    reps = cfg.max_reps if estimate <= 0 else int(cfg.target_s / estimate)
    reps = max(cfg.min_reps, min(cfg.max_reps, reps))
    first = start + cfg.warmup
    times, base_times = [], []
    for i in range(first, first + reps):
        times.append(timer.call(lambda i=i: step(i)))
        if baseline is not None:
            base_times.append(timer.call(lambda i=i: baseline(i)))
    return Timing(statistics.median(times), min(times), reps,
                  statistics.median(base_times) if base_times else None)


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class _RssSampler:
    def __init__(self, period_s: float = 1e-3):
        self.period_s = period_s
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, _rss_bytes())
            time.sleep(self.period_s)

    def __enter__(self):
        self.peak = _rss_bytes()
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, _rss_bytes())


M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
STEADY_MMAP_THRESHOLD, STEADY_TRIM_THRESHOLD, MEASURE_MMAP_THRESHOLD = 32 << 20, 64 << 20, 64 << 10


def _libc():
    try:
        libc = ctypes.CDLL("libc.so.6")
        return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None
    except OSError:
        return None


def steady_malloc() -> None:
    """Fix glibc's mmap/trim thresholds (see the module docstring); a no-op without glibc."""
    libc = _libc()
    if libc is not None:
        libc.mallopt(M_MMAP_THRESHOLD, STEADY_MMAP_THRESHOLD)
        libc.mallopt(M_TRIM_THRESHOLD, STEADY_TRIM_THRESHOLD)


def peak_memory_mb(device: torch.device, run: Callable[[], Any]) -> float | None:
    """Peak memory while `run()` executes, in MiB (see the module docstring for what it means)."""
    return peak_memory(device, run)[0]


def peak_memory(device: torch.device, run: Callable[[], Any]) -> tuple[float | None, float | None]:
    """(peak allocated, peak reserved) MiB while `run()` executes; reserved only on CUDA.

    Reserved memory is what the caching allocator holds from the driver, CUDA-graph pools
    included: it counts the same things for every variant, while torch.compile's CUDA-graph
    outputs live in its pools outside the *allocated* count. Blocks cached but unused before
    the calls are returned first (`empty_cache`), so the figure is the variant's own."""
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        run()
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated() / 2**20, torch.cuda.max_memory_reserved() / 2**20
    if not os.path.exists("/proc/self/statm"):
        return None, None
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)
        libc.mallopt(M_MMAP_THRESHOLD, MEASURE_MMAP_THRESHOLD)
    try:
        base = _rss_bytes()
        with _RssSampler() as sampler:
            run()
    finally:
        if libc is not None:
            libc.mallopt(M_MMAP_THRESHOLD, STEADY_MMAP_THRESHOLD)
    return max(0, sampler.peak - base) / 2**20, None


# --------------------------------------------------------------------------- comparison

def tensors_of(value: Any) -> list[torch.Tensor]:
    """The tensors inside an output, in a stable order (tuples, lists, dicts, HF ModelOutputs)."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):
        return [t for k in value for t in tensors_of(value[k])]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in tensors_of(v)]
    return []


def detach_cpu(value: Any) -> list[torch.Tensor]:
    return [t.detach().to("cpu", copy=True) for t in tensors_of(value)]


def rel_error(g: torch.Tensor, r: torch.Tensor) -> float:
    """max|g - r| / max|r|: a per-tensor, scale-aware relative error (an elementwise ratio would
    blow up wherever the reference crosses zero)."""
    if g.shape != r.shape:
        return math.inf
    wide = torch.float64 if torch.float64 in (g.dtype, r.dtype) else torch.float32
    g, r = g.detach().cpu().to(wide), r.detach().cpu().to(wide)
    if g.numel() == 0:
        return 0.0
    if not torch.equal(g.isnan(), r.isnan()):
        return math.inf
    diff = (g - r).abs().nan_to_num(0.0).max().item()
    scale = r.abs().nan_to_num(0.0).max().item()
    return diff / scale if scale > 0 else diff


def max_rel_error(got: list[torch.Tensor], ref: list[torch.Tensor]) -> float:
    """The worst `rel_error` over a list of tensors."""
    if len(got) != len(ref):
        return math.inf
    return max((rel_error(g, r) for g, r in zip(got, ref)), default=0.0)


def no_worse_than_eager(got: list[torch.Tensor], ref: list[torch.Tensor], ref64: list[torch.Tensor],
                        tol: float) -> bool:
    """Accept each tensor within `tol` of eager, or else no less accurate than eager itself,
    measured against a float64 run: rel_error(got, ref64) <= max(tol, 2 * rel_error(ref, ref64)).

    Note: eager float32 is not the truth. Batch-norm backward in eager float32 differs from float64
    by 2e-2 on small_resnet_b16 while torch.compile's is within 1e-4 of it (measured); without
    this check the better result would be flagged as a mismatch.
    """
    if not (len(got) == len(ref) == len(ref64)):
        return False
    for g, r, r64 in zip(got, ref, ref64):
        if rel_error(g, r) <= tol:
            continue
        if rel_error(g, r64) > max(tol, 2 * rel_error(r, r64)):
            return False
    return True


def tolerance(dtype: torch.dtype, grads: bool = False) -> float:
    tol = TOLERANCE.get(dtype, 1e-3)
    return tol * GRAD_TOLERANCE_FACTOR if grads else tol
