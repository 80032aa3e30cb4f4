"""A Triton compile worker (Note [Triton compiled in worker processes], triton_pool.py).

Run as a script, `python triton_pool_worker.py`, never imported: the process imports Triton and
the standard library only (not torch, not the ember_inductor package, whose __init__ imports
torch), and never touches a GPU (CUDA_VISIBLE_DEVICES is empty; the target comes with each job).
It reads jobs from stdin and answers on stdout, one frame each (a 4-byte length, then a
pickle), until stdin closes: the parent's exit ends it.

A job names a kernel's source file and module (as ember's loader wrote and named them), the
arguments of `triton.compile` that the parent's own compile will use (signature, constexprs,
specialization attributes, options: JITFunction.run's binding, computed in the parent), the
target, the cache directory, and the parent's Triton/LLVM/MLIR environment variables. The
answer carries the hash Triton filed the kernel under, which the parent checks against its own.
"""
import os
import sys

if __name__ == "__main__":
    # Run as a script, Python puts this file's folder first on sys.path: its triton.py would
    # hide the triton package.
    _HERE = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]

import importlib.util  # noqa: E402
import pickle  # noqa: E402
import struct  # noqa: E402
import time  # noqa: E402

# the variables that reach Triton's compile; the parent's values are applied to each job
ENV_PREFIXES = ("TRITON_", "MLIR_", "LLVM_", "NVPTX_", "PTXAS_", "DISABLE_PTXAS", "USE_IR_LOC")
ENV_OWN = ("TRITON_CACHE_DIR", "TRITON_INTERPRET")  # the job's cache dir; always compiled


def read_frame(stream):
    head = stream.read(4)
    if len(head) < 4:
        return None
    (n,) = struct.unpack(">I", head)
    body = stream.read(n)
    return pickle.loads(body) if len(body) == n else None


def write_frame(stream, obj) -> None:
    body = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(struct.pack(">I", len(body)) + body)
    stream.flush()


_modules = {}


def _load(path: str, module: str, name: str):
    """The kernel's JITFunction, loaded as ember's loader (triton_runtime.load_module) loads a
    compiled-mode module: same file, same module name, `jit` and `libdevice` bound the same."""
    mod = _modules.get((path, module))
    if mod is None:
        from triton.language.extra import libdevice
        from triton.runtime.jit import JITFunction
        spec = importlib.util.spec_from_file_location(module, path)
        mod = importlib.util.module_from_spec(spec)
        mod.jit = JITFunction
        mod.libdevice = libdevice
        spec.loader.exec_module(mod)
        _modules[(path, module)] = mod
    return getattr(mod, name)


def _apply_env(env: dict) -> None:
    for k in [k for k in os.environ if k.startswith(ENV_PREFIXES) and k not in ENV_OWN]:
        if k not in env:
            del os.environ[k]
    os.environ.update(env)


def compile_job(job: dict) -> dict:
    import triton
    from triton._C.libtriton import get_cache_invalidating_env_vars
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    start = time.perf_counter()
    _apply_env(job["env"])
    os.environ["TRITON_CACHE_DIR"] = job["cache_dir"]
    env_vars = get_cache_invalidating_env_vars()
    if env_vars != job["env_vars"]:
        return {"ok": False, "error": f"environment differs: {env_vars} != {job['env_vars']}"}
    fn = _load(job["path"], job["module"], job["name"])
    signature, constexprs, attrs, options = job["request"]
    kernel = triton.compile(ASTSource(fn, signature, constexprs, attrs), target=GPUTarget(*job["target"]),
                            options=options, _env_vars=env_vars)
    return {"ok": True, "hash": kernel.hash, "seconds": time.perf_counter() - start,
            "torch": "torch" in sys.modules, "pid": os.getpid()}


_WARM_KERNEL = """
@jit
def warm(x, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x + i, tl.sin(tl.load(x + i, mask=i < n)), mask=i < n)
"""


def prewarm(target: tuple) -> None:
    """A process's first compile for a target pays for loading Triton's backend (1.3 s of a
    0.3 s kernel's 1.6 s on a 2-core CPU): paid here, on a throwaway kernel, while the parent
    still works towards its first launch."""
    import shutil
    import tempfile

    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    folder = tempfile.mkdtemp(prefix="ember-triton-warm-")
    try:
        path = os.path.join(folder, "warm.py")
        with open(path, "w") as f:
            f.write("import triton.language as tl\n" + _WARM_KERNEL)
        fn = _load(path, "ember_triton_warm", "warm")
        os.environ["TRITON_CACHE_DIR"] = os.path.join(folder, "cache")
        triton.compile(ASTSource(fn, {"x": "*fp32", "n": "i32", "BLOCK": "constexpr"}, {(2,): 128}),
                       target=GPUTarget(target[0], int(target[1]), int(target[2])))
    finally:
        _modules.clear()
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    inp = sys.stdin.buffer
    # the answers go to the original stdout; anything printed (Triton's dumps) to stderr
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    import triton  # noqa: F401 - before the first job: the pool starts while the parent works
    import triton.compiler  # noqa: F401
    if len(sys.argv) > 1:  # the target: backend,arch,warp_size
        try:
            prewarm(tuple(sys.argv[1].split(",")))
        except Exception:  # noqa: BLE001 - only a head start
            pass
    while True:
        job = read_frame(inp)
        if job is None:
            return
        try:
            answer = compile_job(job)
        except Exception as e:  # noqa: BLE001 - the parent compiles it again and reports the error
            answer = {"ok": False, "error": f"{type(e).__name__}: {e}"[:2000]}
        write_frame(out, answer)


if __name__ == "__main__":
    main()
