"""OptimizedModule: what `ember.compile(module)` returns.

It wraps, never copies: parameters, buffers, submodules and `state_dict` are the original
module's own (state_dict keys are the original's, with no `_orig_mod.` prefix), so an optimizer
built on either sees the same tensors, and the original is untouched if compiling fails.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch


class OptimizedModule(torch.nn.Module):
    """A module whose forward runs through ember; everything else is the original module's."""

    def __init__(self, mod: torch.nn.Module, compiled_call: Callable[..., Any]) -> None:
        super().__init__()
        self._orig_mod = mod  # registered as a submodule: train()/eval()/to() reach it
        object.__setattr__(self, "_compiled_call", compiled_call)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self._compiled_call(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self._modules["_orig_mod"], name)

    def state_dict(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return self._orig_mod.state_dict(*args, **kwargs)

    def load_state_dict(self, state_dict: Any, strict: bool = True, assign: bool = False) -> Any:
        return self._orig_mod.load_state_dict(state_dict, strict=strict, assign=assign)

    def named_parameters(self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True):
        return self._orig_mod.named_parameters(prefix, recurse, remove_duplicate)

    def named_buffers(self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True):
        return self._orig_mod.named_buffers(prefix, recurse, remove_duplicate)

    def __repr__(self) -> str:
        return f"OptimizedModule({self._orig_mod!r})"
