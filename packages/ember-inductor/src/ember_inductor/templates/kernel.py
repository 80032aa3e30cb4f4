"""A compiled GEMM template as a callable the wrapper calls like an extern op:
`GemmCall(...)(a, b, *extras) -> output` (a tuple when the epilogue stores several values).

CUDA tensors launch the compiled kernel (compiled into ember's Triton cache dir on first use);
CPU tensors run it under Triton's interpreter, which is how CI checks the template.
"""
from __future__ import annotations

import functools
import logging
import os

import torch
import triton
from triton.runtime.driver import driver as _driver

from ember_inductor.codegen.triton_launch import _no_hook
from ember_inductor.codegen.triton_runtime import interpreting, load_module, source_hash, triton_cache_dir
from ember_inductor.templates import gemm
from ember_inductor.templates.epilogue import Epilogue

log = logging.getLogger("ember_inductor.templates")


# Note [operand views]: the kernel reads every tensor as (batch, row, column) through three
# strides. How a graph tensor maps onto that is the operand's view, by name:
#   "mat"    a 2-D matrix (batch stride 0) or a 3-D batch of them;
#   "matT"   the same, transposed (a weight given as nn.Linear stores it);
#   "rows"   a 4-D (N, C, H, W) activation as N batches of (H*W, C): a 1x1 convolution's input,
#            output and epilogue operands; H and W merge when stride(H) == W * stride(W)
#            (contiguous and channels-last alike), otherwise the tensor is copied contiguous;
#   "weight" a 1x1 convolution's (O, C, 1, 1) weight as one (C, O) matrix shared by all batches.
def _mat(t):
    return (0, *t.stride()) if t.dim() == 2 else tuple(t.stride())


def _rows(t):
    s0, s1, s2, s3 = t.stride()
    if t.shape[2] > 1 and t.shape[3] > 1 and s2 != t.shape[3] * s3:
        return None
    return (s0, s3 if t.shape[3] > 1 else s2, s1)


VIEWS = {
    "mat": _mat,
    "matT": lambda t: _mat(t.transpose(-1, -2)),
    "rows": _rows,
    "weight": lambda t: (0, t.stride(1), t.stride(0)),
}


def view_strides(t: torch.Tensor, view: str) -> tuple[torch.Tensor, tuple]:
    """(tensor, its (batch, row, column) strides) under `view` (Note [operand views])."""
    strides = VIEWS[view](t)
    if strides is None:
        t = t.contiguous()
        strides = VIEWS[view](t)
    return t, strides


@functools.lru_cache(maxsize=None)
def _kernel(source: str, cache_dir: str, name: str, interpret: bool):
    # memoized per source text (a str caches its hash): launches skip load_module's hashing
    return getattr(load_module(source, cache_dir, interpret), name)


def broadcast_view(t: torch.Tensor, shape: tuple, dims: tuple | None) -> torch.Tensor:
    """`t` seen as `shape` through broadcast_in_dim's `dims` (None: already that shape): a view
    with stride 0 along broadcast dims, never a copy."""
    if dims is None:
        return t
    strides = [0] * len(shape)
    for i, d in enumerate(dims):
        if t.shape[i] == shape[d]:
            strides[d] = t.stride(i)
    return t.as_strided(shape, strides, t.storage_offset())


class GemmCall:
    """One product (with its epilogue) compiled from the template with one configuration."""

    def __init__(self, problem: gemm.Problem, epilogue: Epilogue, config: gemm.GemmConfig,
                 out_layouts: list, views: tuple, cache_dir: str, pointwise: bool = False):
        self.problem, self.epilogue, self.config = problem, epilogue, config
        self.out_layouts = out_layouts  # (shape, strides, dtype) per output
        self.views = views              # (a, b, output): Note [operand views]
        self.pointwise = pointwise
        self.cache_dir = os.path.expanduser(cache_dir)
        kind = "gemm_epilogue" if pointwise else "gemm"
        self.source = gemm.render(f"ember_{kind}", problem, epilogue, pointwise)
        self.name = f"ember_{kind}"
        self.__name__ = self.diagram_name = (
            f"gemm_template[{','.join(epilogue.names) or 'plain'}; "
            f"{config.BLOCK_M}x{config.BLOCK_N}x{config.BLOCK_K} w{config.num_warps} s{config.num_stages}]")
        self._fast = None  # GPU: (compiled kernel, device, grid, constants), see launch(); False: off
        self._fast_checked = False

    def __repr__(self):
        return self.__name__

    def kernel(self, interpret: bool):
        return _kernel(self.source, self.cache_dir, self.name, interpret)

    def operands(self, a, b, extras) -> tuple[list, list]:
        """(tensors, strides) in the kernel's argument order, outputs allocated."""
        shape = self.out_layouts[0][0]
        va, vb, vout = self.views
        ins = [(a, vout)] if self.pointwise else [(a, va), (b, vb)]
        ins += [(broadcast_view(x, shape, e.dims), vout) for x, e in zip(extras, self.epilogue.extras)]
        outs = [self._output(s, st, dt, a.device) for s, st, dt in self.out_layouts]
        tensors, strides = [], []
        for t, view in ins + [(o, vout) for o in outs]:
            t, st = view_strides(t, view)
            tensors.append(t)
            strides.extend(st)
        return tensors, strides, outs

    def _output(self, shape, strides, dtype, device) -> torch.Tensor:
        """An output in the recorded layout, or contiguous where the kernel cannot address that
        layout through its view (the wrapper's `fit` then copies it to the recorded one)."""
        out = torch.empty_strided(shape, strides, dtype=dtype, device=device)
        if VIEWS[self.views[2]](out) is None:
            out = torch.empty(shape, dtype=dtype, device=device)
        return out

    def launch(self, tensors, strides, interpret: bool):
        p, c = self.problem, self.config
        fn = self.kernel(interpret)
        consts = dict(M=p.m, N=p.n, K=p.k, **c.kwargs())
        if interpret:
            consts.pop("num_warps"), consts.pop("num_stages")
            with interpreting():
                fn[gemm.grid(p, c)](*tensors, *strides, **consts)
        elif self._fast and self._fast_ok(tensors) and (self._fast_checked or self._check_fast(
                fn, tensors, strides, consts)) and self._launch_fast(tensors, strides):
            pass
        else:
            with triton_cache_dir(self.cache_dir):
                compiled = fn[gemm.grid(p, c)](*tensors, *strides, **consts)
            if self._fast is None and compiled is not None and all(t.data_ptr() % 16 == 0 for t in tensors):
                names = fn.arg_names[len(tensors) + len(strides):]
                const_args = tuple(consts[n] for n in names)
                self._fast = (compiled, _driver.active.get_current_device(), gemm.grid(p, c), const_args)

    def _check_fast(self, fn, tensors, strides, consts) -> bool:
        """Before the fast path is trusted, its first launch is compared bit for bit with a
        normal launch on the same arguments (outside CUDA-graph capture, which cannot sync):
        a launcher that read its arguments differently would be caught here, not in results."""
        if torch.cuda.is_current_stream_capturing():
            return False
        outs = tensors[len(tensors) - len(self.out_layouts):]
        if not self._launch_fast(tensors, strides):
            return False
        fast = [o.clone() for o in outs]
        fn[gemm.grid(self.problem, self.config)](*tensors, *strides, **consts)
        if all(torch.equal(a, b) for a, b in zip(fast, outs)):
            self._fast_checked = True
        else:
            log.warning("ember_inductor: the direct launch of %s disagreed with Triton's launch; "
                        "launching through Triton from now on", self)
            self._fast = False
        return False  # the outputs hold the normal launch's result: nothing more to launch

    def _launch_fast(self, tensors, strides) -> bool:
        # Note [Launch fast path] (codegen/triton_launch.py): the compiled kernel is called
        # directly; shapes and strides are fixed per call site, so only alignment, device and
        # launch hooks can change the specialization. A launcher that refuses the arguments
        # (another Triton's calling convention) turns the fast path off: nothing ran yet.
        kernel, device, (g0, g1), const_args = self._fast
        try:
            kernel.run(g0, g1, 1, _driver.active.get_current_stream(device), kernel.function,
                       kernel.packed_metadata, None, None, None, *tensors, *strides, *const_args)
        except TypeError:
            self._fast = False
            return False
        return True

    def _fast_ok(self, tensors) -> bool:
        return (_driver.active.get_current_device() == self._fast[1]
                and _no_hook(triton.knobs.runtime.launch_enter_hook)
                and _no_hook(triton.knobs.runtime.launch_exit_hook)
                and all(t.data_ptr() % 16 == 0 for t in tensors))

    def __call__(self, a, b=None, *extras):
        if self.pointwise:
            extras = (b, *extras) if b is not None else extras
        tensors, strides, outs = self.operands(a, b, extras)
        if self.problem.m and self.problem.n:
            self.launch(tensors, strides, interpret=not a.is_cuda)
        return outs[0] if len(outs) == 1 else tuple(outs)

    @property
    def key(self) -> str:
        return source_hash(self.source)
