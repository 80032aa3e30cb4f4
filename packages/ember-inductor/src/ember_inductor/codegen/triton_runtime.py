"""Load generated Triton source as a module and launch its kernel, compiled or interpreted.

A generated kernel file is plain Python that names two free globals, `jit` and `libdevice`; the
loader binds them before executing the file:

  * compiled (CUDA tensors): `triton.jit` and `triton.language.extra.libdevice`;
  * interpreted (CPU tensors, CI): Triton's interpreter and `INTERPRET_LIBDEVICE`, a numpy
    emulation of the few libdevice functions the expression table uses (the interpreter has
    none: calling them there returns None).

Files live under `<cache_dir>/triton/src/<hash>.py` (readable, re-runnable), and Triton's own
compiled-kernel cache under `<cache_dir>/triton/cache`, so a second process that loads the same
source finds its cubin on disk and compiles nothing.
"""
from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import math
import os
import threading
import types

import numpy as np
import triton
import triton.language as tl
from triton.runtime import interpreter as _interpreter
from triton.runtime.interpreter import InterpretedFunction, TensorHandle
from triton.runtime.jit import JITFunction

from ember_inductor.codegen.atomic import write_text_atomic

_lock = threading.Lock()
_loaded: dict[tuple[str, bool], types.ModuleType] = {}


def source_hash(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()[:24]


@contextlib.contextmanager
def triton_cache_dir(cache_dir: str):
    """Compile inside this block into `<cache_dir>/triton/cache` (Triton's on-disk cache).

    Triton reads its cache location from a process-wide knob; we set it only for the launches
    that may compile (a kernel's first launches, autotuning) and restore it after, so compiles
    with different options never leak into each other. TRITON_CACHE_DIR, if set, wins.
    """
    if os.environ.get("TRITON_CACHE_DIR"):
        yield
        return
    path = os.path.join(os.path.expanduser(cache_dir), "triton", "cache")
    os.makedirs(path, exist_ok=True)
    with triton.knobs.cache.scope():
        triton.knobs.cache.dir = path
        yield


def load_module(source: str, cache_dir: str, interpret: bool) -> types.ModuleType:
    """Write `source` to the cache (once) and execute it with `jit`/`libdevice` bound."""
    digest = source_hash(source)
    key = (digest, interpret)
    with _lock:
        mod = _loaded.get(key)
        if mod is not None:
            return mod
        src_dir = os.path.join(os.path.expanduser(cache_dir), "triton", "src")
        os.makedirs(src_dir, exist_ok=True)
        path = os.path.join(src_dir, f"k{digest}.py")
        if not os.path.exists(path):
            write_text_atomic(path, source)  # Note [atomic cache writes]
        name = f"ember_triton_k{digest}_{'i' if interpret else 'c'}"
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        mod.jit = InterpretedFunction if interpret else JITFunction
        mod.libdevice = INTERPRET_LIBDEVICE if interpret else _cuda_libdevice()
        spec.loader.exec_module(mod)
        _loaded[key] = mod
        return mod


@contextlib.contextmanager
def interpreting():
    """Run an interpreted launch in a process where triton was imported without
    TRITON_INTERPRET=1: Triton's own library functions (tl.sum, tl.rand, tl.zeros_like) are then
    compiled-mode JITFunctions, which refuse to be called outside a compiled kernel; for the
    launch's duration they run through the interpreter instead. Only device-function calls go
    through `JITFunction.__call__` (GPU launches use `fn[grid]`), so nothing else is affected.

    Note [interpreter patches]: Triton's interpreter swaps triton.language's builtins
    (tl.arange, ...) for interpreter versions while it runs, but an interpreted *device-function*
    call (Triton 3.6, InterpretedFunction.__call__) never swaps them back. Every later compile
    of a GPU kernel in the process then failed inside tl.arange ("ir.value has no attribute
    dtype"): seen on an H100 when CPU and CUDA tests shared a worker. Each attribute the
    interpreter patches while this block runs is put back as it was when the block began.
    """
    # Triton's library was decorated when triton was imported: compiled-mode JITFunctions unless
    # TRITON_INTERPRET=1 was set by then (the knob reads the variable now: a test that sets it
    # after the import saw library calls refused, tl.zeros in a looped arg-reduction)
    if not isinstance(tl.zeros, JITFunction):
        yield
        return
    with _lock:
        original = JITFunction.__call__
        JITFunction.__call__ = _call_interpreted
        try:
            with _restoring_language_patches():
                yield
        finally:
            JITFunction.__call__ = original


@contextlib.contextmanager
def _restoring_language_patches():
    """See Note [interpreter patches]: record the value of each attribute the interpreter's
    patch scopes set, the first time one is set, and restore them all at the end."""
    scope_cls = getattr(_interpreter, "_LangPatchScope", None)
    if scope_cls is None or not hasattr(scope_cls, "set_attr"):
        yield  # another Triton: nothing to hook
        return
    missing = object()
    first: dict[tuple[int, str], tuple] = {}
    set_attr = scope_cls.set_attr

    def recording_set_attr(self, obj, name, value):
        first.setdefault((id(obj), name), (obj, name, getattr(obj, name, missing)))
        set_attr(self, obj, name, value)

    scope_cls.set_attr = recording_set_attr
    try:
        yield
    finally:
        scope_cls.set_attr = set_attr
        for obj, name, value in first.values():
            if value is missing:
                if hasattr(obj, name):
                    delattr(obj, name)
            else:
                setattr(obj, name, value)


_interpreted: dict[int, InterpretedFunction] = {}


def _call_interpreted(self, *args, **kwargs):
    fn = _interpreted.get(id(self))
    if fn is None:
        fn = _interpreted[id(self)] = InterpretedFunction(self.fn)
    return fn(*args, **kwargs)


def _cuda_libdevice():
    from triton.language.extra import libdevice
    return libdevice


# ---- libdevice under the interpreter ------------------------------------------------------
# The interpreter hands device functions tl.tensor values holding numpy arrays. These functions
# follow C's libm (what libdevice implements), not torch: e.g. fmod is C fmod.

def _wrap(np_fn):
    def fn(*args, _semantic=None):
        arrays = [a.handle.data if isinstance(a, tl.tensor) else np.asarray(a) for a in args]
        first = next(a for a in args if isinstance(a, tl.tensor))
        with np.errstate(all="ignore"):
            out = np_fn(*arrays)
        out = np.asarray(out).astype(first.handle.data.dtype)
        # the arguments' broadcast shape, not the first's: a [1] constant and a [X, R] block give
        # [X, R] (typed [1], the next op failed to broadcast it: fuzz seed 115 under --triton)
        scalar = first.type.scalar
        ty = tl.block_type(scalar, list(out.shape)) if out.ndim else scalar
        return tl.tensor(TensorHandle(out, first.handle.dtype.scalar), ty)
    return fn


def _vectorize(scalar_fn):
    def fn(x):
        def safe(v):
            try:
                return scalar_fn(float(v))
            except (ValueError, OverflowError):
                return math.inf if scalar_fn is math.lgamma else math.nan
        return np.vectorize(safe, otypes=[np.float64])(x)
    return fn


def _erfinv(x):
    # Newton on erf from a rough start; float64 is ample for float32/float64 checks.
    x = np.asarray(x, dtype=np.float64)
    verf = np.vectorize(math.erf, otypes=[np.float64])
    a = 0.147
    ln = np.log(np.maximum(1.0 - x * x, 1e-300))
    t = 2.0 / (math.pi * a) + ln / 2.0
    y = np.sign(x) * np.sqrt(np.sqrt(t * t - ln / a) - t)
    for _ in range(4):
        y = y - (verf(y) - x) / (2.0 / math.sqrt(math.pi) * np.exp(-y * y))
    y = np.where(x == 1, np.inf, np.where(x == -1, -np.inf, y))
    return np.where(np.abs(x) > 1, np.nan, y)


INTERPRET_LIBDEVICE = types.SimpleNamespace(
    expm1=_wrap(np.expm1), log1p=_wrap(np.log1p), rsqrt=_wrap(lambda x: 1.0 / np.sqrt(x)),
    sin=_wrap(np.sin), cos=_wrap(np.cos), tan=_wrap(np.tan),
    asin=_wrap(np.arcsin), acos=_wrap(np.arccos), atan=_wrap(np.arctan),
    sinh=_wrap(np.sinh), cosh=_wrap(np.cosh), tanh=_wrap(np.tanh),
    asinh=_wrap(np.arcsinh), acosh=_wrap(np.arccosh), atanh=_wrap(np.arctanh),
    erf=_wrap(_vectorize(math.erf)), erfc=_wrap(_vectorize(math.erfc)), erfinv=_wrap(_erfinv),
    lgamma=_wrap(_vectorize(math.lgamma)),
    trunc=_wrap(np.trunc), nearbyint=_wrap(np.rint),
    atan2=_wrap(np.arctan2), hypot=_wrap(np.hypot), copysign=_wrap(np.copysign),
    fmod=_wrap(np.fmod), pow=_wrap(np.power),
)
