"""Which Python code capture inlines, and which it runs natively (a call into it is a graph break).

Note [Inlining]: a Python function is inlined (interpreted in a child frame, so that its tensor
operations join the graph) unless there is a reason not to. Inlined: the user's code, installed
model libraries (torchvision, timm, transformers: plain Python over torch), torch's own model
code and small wrappers (TORCH_INLINED), and the few standard-library modules that are plain
Python over the values they are given (INLINED_STDLIB). Not inlined, with the reason:
- SKIPPED_PACKAGES: not model code (numeric libraries with their own C data, test and I/O tools,
  ember itself): their calls run natively.
- the rest of torch: dispatch, devices, RNG state, distributed and tracing machinery manage
  global state, and autograd.Function needs its own forward/backward.
- the rest of the standard library (threading, logging, copy, io, ...): interpreter state, I/O,
  object identity (copy's memo), or C code behind a thin Python layer.
"""
from __future__ import annotations

import functools
import os
import sysconfig

import torch

# Standard-library modules that are plain Python over the values they are given (dataclass
# helpers, the collections ABCs' mixin methods such as Sequence.__iter__ or Mapping.get,
# contextlib's context managers such as nullcontext, which Hugging Face models enter when autocast
# is off): inlined like user code. The rest of the standard library runs natively (a call is a graph break).
INLINED_STDLIB = frozenset({"dataclasses", "_collections_abc", "contextlib"})
_STDLIB_DIR = os.path.realpath(sysconfig.get_paths()["stdlib"]) + os.sep
_SITE_DIRS = tuple({os.path.realpath(sysconfig.get_paths()[k]) + os.sep for k in ("purelib", "platlib")})
# Installed packages are inlined (model libraries such as torchvision, timm and transformers are
# plain Python over torch, as user code is), except these, whose functions are not model code
# and run natively: a call into one is a graph break.
SKIPPED_PACKAGES = frozenset({
    "numpy", "scipy", "sympy", "triton", "pytest", "_pytest", "pluggy", "typing_extensions",
    "ember", "ember_capture", "ember_autograd", "ember_prims", "ember_inductor", "tqdm", "PIL",
    "matplotlib", "pandas", "jax", "jaxlib", "cupy", "filelock", "fsspec", "huggingface_hub",
    "safetensors", "tokenizers", "regex", "requests", "urllib3", "packaging", "importlib_metadata",
})
# Modules of skipped packages that are model code after all, inlined: huggingface_hub's strict
# dataclasses validate each attribute a Hugging Face config is given (its `__setattr__` runs the
# field's type validators), also on a config copied and renamed inside forward.
INLINED_MODULES = frozenset({os.path.join("huggingface_hub", "dataclasses.py")})
_TORCH_DIR = os.path.dirname(os.path.realpath(torch.__file__)) + os.sep
# Torch's own Python that is inlined like user code: model code (torch.nn), masked ops, the
# context decorators (@torch.no_grad() on a forward: its wrapper is `with ctx_factory(): return
# func(...)`) and torch.amp.GradScaler, plain Python over its scale tensors (its one read of
# tensor data is modelled: Note [GradScaler steps] in amp.py). The rest of torch stays native: dispatch, devices, RNG, distributed and tracing
# machinery manage global state, autograd.Function needs its own forward/backward, and the
# Tensor methods written in Python (torch/_tensor.py: backward, register_hook, ...) act on
# autograd state.
TORCH_INLINED = ("nn/", "masked/", "functional.py", "utils/_contextlib.py", "autograd/grad_mode.py",
                 "amp/grad_scaler.py")
_TORCH_INLINE_DIRS = tuple(_TORCH_DIR + os.path.join(*d.split("/")) for d in TORCH_INLINED)
# Within those, the distributed wrappers (DistributedDataParallel, DataParallel) are machinery:
# their forward drives the reducer, broadcasts buffers and marks the module DDP runs; it runs
# natively, and the module it wraps is captured when it is called (a compiled module, or
# ember.compile(ddp_model), which compiles it).
TORCH_NATIVE = ("nn/parallel/",)
_TORCH_NATIVE_DIRS = tuple(_TORCH_DIR + os.path.join(*d.split("/")) for d in TORCH_NATIVE)
_OWN_DIR = os.path.dirname(os.path.realpath(__file__)) + os.sep  # ember_capture itself


@functools.lru_cache(maxsize=4096)
def inlinable_file(filename: str) -> bool:
    if filename.startswith("<frozen "):  # standard-library modules frozen into the interpreter (os, abc, ...)
        return filename[len("<frozen "):-1] in INLINED_STDLIB
    path = os.path.realpath(filename) if not filename.startswith("<") else filename
    if path.startswith(_OWN_DIR):
        return False
    if path.startswith(_TORCH_DIR):
        return path.startswith(_TORCH_INLINE_DIRS) and not path.startswith(_TORCH_NATIVE_DIRS)
    for site in _SITE_DIRS:
        if path.startswith(site):
            relative = path[len(site):]
            top = relative.split(os.sep, 1)[0].removesuffix(".py")
            return top not in SKIPPED_PACKAGES or relative in INLINED_MODULES
    if path.startswith(_STDLIB_DIR):
        return path[len(_STDLIB_DIR):].split(os.sep, 1)[0].removesuffix(".py") in INLINED_STDLIB
    return True
