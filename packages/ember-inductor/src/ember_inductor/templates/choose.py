"""Choosing between cuBLAS (the extern) and the GEMM template's configurations, per problem.

Note [GEMM choice]
    For each product (with its epilogue) the candidates are: the extern (cuBLAS through ATen)
    followed, when there is an epilogue, by the epilogue as a separate pointwise kernel; and
    each configuration of the template with the epilogue fused. The template's candidates are
    compiled in parallel (Triton's AsyncCompileMode on a thread pool), then each candidate is
    timed on the GPU with `triton.testing.do_bench` (median, a few milliseconds each) on random
    operands with the graph's layouts. The fastest wins; the extern keeps the product where it
    is faster. The choice is cached on disk in `<cache_dir>/templates/gemm_choices.json`, keyed
    by (device name, problem, layouts, epilogue, Triton version), and written atomically (a
    temporary file renamed over the old one, under a lock): a second process benchmarks nothing.
    Under the interpreter (CPU tensors) there is no speed to measure: the template's first
    configuration is used, so CI runs the GPU path's code.
"""
from __future__ import annotations

import json
import logging
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import torch
import triton
from triton.runtime import _async_compile
from triton.runtime._async_compile import AsyncCompileMode
from triton.testing import do_bench, do_bench_cudagraph

from ember_inductor.codegen.triton_launch import THREADED_COMPILE
from ember_inductor.codegen.triton_runtime import triton_cache_dir
from ember_inductor.templates import gemm
from ember_inductor.templates.kernel import GemmCall

log = logging.getLogger("ember_inductor.templates")
_lock = threading.Lock()
_memo: dict[str, dict] = {}   # key -> choice, for this process


def cache_path(cache_dir: str) -> str:
    return os.path.join(os.path.expanduser(cache_dir), "templates", "gemm_choices.json")


def _read(path: str) -> dict:
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def store(cache_dir: str, key: str, choice: dict) -> None:
    path = cache_path(cache_dir)
    with _lock:
        data = _read(path)
        data[key] = choice
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
        with open(tmp, "w") as f:
            json.dump(data, f, indent=1, sort_keys=True)
        os.replace(tmp, path)  # atomic: a reader sees the old file or the new one


def lookup(cache_dir: str, key: str) -> dict | None:
    hit = _memo.get(key)
    if hit is None:
        hit = _read(cache_path(cache_dir)).get(key)
        if hit is not None:
            _memo[key] = hit
    return hit


def choice_key(device: torch.device, problem: gemm.Problem, layouts: list, signature: str) -> str:
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else device.type
    return json.dumps([name, str(problem), layouts, signature, triton.__version__])


def _random_like(shape, strides, dtype, device) -> torch.Tensor:
    t = torch.empty_strided(shape, strides, dtype=dtype, device=device)
    if dtype.is_floating_point:
        t.normal_()
    else:
        t.zero_()
    return t


def choose(make_call, problem: gemm.Problem, extern, inputs: list, key: str, cache_dir: str,
           has_epilogue: bool) -> GemmCall | None:
    """The fastest candidate (Note [GEMM choice]): a GemmCall, or None for the extern.

    make_call(config, pointwise=False) -> GemmCall; extern(a, b) runs the library product;
    inputs: (shape, strides, dtype) of the call's tensor arguments, on the GPU."""
    hit = lookup(cache_dir, key)
    if hit is not None:
        return None if hit["choice"] == "extern" else make_call(gemm.GemmConfig(**hit["config"]))
    device = torch.device("cuda", torch.cuda.current_device())
    args = [_random_like(s, st, dt, device) for s, st, dt in inputs]
    calls = [make_call(c) for c in gemm.configs(problem)]
    _compile_all(calls, args)
    timings: list[tuple[float, str, GemmCall | None]] = []
    t_extern = bench(lambda: extern(args[0], args[1]))
    if has_epilogue:
        product = extern(args[0], args[1])
        separate = make_call(calls[0].config, pointwise=True)
        t_extern += bench(lambda: separate(product, *args[2:]))
    timings.append((t_extern, "extern", None))
    for call in calls:
        try:
            timings.append((bench(lambda: call(*args)), repr(call), call))
        except Exception as e:  # a configuration that does not compile or launch just loses
            log.debug("GEMM template config %s failed: %s", call.config, e)
    best = min(timings, key=lambda t: t[0])
    log.info("GEMM %s: %s", problem, ", ".join(f"{name} {ms * 1e3:.1f} us" for ms, name, _ in timings))
    choice = {"choice": "extern", "timings_ms": {n: ms for ms, n, _ in timings}}
    if best[2] is not None:
        choice.update(choice="template", config=best[2].config.__dict__)
    _memo[key] = choice
    store(cache_dir, key, choice)
    return best[2]


def bench(fn) -> float:
    """GPU milliseconds of `fn`, replayed from a CUDA graph so that host launch costs (which
    differ between ATen, the template and ember's pointwise launcher) do not decide; plain
    event timing where the call cannot be captured. A graph of ~3 ms of calls, replayed ten
    times (median; H100: ~100 ms per timing with the capture): with 10 ms graphs GPT-2's 49
    timings took 7.4 s of its cold first call, with 3 ms graphs 5.0 s."""
    fn()  # compile and warm up outside the capture
    try:
        return do_bench_cudagraph(fn, rep=3, return_mode="median")
    except Exception as e:  # noqa: BLE001
        log.debug("CUDA-graph timing failed (%s); timing launches instead", e)
        torch.cuda.synchronize()
        return do_bench(fn, warmup=2, rep=8, return_mode="median")


def _compile_all(calls: list[GemmCall], args: list) -> None:
    """Compile every candidate at once on a thread pool (Triton's AsyncCompileMode). Worker
    processes that compiled the candidates into Triton's disk cache were tried (H100, 2026-11-24):
    the main process then found every kernel in the cache, but the workers' start (importing
    torch and Triton) and their cold compiles (each builds its own launchers) cost more than
    they saved: GPT-2's candidates 15 s -> 28 s, the MLP's 3.5 s -> 14 s. On CPython 3.11, whose
    `ast` is not thread-safe, nothing is compiled ahead: each candidate compiles when it is timed
    (Note [Triton compiled in worker processes] in codegen/triton_pool.py)."""
    if not THREADED_COMPILE:
        return
    try:
        with triton_cache_dir(calls[0].cache_dir), ThreadPoolExecutor(min(8, len(calls))) as pool, \
                AsyncCompileMode(pool):
            for call in calls:
                tensors, strides, _ = call.operands(args[0], args[1], args[2:])
                p, c = call.problem, call.config
                call.kernel(False).warmup(*tensors, *strides, grid=gemm.grid(p, c),
                                          M=p.m, N=p.n, K=p.k, **c.kwargs())
    except Exception as e:  # each candidate is compiled again (and may fail alone) when timed
        _async_compile.active_mode.set(None)
        log.debug("parallel compile of GEMM candidates failed: %s", e)
