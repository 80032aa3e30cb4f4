"""Launchers for rendered Triton kernels: `launcher(*tensors)`, tensors in KernelSpec.args order.

The mode follows the tensors: CUDA tensors launch the compiled kernel, CPU tensors run it under
Triton's interpreter (how CI checks the GPU path without a GPU). The launch config is the
heuristic pick, or with `options.autotune` on a GPU the fastest of a few (cached on disk).
"""
from __future__ import annotations

import contextlib
import logging
import os
import sys
from concurrent.futures import ThreadPoolExecutor

import torch
import triton
from triton.runtime import _async_compile
from triton.runtime._async_compile import AsyncCompileMode
from triton.runtime.driver import driver as _driver

from ember_inductor.codegen.common import BuildError

from ember_inductor.codegen.triton_autotune import LaunchConfig, autotune
from ember_inductor.codegen.triton_pool import compile_request, precompile, prestart
from ember_inductor.codegen.triton_runtime import interpreting, load_module, source_hash, triton_cache_dir

_DEFAULT_CACHE = "~/.cache/ember"
log = logging.getLogger("ember_inductor.triton")


def _storage_base(t):
    # Kernel indices count elements from the start of the storage (offsets folded in). A
    # number (a host scalar: Note [host scalars] in lowering/__init__.py) is passed as it is.
    if not isinstance(t, torch.Tensor):
        return t
    return t if t.storage_offset() == 0 else t.as_strided((1,), (1,), 0)


def _no_hook(hook) -> bool:
    """No launch hook installed: None, or (Triton >= 3.5) a HookChain with no calls. A hook left
    as a bare callable by an older Triton counts as installed."""
    return hook is None or not getattr(hook, "calls", True)


# CPython 3.11's ast is not thread-safe ("AST constructor recursion depth mismatch" when Triton
# parses kernels on two threads): there, the main process never compiles on two threads at once.
THREADED_COMPILE = sys.version_info >= (3, 12)


class BuildGroup:
    """The launchers of one build: on the first GPU launch of any of them, all are compiled at
    once, so a graph's kernels compile in parallel rather than one by one as the wrapper reaches
    them: first in worker processes (Note [Triton compiled in worker processes], triton_pool.py),
    then in this process, where each compile is then a cache hit (and whatever the workers did
    not compile is compiled: on `workers` threads with Triton's AsyncCompileMode from Python
    3.12, one by one on 3.11). The device is known only then: CPU tensors run interpreted and
    compile nothing. `stats` counts the kernels by where they were compiled, and this process's
    compiles by Triton's cache hits and misses."""

    def __init__(self, cache_dir: str, workers: int):
        self.cache_dir = cache_dir
        self.workers = max(1, workers)
        self.launchers: list[TritonLauncher] = []
        self.warmed = False
        self.stats: dict[str, int] = {}

    def add(self, launcher: TritonLauncher) -> None:
        self.launchers.append(launcher)
        n = len(self.launchers)
        if n >= 2 and n & (n - 1) == 0 and self.workers >= 2 and torch.cuda.is_initialized():
            # a GPU graph of n kernels (2, 4, 8, ...): as many worker processes start now, and
            # are ready, their Triton loaded, by its first launch
            try:
                prestart(self.workers, n, _driver.active.get_current_target())
            except Exception as e:  # noqa: BLE001 - they start at the first launch instead
                log.debug("Triton compile workers not started ahead: %s", e)

    def warm(self, target=None, pool=None) -> None:
        """Compile every launcher's kernel for `target` (default: the current GPU's), `pool` the
        worker pool (default: the process's, started on first use)."""
        if self.warmed:
            return
        self.warmed = True
        if len(self.launchers) < 2 or self.workers < 2:
            return
        try:
            with triton_cache_dir(self.cache_dir):
                self.stats = self.precompile(target, pool)
                with _counting_compiles(self.stats), \
                        ThreadPoolExecutor(min(self.workers, len(self.launchers))) as threads:
                    with AsyncCompileMode(threads) if THREADED_COMPILE else contextlib.nullcontext():
                        kernels = [launcher.warmup() for launcher in self.launchers]
                    build_launcher_stubs(kernels, threads)  # gcc, no Python parsing: threads on 3.11 too
        except Exception as e:  # the compiler's message, with the kernel source to read it against
            # AsyncCompileMode.__exit__ (Triton 3.6) leaves itself active when a compile failed:
            # later compiles in this thread would go to its shut-down pool.
            _async_compile.active_mode.set(None)
            raise BuildError(f"Triton failed to compile a kernel of this graph: {e}") from e
        log.debug("Triton build of %d kernels: %s", len(self.launchers), self.stats)

    def precompile(self, target=None, pool=None) -> dict:
        """The worker processes' part (never raises: what they do not compile is compiled next)."""
        try:
            target = target or _driver.active.get_current_target()
            requests = [compile_request(launcher.kernel(False), *launcher.warmup_args(), target)
                        for launcher in self.launchers]
        except Exception as e:  # noqa: BLE001 - another Triton's binding: compile in this process
            log.debug("no Triton compile in worker processes: %s", e)
            return {"kernels": len(self.launchers)}
        return precompile(requests, triton.knobs.cache.dir, self.workers, pool)


@contextlib.contextmanager
def _counting_compiles(stats: dict):
    """Count this block's Triton compiles in `stats` as cache `hits` and `misses` (Triton's
    compilation listener, chained to one already installed)."""
    stats.update(hits=0, misses=0)
    previous = triton.knobs.compilation.listener

    def listener(*, src, metadata, metadata_group, times, cache_hit):
        stats["hits" if cache_hit else "misses"] += 1
        if previous is not None:
            previous(src=src, metadata=metadata, metadata_group=metadata_group, times=times, cache_hit=cache_hit)

    triton.knobs.compilation.listener = listener
    try:
        yield
    finally:
        triton.knobs.compilation.listener = previous


def build_launcher_stubs(kernels, pool) -> None:
    """Note [launcher stubs built in parallel]: Triton launches a compiled kernel through a small
    C extension made for its signature (argument types and constants), built by the system C
    compiler at the kernel's first launch (`CompiledKernel._init_handles`, one `gcc` of ~0.3 s
    per distinct signature) and cached on disk. Those first launches run one by one on the
    wrapper's thread: 28 builds, 9.4 s of densenet121's cold first call on the H200. Here each
    distinct signature's stub is built once on the pool, after the kernels compiled; the first
    launches then find it in Triton's cache (the cache scope is the same). A stub that fails
    to build here is built again at its first launch, which raises Triton's error as before."""
    make = getattr(_driver.active, "launcher_cls", None)
    if make is None:
        return
    stubs = {}
    for k in kernels:
        k = k.result() if hasattr(k, "result") else k  # a FutureKernel of AsyncCompileMode
        src = getattr(k, "src", None)
        if src is None or getattr(k, "module", None) is not None:
            continue
        key = (repr(list(src.signature.values())), repr(sorted(map(repr, getattr(src, "constants", {}).items()))))
        stubs.setdefault(key, k)
    list(pool.map(_build_stub(make), stubs.values()))


def _build_stub(make):
    def build(kernel) -> None:
        try:
            make(kernel.src, kernel.metadata)
        except Exception:  # noqa: BLE001 - only a head start: the first launch builds it again and says why
            pass
    return build


class TritonLauncher:
    """Callable that launches one generated kernel; `.source` holds its Triton text."""

    def __init__(self, source, options=None, group: BuildGroup | None = None):
        self.kernel_source = source
        self.source = source.source
        self.name = source.name
        self.meta = source.meta
        self.cache_dir = os.path.expanduser(getattr(options, "cache_dir", None) or _DEFAULT_CACHE)
        self.autotune = bool(getattr(options, "autotune", False))
        self._fns: dict[bool, object] = {}
        self._config: dict[bool, LaunchConfig] = {}
        self._warm = False  # GPU: compiled and tuned; later launches skip the cache-dir scope
        self._fast = None   # see Note [Launch fast path]
        self._fast_by_spec: dict[tuple, FastLaunch] = {}  # symbolic kernels: Note [Launch fast path]
        self.group = group
        if group is not None:
            group.add(self)
        # Note [symbolic sizes in the inductor]: the size symbols follow the tensors; the grid's
        # extent is computed from them at each launch
        self.n_tensors = len(source.kernel.args)
        # the first argument that is a tensor (a host scalar is a number): it tells the device
        self.probe = next((i for i, a in enumerate(source.kernel.args) if a.role != "scalar"), 0)
        sizevars = self.meta.get("sizevars", ())
        # Note [size arguments] (triton.py): the numbers of elements that follow the sizes
        # (a kernel whose numbers of elements are all static has none: an empty tuple)
        numels = "".join(f"{n}, " for n in self.meta.get("numel_src", ()))
        self._numels = (eval(f"lambda {', '.join(sizevars)}: ({numels})")  # noqa: S307
                        if sizevars else None)

    def warmup(self):
        """Compile the heuristic config for the current GPU without launching (mock arguments);
        returns Triton's compiled kernel (a future of it under AsyncCompileMode)."""
        args, kwargs = self.warmup_args()
        return self.kernel(False).warmup(*args, grid=self.grid(self.meta["configs"][0]), **kwargs)

    def warmup_args(self) -> tuple[list, dict]:
        """The arguments `warmup` compiles with: a dtype per tensor (Triton's MockTensor), the
        size hints, the heuristic config's launch kwargs (what worker processes compile too)."""
        cfg = self.meta["configs"][0]
        dtypes = [0.5 if a.role == "scalar" else a.dtype for a in self.kernel_source.kernel.args]
        hints = [self.kernel_source.kernel.hints[v] for v in self.kernel_source.kernel.sizevars]
        if hints:
            hints = list(self._scalars(hints)[0])
        return [*dtypes, *hints], cfg.kwargs()

    def kernel(self, interpret: bool):
        fn = self._fns.get(interpret)
        if fn is None:
            # Note [size arguments] (triton.py): the interpreter's variant of a symbolic kernel
            source = self.meta.get("interpret_source", self.source) if interpret else self.source
            fn = getattr(load_module(source, self.cache_dir, interpret), self.name)
            self._fns[interpret] = fn
        return fn

    def grid(self, cfg: LaunchConfig, xnumel: int | None = None) -> tuple:
        m = self.meta
        cdiv = lambda a, b: (a + b - 1) // b  # noqa: E731
        if m["layout"] == "tiled":
            return (cdiv(m["xnumel"], cfg.XBLOCK), cdiv(m["ynumel"], cfg.YBLOCK))
        return (cdiv(m["xnumel"] if xnumel is None else xnumel, cfg.XBLOCK),)

    def _scalars(self, sizes) -> tuple[tuple, int]:
        """The kernel's scalar arguments for these size values (the sizes, then the numbers of
        elements: Note [size arguments]) and the extent of the grid's first dimension."""
        numels = self._numels(*sizes)
        names = self.meta["numel_names"]
        xnumel = numels[names.index("xnumel")] if "xnumel" in names else self.meta["xnumel"]
        return (*sizes, *numels), xnumel

    def _launch_symbolic(self, args) -> None:
        """A kernel with size arguments: the grid from this call's sizes (Note [Launch fast path])."""
        tensors = args[:self.n_tensors]
        sizes, xnumel = self._scalars(args[self.n_tensors:])
        if xnumel == 0:
            return
        if self._warm and tensors[self.probe].is_cuda:
            fast = self._fast_by_spec.get(_int_specialization(sizes))
            if fast is not None and fast.launch_now(tensors, sizes, self.grid(self._config[False], xnumel)):
                return
        tensors = [_storage_base(t) for t in tensors]
        interpret = not tensors[self.probe].is_cuda
        fn = self.kernel(interpret)
        if interpret:
            cfg = self.config(tensors, interpret, sizes)
            with interpreting():
                fn[self.grid(cfg, xnumel)](*tensors, *sizes, **cfg.kwargs())
            return
        if self._warm:
            cfg = self._config[interpret]
            compiled = fn[self.grid(cfg, xnumel)](*tensors, *sizes, **cfg.kwargs())
        else:
            if self.group is not None:
                self.group.warm()
            with triton_cache_dir(self.cache_dir):
                cfg = self.config(tensors, interpret, sizes)
                compiled = fn[self.grid(cfg, xnumel)](*tensors, *sizes, **cfg.kwargs())
            self._warm = True
        fast = self._fast_launch(compiled, tensors, fn, cfg, len(sizes))
        if fast is not None:
            self._fast_by_spec.setdefault(_int_specialization(sizes), fast)

    def config(self, tensors, interpret: bool, sizes=()) -> LaunchConfig:
        cfg = self._config.get(interpret)
        if cfg is not None:
            return cfg
        configs = self.meta["configs"]
        cfg = configs[0]
        if self.autotune and not interpret and len(configs) > 1:
            # in-place buffers are benchmarked on scratch copies, so tuning changes no result
            scratch = [t.clone() if a.role == "inout" else t
                       for t, a in zip(tensors, self.kernel_source.kernel.args)]
            fn = self.kernel(False)
            xnumel = self._scalars(sizes[:len(self.kernel_source.kernel.sizevars)])[1] if sizes else None
            cfg = autotune(source_hash(self.source), configs,
                           lambda c: fn[self.grid(c, xnumel)](*scratch, *sizes, **c.kwargs()), self.cache_dir)
        self._config[interpret] = cfg
        return cfg

    def __call__(self, *tensors):
        if self._numels is not None:
            self._launch_symbolic(tensors)
            return
        fast = self._fast
        if fast is not None and tensors[self.probe].is_cuda and fast.launch_now(tensors):
            return
        if self.meta["xnumel"] == 0 or self.meta.get("ynumel") == 0:
            return  # empty iteration space: nothing to launch (a grid of 0 is an error)
        tensors = [_storage_base(t) for t in tensors]
        interpret = not tensors[self.probe].is_cuda
        fn = self.kernel(interpret)
        if interpret:
            cfg = self.config(tensors, interpret)
            with interpreting():
                fn[self.grid(cfg)](*tensors, **cfg.kwargs())
        elif self._warm:  # the fast path declined (Note [Launch fast path]): Triton's own launch
            grid, kwargs = self._launch
            fn[grid](*tensors, **kwargs)
        else:  # first launch: autotune and compile into our cache dir
            if self.group is not None:
                self.group.warm()
            with triton_cache_dir(self.cache_dir):
                cfg = self.config(tensors, interpret)
                compiled = fn[self.grid(cfg)](*tensors, **cfg.kwargs())
            self._launch = (self.grid(cfg), cfg.kwargs())
            self._warm = True
            self._remember_compiled(compiled, tensors, fn, cfg)

    # Note [Launch fast path]: after the first GPU launch, later launches call the compiled
    # kernel's C launcher directly (FastLaunch), skipping JITFunction.run's argument binding and
    # cache lookup, and the Python of Triton's CudaLauncher.__call__ when the kernel needs no
    # scratch memory. That is only valid while the specialization would be the same: every
    # pointer 16-byte aligned as on the first launch (Triton specializes on it), the same current
    # device, and no launch hooks (profilers) installed; otherwise Triton's normal path runs.
    #
    # A kernel with size arguments (Note [symbolic sizes in the inductor]) takes the same path with
    # this call's grid and sizes. Triton compiles one variant of it per specialization of its int
    # arguments (equal to 1, divisible by 16, beyond int32): one fast launch per variant seen, each
    # remembered after the normal launch that compiled (or found) it.
    def _remember_compiled(self, compiled, tensors, fn, cfg):
        self._fast = self._fast_launch(compiled, tensors, fn, cfg, 0)

    def _fast_launch(self, compiled, tensors, fn, cfg, n_sizes: int):
        if compiled is None or not all(t.data_ptr() % 16 == 0 for t in tensors if isinstance(t, torch.Tensor)):
            return None
        kw = cfg.kwargs()
        consts = tuple(kw[name] for name in fn.arg_names[len(tensors) + n_sizes:])
        grid = None if n_sizes else tuple(self.grid(cfg))
        return FastLaunch(compiled, grid, consts,
                          tuple(t.element_size() if isinstance(t, torch.Tensor) else None for t in tensors))


def _int_specialization(values) -> tuple:
    """What Triton specializes an int argument on (Note [Launch fast path])."""
    return tuple((v == 1, v % 16 == 0, not -2**31 <= v < 2**31) for v in values)


_RUNTIME_KNOBS = triton.knobs.runtime
# The C launcher's argument order (grid, stream, function, cooperative, pdl, two scratch
# buffers, then CudaLauncher's own arguments) is Triton 3.6's, checked on the H100 by
# test_launch_fast_path_gpu; other versions keep CudaLauncher.__call__.
_DIRECT_C_LAUNCH = triton.__version__.startswith("3.6.")


class FastLaunch:
    """Note [Launch fast path]: one compiled kernel's launch, its checks and arguments bound."""

    def __init__(self, compiled, grid: tuple, consts: tuple, itemsizes: tuple):
        active = _driver.active
        self.get_device = active.get_current_device
        if self.get_device is torch.cuda.current_device:  # CUDA is initialized by now: the C getter
            self.get_device = torch._C._cuda_getDevice
        self.get_stream = active.get_current_stream
        self.device = self.get_device()
        run = compiled.run
        launch = getattr(run, "launch", None)
        if (_DIRECT_C_LAUNCH and launch is not None and not getattr(run, "global_scratch_size", 1)
                and not getattr(run, "profile_scratch_size", 1)):
            # CudaLauncher.__call__ without its Python: no scratch to allocate
            self.launch = launch
            self.prefix = (compiled.function, run.launch_cooperative_grid, run.launch_pdl, None, None,
                           compiled.packed_metadata, None, None, None)
        else:
            self.launch = run
            self.prefix = (compiled.function, compiled.packed_metadata, None, None, None)
        self.grid = None if grid is None else tuple(grid) + (1,) * (3 - len(grid))
        self.consts = consts
        self.itemsizes = itemsizes  # of the tensor arguments: their storages' addresses are computed here
        # (None: a host scalar, passed as the number it is: Note [host scalars])

    def launch_now(self, tensors, sizes=(), grid=None) -> bool:
        """Launch on the current stream and return True, or return False (nothing launched)
        when a condition of the fast path does not hold. A symbolic kernel passes this call's
        size arguments and grid."""
        if (self.get_device() != self.device or not _no_hook(_RUNTIME_KNOBS.launch_enter_hook)
                or not _no_hook(_RUNTIME_KNOBS.launch_exit_hook)):
            return False
        # The kernel indexes from each storage's start: its address, as an int (Triton's launcher
        # takes an int as the pointer itself, with no view made and no driver query per tensor).
        bases = []
        for t, itemsize in zip(tensors, self.itemsizes):
            if itemsize is None:
                bases.append(t)
                continue
            offset = t.storage_offset()
            address = t.data_ptr() - offset * itemsize if offset else t.data_ptr()
            if address % 16:
                return False
            bases.append(address)
        if grid is None:
            g0, g1, g2 = self.grid
        else:
            g0, g1, g2 = (*grid, 1, 1)[:3]
        self.launch(g0, g1, g2, self.get_stream(self.device), *self.prefix, *bases, *sizes, *self.consts)
        return True
