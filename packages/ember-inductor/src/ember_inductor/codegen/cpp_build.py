"""Build C++ kernels into shared libraries, cached on disk by source hash, loaded with ctypes.

The cache key is the source text plus the compiler command (options.cache_key()), so a second
process (or a second compile of the same graph) loads the .so and compiles nothing. Misses are
compiled in parallel (the compiler runs in subprocesses; threads only wait). A library is written
under a temporary name and renamed into place, so concurrent processes never see a partial file.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Sequence

from ember_inductor.codegen.common import BuildError

_LOADED: dict[str, ctypes.CDLL] = {}
_LOCK = threading.Lock()


def compiler_command(options) -> list[str]:
    compiler = shutil.which(options.cpp_compiler)
    if compiler is None:
        raise BuildError(f"C++ compiler {options.cpp_compiler!r} not found on PATH: install g++ "
                         f"(or clang++) or choose another with options={{'cpp_compiler': ...}}")
    return [compiler, *options.cpp_flags, "-fno-math-errno", "-shared", "-fPIC"]


def library_path(source: str, options) -> str:
    key = hashlib.sha256(repr((source, options.cache_key())).encode()).hexdigest()[:32]
    return os.path.join(options.resolved_cache_dir, "cpp", key[:2], f"k{key}.so")


def _compile(source: str, path: str, cmd: list[str]) -> None:
    if os.path.exists(path):
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with tempfile.TemporaryDirectory(dir=os.path.dirname(path)) as tmp:
        src = os.path.join(tmp, "kernel.cpp")
        out = os.path.join(tmp, "kernel.so")
        with open(src, "w") as f:
            f.write(source)
        proc = subprocess.run([*cmd, src, "-o", out, "-lmvec", "-lm"], capture_output=True, text=True)
        if proc.returncode != 0:
            raise BuildError(f"C++ kernel failed to compile ({' '.join(cmd)}):\n{proc.stderr[-4000:]}\n"
                             f"--- source ---\n{source[-3000:]}")
        os.replace(out, path)


def _load(path: str, nargs: int):
    with _LOCK:
        lib = _LOADED.get(path)
        if lib is None:
            lib = _LOADED[path] = ctypes.CDLL(path)
    fn = lib.kernel
    fn.argtypes = [ctypes.c_void_p] * nargs
    fn.restype = None
    return fn


def make_launcher(fn):
    def launch(*tensors):
        fn(*[t.data_ptr() for t in tensors])
    launch.c_function = fn  # the wrapper calls this directly with data pointers
    return launch


def build_many(sources: Sequence[str], nargs: Sequence[int], options) -> list:
    cmd = compiler_command(options)
    paths = [library_path(s, options) for s in sources]
    todo = {p: s for p, s in zip(paths, sources) if not os.path.exists(p)}
    if todo:
        workers = max(1, min(options.compile_workers, len(todo)))
        with ThreadPoolExecutor(workers) as pool:
            for fut in [pool.submit(_compile, s, p, cmd) for p, s in todo.items()]:
                fut.result()
    return [make_launcher(_load(p, n)) for p, n in zip(paths, nargs)]
