"""OptimizedModule: what `ember.compile(module)` returns.

It wraps, never copies: parameters, buffers, submodules and `state_dict` are the original
module's own (state_dict keys are the original's, with no `_orig_mod.` prefix), so an optimizer
built on either sees the same tensors, and the original is untouched if compiling fails.

Note [The wrapper is the module]: every attribute the wrapper does not own itself (the names in
`OptimizedModule._OWN` and the wrapper class's own attributes) is read, written and deleted on
the wrapped module, as torch's OptimizedModule does: `opt.step += 1` changes the model, and the
compiled forward, which guards what it read, recompiles. `training` is the module's. Pickling,
`torch.save` and `copy.deepcopy` rebuild the wrapper by compiling the (copied) module again with
the same arguments, so a copy runs its own module, never the original's compiled code. Hooks
registered on the wrapper run around the compiled call; hooks on the module run inside it (the
compiled forward runs the module through `Module.__call__` while it has hooks).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch


class OptimizedModule(torch.nn.Module):
    """A module whose forward runs through ember; everything else is the original module's."""

    # Attributes of the wrapper itself; every other name is the wrapped module's.
    _OWN = frozenset({"_orig_mod", "_compiled_call", "_ember_recompile", "_wrapper_ready", "forward",
                      "__dict__"})

    def __init__(self, mod: torch.nn.Module, compiled_call: Callable[..., Any],
                 recompile: Callable[[torch.nn.Module], OptimizedModule] | None = None) -> None:
        # First: attribute reads and writes of the wrapper consult `_orig_mod`.
        object.__setattr__(self, "_orig_mod", mod)
        object.__setattr__(self, "_wrapper_ready", False)
        super().__init__()
        self._orig_mod = mod  # registered as a submodule: train()/eval()/to() reach it
        object.__setattr__(self, "_compiled_call", compiled_call)
        object.__setattr__(self, "_ember_recompile", recompile)
        object.__setattr__(self, "_wrapper_ready", True)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self._compiled_call(*args, **kwargs)

    @property
    def training(self) -> bool:  # type: ignore[override]
        return self._orig_mod.training

    @training.setter
    def training(self, value: bool) -> None:
        if self.__dict__.get("_wrapper_ready"):  # Module.__init__ sets a default: not the model's
            self._orig_mod.training = value

    def __getattr__(self, name: str) -> Any:
        if name == "_orig_mod":
            return self._modules["_orig_mod"]
        return getattr(self._modules["_orig_mod"], name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in OptimizedModule._OWN or hasattr(type(self), name) or not self.__dict__.get("_wrapper_ready"):
            super().__setattr__(name, value)
        else:
            setattr(self._orig_mod, name, value)

    def __delattr__(self, name: str) -> None:
        if name in OptimizedModule._OWN or hasattr(type(self), name):
            super().__delattr__(name)
        else:
            delattr(self._orig_mod, name)

    def __dir__(self) -> list[str]:
        own = self._orig_mod.__dir__()
        return own + [name for name in super().__dir__() if name not in own]

    def __len__(self) -> int:
        return len(self._orig_mod)  # type: ignore[arg-type]

    def __reduce__(self):
        # Compile the (unpickled or deep-copied) module again with the same arguments.
        if self._ember_recompile is None:
            raise TypeError("this OptimizedModule was built without its compile arguments: it cannot be copied")
        return (self._ember_recompile, (self._orig_mod,))

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
