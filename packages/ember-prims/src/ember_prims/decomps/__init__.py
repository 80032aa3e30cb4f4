"""The ATen -> prims decomposition table, one module per op family (see `_registry` for the
contract every decomposition keeps)."""
from __future__ import annotations

from ember_prims.decomps import (  # noqa: F401  (each module fills the table)
    activations, creation, elementwise, foreach, indexing, linalg, losses, norms, pooling, reductions,
    views,
)
from ember_prims.decomps._registry import _TABLE, register


def table() -> dict:
    """A fresh copy of the table: ATen overload -> decomposition. Override or add entries freely."""
    return dict(_TABLE)


__all__ = ["table", "register"]
