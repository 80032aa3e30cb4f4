"""Native guard checks: a small C++ extension that checks many tensors, or many modules' hook
dicts, in one call; built in the background, with the Python checks until it is ready.

Note [Native guards]: a model's cache hit checks each parameter and buffer (type, dtype,
device, sizes, strides, requires_grad: six getters of torch's C tensor, ~540 ns in generated
Python) and each module's hook dicts. `Guards.lines` gathers these checks, where they are
exact, into two batches per entry (`TensorBatch`, `HookBatch`), each called once with a tuple
of the guards' locals. A batch starts with a generated Python function holding the same
checks as before; once `native_guards.cpp` is built and loaded, the batch calls it instead
(~20 ns a tensor). The C++ answers True only where the Python checks would: the tensor's type
is exactly the traced one (`torch.Tensor` or `Parameter` only: a subclass may answer `.shape`
in Python), strided, and its dtype, device, sizes, strides and requires_grad equal the record;
a module's hook dicts are empty dicts in its instance `__dict__`, its class defines none of
those names and keeps object's `__getattribute__` (so `X._forward_hooks` reads that dict).
A hook batch that the C++ cannot show hook-free asks the Python checks, which decide. On
Python 3.12+ a passing hook batch is armed (Note [Hook witness] in native_guards.cpp): dict
watchers on the modules' instance dicts and hook dicts, and type watchers on their classes,
bump an epoch on any change that could add a hook, and while the epoch and the module objects
(with their dicts and classes) are those armed, the batch passes without reading a hook dict.
The extension also checks many tensors' addresses in one call for ember's CUDA graph runner
(`address_check`, Note [Native address check] in native_guards.cpp).

The build (`c++` against torch's headers, ~20 s) runs in a daemon thread, never on a call's
path; the library is cached on disk by a hash of the source, torch's version, Python's and
the compiler's, so that only the first process on a machine builds it (a lock file keeps a
second process from building it at the same time; a process that dies releases it). A build
or load failure means the Python checks for the rest of the process, with one debug log line
(logger `ember_capture.native`).
"""
from __future__ import annotations

import array
import contextlib
import functools
import hashlib
import importlib.util
import logging
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading

import torch

try:
    import fcntl  # POSIX: the build's lock
except ImportError:  # elsewhere: the Python checks
    fcntl = None

_LOG = logging.getLogger("ember_capture.native")
_SOURCE = os.path.join(os.path.dirname(__file__), "native_guards.cpp")
_BUILD_TIMEOUT_S = 600


class _State:
    module = None  # the loaded extension
    failed = False  # a build or load failed: Python checks for good
    forced_python = False  # tests: new batches keep their Python checks
    thread: threading.Thread | None = None
    # EMBER_CACHE_DIR (the compile caches' folder) when set, else the user's cache
    cache_dir = os.path.join(os.environ.get("EMBER_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache",
                                                                             "ember"), "guards")
    lock = threading.Lock()


_STATE = _State()


def extension():
    """The loaded extension, or None (still building, failed, or not started); starts it."""
    if _STATE.module is None and not _STATE.failed:
        start()
    return _STATE.module


def start(cache_dir: str | None = None) -> None:
    """Load the cached extension now, or build it in a daemon thread (once per process)."""
    with _STATE.lock:
        if _STATE.module is not None or _STATE.failed or _STATE.thread is not None:
            return
        if cache_dir is not None:
            _STATE.cache_dir = cache_dir
        _STATE.thread = threading.Thread(target=_build_and_load, name="ember-native-guards", daemon=True)
        _STATE.thread.start()


def wait(timeout: float = 300.0) -> bool:
    """Block until the extension is loaded or has failed (for tests and benchmarks)."""
    start()
    thread = _STATE.thread
    if thread is not None:
        thread.join(timeout)
    return _STATE.module is not None


def loaded() -> bool:
    """Whether the extension is loaded and in use (a cheap test for a call's path)."""
    return _STATE.module is not None and not _STATE.forced_python


def address_check(indices, ptrs):
    """`check(tensors) -> bool`: `tensors[indices[k]].data_ptr() == ptrs[k]` for every k, in one
    C call (Note [Native address check] in native_guards.cpp); None when the extension is not
    loaded (yet, or here at all): the caller checks in Python."""
    ext = None if _STATE.forced_python else extension()
    if ext is None:
        return None
    idx = array.array("q", indices)
    addresses = array.array("q", (p - (1 << 64) if p >= 1 << 63 else p for p in ptrs))  # as C's int64
    if len(idx) != len(addresses):
        raise ValueError("address_check: one address per index")
    return functools.partial(ext.same_addresses, idx.tobytes(), addresses.tobytes())


@contextlib.contextmanager
def python_checks():
    """Batches made (and first called) inside this block keep the Python checks."""
    before, _STATE.forced_python = _STATE.forced_python, True
    try:
        yield
    finally:
        _STATE.forced_python = before


def _build_and_load() -> None:
    try:
        path = _cached_library()
        spec = importlib.util.spec_from_file_location("ember_guards", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _STATE.module = module
    except Exception as exc:  # any failure: Python checks for good
        _STATE.failed = True
        _LOG.debug("ember: native guard checks unavailable, using Python checks: %s: %s",
                   type(exc).__name__, str(exc)[:500])


def _compiler() -> str:
    cxx = shutil.which("c++") or shutil.which("g++")
    if cxx is None:
        raise RuntimeError("no C++ compiler (c++ or g++) on PATH")
    return cxx


def _command(cxx: str, out: str) -> list[str]:
    from torch.utils import cpp_extension  # only where a build is needed

    abi = int(torch._C._GLIBCXX_USE_CXX11_ABI)
    includes = cpp_extension.include_paths() + [sysconfig.get_paths()["include"]]
    libs = cpp_extension.library_paths()
    return ([cxx, "-O2", "-shared", "-fPIC", "-std=c++17", "-w", f"-D_GLIBCXX_USE_CXX11_ABI={abi}"]
            + [f"-I{p}" for p in includes] + [_SOURCE, "-o", out] + [f"-L{p}" for p in libs]
            + [f"-Wl,-rpath,{p}" for p in libs] + ["-ltorch_python", "-ltorch", "-ltorch_cpu", "-lc10"])


def _cached_library() -> str:
    """The path of the built library for this source, torch, Python and compiler; built here
    if no process has built it yet."""
    if fcntl is None:
        raise RuntimeError("no fcntl (not a POSIX system)")
    cxx = _compiler()
    version = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=60).stdout
    parts = []
    for file in (_SOURCE, __file__):  # this file holds the build's flags
        with open(file, "rb") as f:
            parts.append(f.read())
    parts += [s.encode() for s in (torch.__version__, str(torch.version.git_version), torch.__file__, sys.version,
                                    version)]
    key = hashlib.sha256(b"\0".join(parts)).hexdigest()[:24]
    os.makedirs(_STATE.cache_dir, exist_ok=True)
    path = os.path.join(_STATE.cache_dir, f"ember_guards_{key}{sysconfig.get_config_var('EXT_SUFFIX')}")
    if not os.path.exists(path):
        with open(path + ".lock", "w") as lock:  # released by the kernel if this process dies
            fcntl.flock(lock, fcntl.LOCK_EX)  # another process building it: wait for its library
            if not os.path.exists(path):
                _build(cxx, path, lock)
    return path


def _build(cxx: str, path: str, lock) -> None:
    """Compile into a temporary file and rename it into place, in a shell of its own session
    that also holds the lock: a process that exits mid-build (a short script, a test) leaves
    the build to finish for the next process instead of a stale half."""
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".so.tmp")
    os.close(fd)
    log = path + ".log"
    script = (f"{shlex.join(_command(cxx, tmp))} > {shlex.quote(log)} 2>&1 "
              f"&& mv -f {shlex.quote(tmp)} {shlex.quote(path)} || {{ rm -f {shlex.quote(tmp)}; exit 1; }}")
    proc = subprocess.Popen(["/bin/sh", "-c", script], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, pass_fds=(lock.fileno(),), start_new_session=True)
    if proc.wait(timeout=_BUILD_TIMEOUT_S) != 0:
        with open(log, errors="replace") as f:
            raise RuntimeError(f"{cxx} failed: {f.read()[-2000:]}")


class TensorBatch:
    """The tensor guards of one entry (Note [Native guards]): `check(tensors)` is True when
    every tensor passes its guard. `py` is the generated Python function over the same tuple."""

    __slots__ = ("check", "py", "types", "records")

    def __init__(self, py, types: tuple, records: list):
        self.py, self.types, self.records = py, types, records
        self.check = self._undecided

    def _undecided(self, tensors) -> bool:
        ext = None if _STATE.forced_python else extension()
        if ext is not None:
            spec = ext.make_spec(self.records)
            check, types = ext.check_tensors, self.types
            self.check = lambda tensors: check(types, spec, tensors)
            return self.check(tensors)
        if _STATE.failed or _STATE.forced_python:
            self.check = self.py
        return self.py(tensors)


class HookBatch:
    """The "no hooks" guards of one entry's modules, grouped by the hook dicts they read:
    `check(modules)` is True when every module has none of those hooks."""

    __slots__ = ("check", "py", "names")

    def __init__(self, py, names: tuple):
        self.py, self.names = py, names
        self.check = self._undecided

    def _undecided(self, modules) -> bool:
        ext = None if _STATE.forced_python else extension()
        if ext is not None:
            no_hooks, names, py, state = ext.no_hooks, self.names, self.py, bytearray()
            self.check = lambda modules: no_hooks(names, modules, state) or py(modules)
            return self.check(modules)
        if _STATE.failed or _STATE.forced_python:
            self.check = self.py
        return self.py(modules)


class SourceProgram:
    """An entry's native source reads and checks (Note [Native source reads] in
    native_guards.cpp): `run(L)` answers the tuple of the locals `outs`, False (a check failed:
    a miss), or None (undecided: the entry runs its Python guards), as always before the
    extension is loaded and where it cannot be."""

    __slots__ = ("run", "program", "outs")

    def __init__(self, program, outs: list[str]):
        self.program, self.outs = program, outs
        self.run = self._undecided

    def narrow(self, outs: list[str]) -> None:
        """Answer only `outs` (before the first call)."""
        self.outs = outs

    def _undecided(self, L):
        ext = None if _STATE.forced_python else extension()
        if ext is not None:
            try:
                args = self.program.build(self.outs, ext.make_spec)
            except Exception as exc:  # a record the extension rejects: Python for this entry
                _LOG.debug("ember: native source reads unavailable for an entry: %s", exc)
                self.run = _undecided
                return None
            self.run = functools.partial(ext.run_program, *args)
            return self.run(L)
        if _STATE.failed or _STATE.forced_python:
            self.run = _undecided
        return None


def _undecided(L):
    return None
