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

import torch

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


def _load(path: str, symbol: str, nargs: int, nsizes: int = 0):
    with _LOCK:
        lib = _LOADED.get(path)
        if lib is None:
            lib = _LOADED[path] = ctypes.CDLL(path)
    fn = getattr(lib, symbol)
    # buffers, then the size symbols (Note [symbolic sizes in the inductor])
    fn.argtypes = [ctypes.c_void_p] * nargs + [ctypes.c_int64] * nsizes
    fn.restype = None
    return fn


def make_launcher(fn):
    def launch(*args):  # tensors in KernelSpec.args order, then the size symbols' values
        fn(*[t.data_ptr() if isinstance(t, torch.Tensor) else t for t in args])
    launch.c_function = fn  # the wrapper calls this directly with data pointers
    return launch


def prepare_prelude(prelude: str, cmd: list[str], options) -> tuple[str, list[str]]:
    """Write the prelude as a header next to its precompiled form (built once per compiler
    command): units `#include` it, and g++ reads the .gch instead of re-parsing <cmath>. If the
    .gch cannot be built or does not match, g++ reads the header text: same result, slower."""
    key = hashlib.sha256(repr((prelude, cmd)).encode()).hexdigest()[:24]
    folder = os.path.join(options.resolved_cache_dir, "cpp", f"prelude-{key}")
    header = os.path.join(folder, "ember_prelude.h")
    if not os.path.exists(header + ".gch"):
        os.makedirs(folder, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=folder) as tmp:
            src = os.path.join(tmp, "ember_prelude.h")
            with open(src, "w") as f:
                f.write(prelude)
            if not os.path.exists(header):
                os.replace(src, header)
                with open(src, "w") as f:
                    f.write(prelude)
            out = os.path.join(tmp, "ember_prelude.h.gch")
            proc = subprocess.run([*cmd, "-x", "c++-header", src, "-o", out], capture_output=True)
            if proc.returncode == 0:
                os.replace(out, header + ".gch")
    return f'#include "ember_prelude.h"  // prelude {key}', ["-I", folder]


def build_many(prelude: str, bodies: Sequence[str], nargs: Sequence[int], options,
               nsizes: Sequence[int] | None = None) -> list:
    """Kernels (each `extern "C" void kernel(...)`) -> launchers.

    The kernels are spread over up to `options.compile_workers` translation units, compiled in
    parallel: one compiler process per unit, the prelude parsed once per unit.
    """
    cmd = compiler_command(options)
    include, include_flags = prepare_prelude(prelude, cmd, options)
    n_units = max(1, min(options.compile_workers, len(bodies)))
    units = [[] for _ in range(n_units)]
    for i in range(len(bodies)):
        units[i % n_units].append(i)
    texts, symbols = [], {}
    for unit in units:
        parts = [include]
        for j, i in enumerate(unit):
            parts.append(bodies[i].replace('extern "C" void kernel(', f'extern "C" void kernel_{j}(', 1))
            symbols[i] = (len(texts), f"kernel_{j}")
        texts.append("\n".join(parts))
    paths = [library_path(t, options) for t in texts]
    todo = [(t, p) for t, p in zip(texts, paths) if not os.path.exists(p)]
    if todo:
        with ThreadPoolExecutor(len(todo)) as pool:
            for fut in [pool.submit(_compile, t, p, cmd + include_flags) for t, p in todo]:
                fut.result()
    nsizes = nsizes or [0] * len(bodies)
    return [make_launcher(_load(paths[symbols[i][0]], symbols[i][1], nargs[i], nsizes[i]))
            for i in range(len(bodies))]
