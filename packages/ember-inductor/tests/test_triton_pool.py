"""Note [Triton compiled in worker processes]: kernels compiled for an sm_90 target in worker
processes (no GPU needed: ptxas ships with Triton) land in the cache under the key this process
looks up, so this process's compile of each is a cache hit; a worker that fails, crashes or hangs
leaves the kernel to this process, never a wrong kernel."""
from __future__ import annotations

import os
import sys

import pytest
import torch
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

import ember_prims
from ember_inductor import InductorOptions, compile_graph
from ember_inductor.codegen import triton_pool
from ember_inductor.codegen.triton_launch import THREADED_COMPILE, TritonLauncher, _counting_compiles
from ember_inductor.codegen.triton_runtime import load_module, triton_cache_dir
from ember_inductor.graph_builder import GraphBuilder

P = ember_prims.ops
SM90 = GPUTarget("cuda", 90, 32)


def _launchers(tmp_path) -> list[TritonLauncher]:
    """Several distinct kernels: pointwise, row and column reductions, and a combo kernel (whose
    parts are device functions it calls); the first group's launchers first."""
    found = []
    for combo in (False, True):
        b = GraphBuilder()
        x, y, z = b.input(torch.randn(33, 100)), b.input(torch.randn(100)), b.input(torch.randn(7, 9))
        s = b.call(P.sin.default, x)
        b.output(b.call(P.sum.default, b.call(P.mul.default, s, x), [1]),
                 b.call(P.amax.default, b.call(P.exp.default, s), [0]),
                 b.call(P.cos.default, y), b.call(P.tanh.default, z))
        cg = compile_graph(b.build(), b.examples, InductorOptions(
            cache_dir=str(tmp_path), backend="triton", compile_workers=2, combo_kernels=combo))
        found += {id(v): v for v in cg._fn.__globals__.values() if isinstance(v, TritonLauncher)}.values()
    assert len(found) >= 4 and any(launcher.name.startswith("combo") for launcher in found)
    return found


def _compile_here(requests) -> dict:
    """This process's compile of each request, as JITFunction.run calls triton.compile; the
    cache hits and misses."""
    stats = {}
    with _counting_compiles(stats):
        for r in requests:
            signature, constexprs, attrs, options = r.args
            triton.compile(ASTSource(r.fn, signature, constexprs, attrs), target=SM90, options=options)
    return stats


def _requests(launchers):
    return [triton_pool.compile_request(launcher.kernel(False), *launcher.warmup_args(), SM90)
            for launcher in launchers]


@pytest.mark.slow
def test_workers_compile_what_this_process_looks_up(tmp_path, monkeypatch):
    launchers = _launchers(tmp_path)
    pool = triton_pool.CompilePool(2)
    try:
        with triton_cache_dir(str(tmp_path)):
            requests = _requests(launchers)
            assert not any(r.cached for r in requests)
            group = launchers[0].group  # BuildGroup's own way in, for the first graph
            stats = group.precompile(SM90, pool)
            n = len(group.launchers)
            assert stats == {"kernels": n, "cached": 0, "pool": n, "pool_failed": 0, "worker_torch": 0}
            assert [r.cached for r in _requests(launchers)][:n] == [True] * n
            stats = triton_pool.precompile(_requests(launchers), triton.knobs.cache.dir, 2, pool)
            assert stats["cached"] == n and stats["pool"] == len(launchers) - n and not stats["pool_failed"]
            assert _compile_here(requests) == {"hits": len(launchers), "misses": 0}
            assert len({w.proc.pid for w in pool.workers}) == 2
            # Triton's environment reaches the workers (and its cache key): still every hit
            monkeypatch.setenv("TRITON_DISABLE_LINE_INFO", "1")
            requests = _requests(launchers)
            assert not any(r.cached for r in requests)  # another key: nothing compiled yet
            answers = pool.compile(requests, triton.knobs.cache.dir)
            assert [a["ok"] and a["hash"] == r.key for a, r in zip(answers, requests)] == [True] * len(requests)
            assert not any(a["torch"] for a in answers)  # workers import triton, not torch
            assert _compile_here(requests) == {"hits": len(launchers), "misses": 0}
    finally:
        pool.close()


def test_a_failed_worker_leaves_the_kernel_to_this_process(tmp_path):
    launchers = _launchers(tmp_path)
    with triton_cache_dir(str(tmp_path)):
        requests = _requests(launchers)
        n = len(requests)
        # a worker that dies at once, a worker that does not answer in time, one that cannot start
        for pool in (triton_pool.CompilePool(2, executable="/bin/true"),
                     triton_pool.CompilePool(2, job_timeout=0.01),
                     triton_pool.CompilePool(2, executable=os.path.join(str(tmp_path), "missing"))):
            try:
                stats = triton_pool.precompile(requests, triton.knobs.cache.dir, 2, pool)
            finally:
                pool.close()
            assert stats["pool"] == 0 and stats["pool_failed"] == n
            assert not any(w.alive for w in pool.workers)
        assert triton_pool._pool_error is None  # the process's own pool untouched
        assert _compile_here(requests) == {"hits": 0, "misses": n}


@pytest.mark.slow
def test_a_kernel_that_fails_to_compile_fails_in_this_process(tmp_path):
    source = ("import triton.language as tl\n\n@jit\ndef bad(x, BLOCK: tl.constexpr):\n"
              "    i = tl.arange(0, BLOCK)\n    tl.store(x + i, tl.load(x + i) + undefined_name)\n")
    good = ("import triton.language as tl\n\n@jit\ndef good(x, BLOCK: tl.constexpr):\n"
            "    i = tl.arange(0, BLOCK)\n    tl.store(x + i, tl.load(x + i) * 2)\n")
    fns = [getattr(load_module(s, str(tmp_path), False), name) for s, name in ((source, "bad"), (good, "good"))]
    pool = triton_pool.CompilePool(2)
    try:
        with triton_cache_dir(str(tmp_path)):
            requests = [triton_pool.compile_request(fn, [torch.float32], {"BLOCK": 64}, SM90) for fn in fns]
            answers = pool.compile(requests, triton.knobs.cache.dir)
            assert not answers[0]["ok"] and "undefined_name" in answers[0]["error"]
            assert answers[1]["ok"] and answers[1]["hash"] == requests[1].key
            with pytest.raises(Exception, match="undefined_name"):  # Triton's own error, here
                _compile_here(requests[:1])
    finally:
        pool.close()


def test_no_threaded_triton_compile_on_python_3_11():
    # CPython 3.11's ast is not thread-safe: BuildGroup compiles in this process one by one there
    assert THREADED_COMPILE == (sys.version_info >= (3, 12))


@pytest.mark.gpu
def test_first_launch_compiles_in_workers_then_hits_gpu(tmp_path):
    """On a GPU: the group's warm-up compiles every kernel in the workers; this process's own
    compiles (Triton's ordinary warm-up) are all cache hits, and the results are right."""
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    x, y = torch.randn(301, 517, device="cuda"), torch.randn(517, device="cuda")
    b = GraphBuilder()
    xi, yi = b.input(x), b.input(y)
    s = b.call(P.sin.default, xi)
    b.output(b.call(P.sum.default, b.call(P.mul.default, s, xi), [1]),
             b.call(P.amax.default, b.call(P.exp.default, s), [0]), b.call(P.cos.default, yi))
    cg = compile_graph(b.build(), b.examples, InductorOptions(
        cache_dir=str(tmp_path), backend="triton", compile_workers=4, combo_kernels=False))
    # the build started workers (one per kernel so far, 2, 4, ...): they load Triton meanwhile
    assert sum(w.proc.poll() is None for w in triton_pool._pool.workers) >= 2
    out = cg([x, y])
    torch.cuda.synchronize()
    launchers = [v for v in cg._fn.__globals__.values() if isinstance(v, TritonLauncher)]
    stats = launchers[0].group.stats
    n = len(launchers[0].group.launchers)
    assert stats["pool"] == n and stats["hits"] == n and stats["misses"] == 0, stats
    assert stats["worker_torch"] == 0
    torch.testing.assert_close(out[0], (torch.sin(x) * x).sum(1), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(out[1], torch.exp(torch.sin(x)).amax(0))
    torch.testing.assert_close(out[2], torch.cos(y))
