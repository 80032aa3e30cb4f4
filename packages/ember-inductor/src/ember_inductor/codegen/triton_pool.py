"""Triton kernels compiled ahead in worker processes, into Triton's on-disk cache.

Note [Triton compiled in worker processes]: Triton's front end (Python AST -> TTIR) holds the
GIL, so a graph's kernels compiled on threads barely overlap (densenet121: ~15 s of its cold
first call on a 16-core H200 host), and CPython 3.11's `ast` is not even thread-safe ("AST
constructor recursion depth mismatch" when two threads parse). So at a graph's first GPU launch
(BuildGroup.warm) every kernel not yet in the cache is compiled by a pool of worker processes
(`triton_pool_worker.py`: Triton and the standard library only, no torch, no CUDA), into the
cache directory the main process uses; the main process's ordinary compile of each kernel is
then a cache hit (milliseconds). That holds only if the worker compiles exactly what the main
process will ask for, so nothing is assumed:

  * the request is computed here, in the main process, by the binding JITFunction.run does at a
    warm-up (`compile_request`: Triton's own binder and `_pack_args`, the same mock arguments
    and launch kwargs, the GPU's target from the main process's driver);
  * the worker loads the same source file under the same module name, with the main process's
    Triton/LLVM/MLIR environment variables, and compiles with `_env_vars` equal to ours;
  * each answer carries the hash Triton filed the kernel under, checked against the hash
    computed here (`Request.key`); BuildGroup counts the hits and misses of the main process's
    compiles that follow (`BuildGroup.stats`).

A worker that fails, crashes or runs past `JOB_TIMEOUT` costs nothing but time: its kernel is
compiled by the main process as before, and a compile error is raised there, with Triton's
message. The pool starts lazily (on the first GPU build that has something to compile), lives as
long as the process, grows to `compile_workers` workers, and is shut down at exit (a worker also
ends when its stdin closes). Workers are plain subprocesses of `sys.executable` running the
worker script, not multiprocessing's spawn: that one re-imports the user's `__main__` (a
training script without a main guard would run again) and, with it, torch.
"""
from __future__ import annotations

import atexit
import contextlib
import dataclasses
import hashlib
import logging
import os
import pickle
import queue
import select
import subprocess
import sys
import threading
import time

import triton
from triton._C.libtriton import get_cache_invalidating_env_vars
from triton.compiler import ASTSource, make_backend
from triton.runtime.cache import get_cache_key, get_cache_manager
from triton.runtime.jit import MockTensor, create_function_from_signature

from ember_inductor.codegen import triton_pool_worker as _protocol

log = logging.getLogger("ember_inductor.triton")

WORKER_SCRIPT = os.path.abspath(_protocol.__file__)
JOB_TIMEOUT = 180.0   # seconds for one kernel in a worker (its start included) before it is killed
MAX_CRASHES = 3       # workers lost (crash, timeout) before the process stops using the pool


@dataclasses.dataclass
class Request:
    """One kernel's `triton.compile` as the main process will call it: `args` = (signature,
    constexprs, attrs, options dict), `key` the hash of Triton's cache key for it."""
    fn: object
    args: tuple
    target: tuple
    key: str
    cached: bool


def compile_request(fn, args, kwargs, target) -> Request:
    """JITFunction.run's binding for `fn.warmup(*args, **kwargs)` (Triton 3.6) on `target`, and
    triton.compile's cache key for the result (the main process compiles nothing here)."""
    kwargs = dict(kwargs)
    kwargs["debug"] = kwargs.get("debug", fn.debug) or triton.knobs.runtime.debug
    kwargs["instrumentation_mode"] = triton.knobs.compilation.instrumentation_mode
    backend = make_backend(target)
    binder = create_function_from_signature(fn.signature, fn.params, backend)
    bound, specialization, options = binder(*map(MockTensor.wrap_dtype, args), **kwargs)
    options, signature, constexprs, attrs = fn._pack_args(backend, kwargs, bound, specialization, options)
    src = ASTSource(fn, signature, constexprs, attrs)
    # triton.compile's key: the options re-parsed with the source's own, the environment's variables
    parsed = backend.parse_options(dict(options.__dict__, **src.parse_options()))
    key = get_cache_key(src, backend, parsed, env_vars=get_cache_invalidating_env_vars())
    key = hashlib.sha256(key.encode("utf-8")).hexdigest()
    cached = get_cache_manager(key).get_group(f"{src.name[:150]}.json") is not None
    return Request(fn, (signature, constexprs, attrs, dict(options.__dict__)),
                   (target.backend, target.arch, target.warp_size), key, cached)


def _job(request: Request, cache_dir: str, env: dict, env_vars: dict) -> dict:
    fn = request.fn
    return {"path": fn.fn.__code__.co_filename, "module": fn.fn.__module__, "name": fn.fn.__name__,
            "request": request.args, "target": request.target, "cache_dir": cache_dir,
            "env": env, "env_vars": env_vars}


def _compile_env() -> dict:
    return {k: v for k, v in os.environ.items()
            if k.startswith(_protocol.ENV_PREFIXES) and k not in _protocol.ENV_OWN}


class _Worker:
    """One worker process and its pipes; `call` answers a job, or None when the worker failed
    to answer in time or died (it is then killed)."""

    def __init__(self, executable: str, target: tuple | None):
        env = {k: v for k, v in os.environ.items() if k not in _protocol.ENV_OWN}
        env["CUDA_VISIBLE_DEVICES"] = ""  # a worker never makes a CUDA context
        warm = [",".join(map(str, target))] if target else []
        self.proc = subprocess.Popen([executable, WORKER_SCRIPT, *warm], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, env=env, close_fds=True)
        self.alive = True

    def call(self, job: dict, timeout: float):
        try:
            _protocol.write_frame(self.proc.stdin, job)
            answer = self._read(timeout)
        except Exception:  # noqa: BLE001 - a broken pipe, a frame that does not unpickle
            answer = None
        if answer is None:
            self.kill()
        return answer

    def _read(self, timeout: float):
        fd, data, deadline, need = self.proc.stdout.fileno(), b"", time.monotonic() + timeout, 4
        while len(data) < need:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None  # timed out
            chunk = os.read(fd, max(need - len(data), 1 << 16))
            if not chunk:
                return None  # the worker died
            data += chunk
            if need == 4 and len(data) >= 4:
                need = 4 + int.from_bytes(data[:4], "big")
        return pickle.loads(data[4:need])

    def kill(self) -> None:
        self.alive = False
        try:
            self.proc.kill()
            self.proc.wait(5)
        except Exception:  # noqa: BLE001 - already gone
            pass

    def close(self, wait: float = 2.0) -> None:
        try:
            self.proc.stdin.close()  # the worker ends at the end of its input
            self.proc.wait(wait)
        except Exception:  # noqa: BLE001 - it did not end in time
            self.kill()
        for pipe in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(OSError):
                pipe.close()


class CompilePool:
    """Worker processes that compile Triton kernels into the on-disk cache (see the Note)."""

    def __init__(self, size: int, executable: str | None = None, job_timeout: float = JOB_TIMEOUT):
        self.size = max(1, size)
        self.executable = executable or sys.executable
        self.job_timeout = job_timeout
        self.workers: list[_Worker] = []
        self.crashes = 0
        self.pid = os.getpid()
        self.target: tuple | None = None  # the target the workers warm up for (the last one asked)
        self._lock = threading.Lock()

    def start(self, target: tuple | None = None, n: int | None = None) -> None:
        """Start workers up to `n` (default: the pool's size) without waiting for them; they
        warm up for `target` while the caller goes on. Raises OSError if one cannot start."""
        with self._lock:
            self._start(target, self.size if n is None else min(n, self.size))

    def _start(self, target, n: int) -> None:
        self.target = target or self.target
        self.workers = [w for w in self.workers if w.alive and w.proc.poll() is None]
        while len(self.workers) < n:
            self.workers.append(_Worker(self.executable, self.target))

    @property
    def broken(self) -> bool:
        return self.crashes >= MAX_CRASHES

    def compile(self, requests: list[Request], cache_dir: str) -> list[dict | None]:
        """Compile each request in a worker; the answers in order (None: the worker failed or
        died: the main process compiles that kernel). Raises OSError if no worker can start."""
        if not requests:
            return []
        env, env_vars = _compile_env(), get_cache_invalidating_env_vars()
        jobs = [_job(r, cache_dir, env, env_vars) for r in requests]
        with self._lock:
            self._start(requests[0].target, min(self.size, len(jobs)))
            answers: list[dict | None] = [None] * len(jobs)
            # the longest sources first: a long compile started last would finish alone
            todo: queue.SimpleQueue = queue.SimpleQueue()
            for i in sorted(range(len(jobs)), key=lambda i: -len(requests[i].fn.src)):
                todo.put(i)

            def serve(worker: _Worker) -> None:
                while worker.alive:
                    try:
                        i = todo.get_nowait()
                    except queue.Empty:
                        return
                    answers[i] = worker.call(jobs[i], self.job_timeout)
                    if answers[i] is None:
                        self.crashes += 1
                        log.info("a Triton compile worker failed (kernel %s); the main process compiles it",
                                 jobs[i]["name"])

            threads = [threading.Thread(target=serve, args=(w,), daemon=True) for w in self.workers]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            return answers

    def close(self) -> None:
        """End the workers: each ends at the end of its input (after the job it runs, if any)."""
        for w in self.workers:
            with contextlib.suppress(OSError):
                w.proc.stdin.close()
        deadline = time.monotonic() + 2.0  # then those still compiling are killed
        for w in self.workers:
            w.close(max(0.0, deadline - time.monotonic()))
        self.workers = []


_pool: CompilePool | None = None
_pool_error: str | None = None   # why this process does not use a pool


def get_pool(size: int) -> CompilePool | None:
    """The process's pool, grown to `size` workers; None once it could not start or lost
    MAX_CRASHES workers (the caller then compiles on threads)."""
    global _pool
    if _pool_error is not None or (_pool is not None and _pool.broken):
        return None
    if _pool is None or _pool.pid != os.getpid():  # a forked child makes its own
        _pool = CompilePool(size)
        atexit.register(_pool.close)
    _pool.size = max(_pool.size, size)
    return _pool


def prestart(workers: int, n: int, target) -> None:
    """Start `n` of the process's pool of `workers` ahead of their first use (a GPU graph of at
    least `n` kernels is being built: its first launch compiles them); never raises."""
    global _pool_error
    pool = get_pool(workers)
    if pool is None:
        return
    try:
        pool.start((target.backend, target.arch, target.warp_size), n)
    except OSError as e:
        _pool_error = f"Triton's compile worker could not start: {e}"


def precompile(requests: list[Request], cache_dir: str, workers: int, pool: CompilePool | None = None) -> dict:
    """Compile in the pool (default: the process's) each request not already in the cache; never
    raises (the main process's compile that follows does whatever is left). Returns counts for
    BuildGroup.stats: `cached` (found on disk), `pool` (compiled under the expected key),
    `pool_failed`, and `worker_torch` (workers that had imported torch: none should)."""
    global _pool_error
    todo = [r for r in requests if not r.cached]
    stats = {"kernels": len(requests), "cached": len(requests) - len(todo), "pool": 0, "pool_failed": 0,
             "worker_torch": 0}
    own = pool is None
    pool = get_pool(workers) if own and len(todo) >= 2 else pool
    if pool is None or not todo:
        return stats
    try:
        answers = pool.compile(todo, cache_dir)
    except OSError as e:  # no worker could start: threads from now on
        if own:
            _pool_error = f"Triton's compile worker could not start: {e}"
        log.info("Triton's compile workers could not start (%s); compiling in this process", e)
        return dict(stats, pool_failed=len(todo))
    for r, a in zip(todo, answers):
        stats["worker_torch"] += bool(a and a.get("torch"))
        if a is not None and a.get("ok") and a.get("hash") == r.key:
            stats["pool"] += 1
            continue
        stats["pool_failed"] += 1
        if a is not None and a.get("ok"):  # compiled, but not what this process will look up
            log.warning("ember: a Triton compile worker filed kernel %s under another cache key; "
                        "the main process compiles it (please report)", r.fn.fn.__name__)
        elif a is not None:
            log.debug("Triton compile worker: %s: %s", r.fn.fn.__name__, a.get("error"))
    return stats
