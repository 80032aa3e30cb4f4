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
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Sequence

import torch

from ember_inductor.codegen.common import BuildError

log = logging.getLogger("ember_inductor")
_LOADED: dict[str, ctypes.CDLL] = {}
_LOCK = threading.Lock()


def compiler_command(options) -> list[str]:
    compiler = shutil.which(options.cpp_compiler)
    if compiler is None:
        raise BuildError(f"C++ compiler {options.cpp_compiler!r} not found on PATH: install g++ "
                         f"(or clang++) or choose another with options={{'cpp_compiler': ...}}")
    cmd = [compiler, *options.cpp_flags, "-fno-math-errno", "-shared", "-fPIC"]
    return cmd + list(_compiler_workaround(tuple(cmd), options.resolved_cache_dir))


# Note [miscompiling compilers]
#     g++ 12.2 with `-O3 -march=native -fopenmp` on an AVX-512 machine (an AMD EPYC, Zen 4)
#     vectorizes the kernel below (a `#pragma omp simd` loop selecting between two float values by
#     int64 index comparisons: a backward of writes through a transposed and a flat view) into
#     code that writes 0 where the select should give 2: gradients silently wrong, on that
#     machine only. So before the first kernel of a process, this canary is built with the
#     command the kernels would get and run; if its result is wrong, the first of WORKAROUNDS
#     whose build gives the right result is added to every kernel's command (`-mno-avx512f`
#     fixes g++ 12.2, keeping AVX2 vectors), and no working one is an error (the graph then runs
#     eagerly, with ember's one warning). The canary is cached like a kernel (by its text and the
#     command): a later process only loads and runs it.
_CANARY = r"""#include <cstdint>
extern "C" void ember_canary(const float* __restrict__ p0, float* __restrict__ p1) {
  const int64_t tmp1 = ((int64_t)0LL);
  const float tmp3 = p0[0];
  const int64_t tmp5 = ((int64_t)3LL);
  const float tmp7 = 0x0.0p+0f;
  const float tmp10 = 0x1.0000000000000p+1f;
  for (int64_t x0 = 0; x0 < 3; x0++) {
    #pragma omp simd
    for (int64_t x1 = 0; x1 < 5; x1++) {
      const bool tmp2 = (((int64_t)x0) == tmp1);
      const bool tmp6 = (((int64_t)(3*x1)) == tmp5);
      const float tmp11 = ((tmp3 + (tmp6 ? tmp3 : tmp7)) * tmp10);
      const bool tmp13 = (((int64_t)((3*x1) + x0)) == tmp5);
      const float tmp16 = ((tmp3 + (tmp13 ? tmp3 : tmp7)) * tmp10);
      p1[((5*x0) + x1)] = (tmp2 ? tmp11 : tmp16);
    }
  }
}
"""
WORKAROUNDS = (("-mno-avx512f",), ("-fno-tree-loop-if-convert",), ("-O1",))
_CHECKED: dict[tuple, tuple] = {}


def canary_passes(cmd: Sequence[str], cache_dir: str) -> bool:
    """Whether the canary of Note [miscompiling compilers], built with `cmd`, computes right."""
    path = os.path.join(cache_dir, "cpp", "canary",
                        hashlib.sha256(repr((_CANARY, tuple(cmd))).encode()).hexdigest()[:32] + ".so")
    _compile(_CANARY, path, list(cmd))
    fn = ctypes.CDLL(path).ember_canary
    fn.argtypes, fn.restype = [ctypes.c_void_p, ctypes.c_void_p], None
    one, out = torch.ones(1), torch.zeros(3, 5)
    fn(one.data_ptr(), out.data_ptr())
    expected = torch.full((3, 5), 2.0)
    expected[0, 1] = 4.0
    return bool(torch.equal(out, expected))


def _compiler_workaround(cmd: tuple, cache_dir: str) -> tuple:
    """The flags Note [miscompiling compilers] adds to `cmd` (usually none), once per process."""
    with _LOCK:
        found = _CHECKED.get(cmd)
        if found is None:
            found = _CHECKED[cmd] = _choose_workaround(cmd, cache_dir)
    return found


def _choose_workaround(cmd: tuple, cache_dir: str) -> tuple:
    if canary_passes(cmd, cache_dir):
        return ()
    for flags in WORKAROUNDS:
        if canary_passes(cmd + flags, cache_dir):
            log.info("ember_inductor: %s miscompiles a vectorized select on this machine; C++ kernels "
                     "are built with %s (Note [miscompiling compilers])", cmd[0], " ".join(flags))
            return flags
    raise BuildError(f"the C++ compiler ({' '.join(cmd)}) computes a vectorized select wrongly on this "
                     f"machine, also with {', '.join(' '.join(f) for f in WORKAROUNDS)}: choose another "
                     f"with options={{'cpp_compiler': ...}} or other 'cpp_flags'")


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
