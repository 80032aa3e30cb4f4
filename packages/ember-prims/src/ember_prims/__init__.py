"""ember_prims: a small closed set of primitive ops and the ATen decompositions into them.

    >>> import torch, ember_prims
    >>> ember_prims.PRIMS["add"].category
    'elementwise_binary'
"""
from ember_prims.__about__ import __version__
from ember_prims._library import (  # noqa: F401
    BINARY, CAST, CATEGORIES, CREATION, EXTERN, INDEXING, RANDOM, REDUCTION, TERNARY, UNARY, VIEW,
    PRIMS, PrimInfo, is_prim,
)
from ember_prims import prims as _prims  # noqa: F401  (defines the ops)
from ember_prims.externs import EXTERN_OPS
from ember_prims.decomps import register, table
from ember_prims.decomps.creation import RANDOM_OPS
from ember_prims.decomps.linalg import extra_decompositions
from ember_prims.decomposer import Decomposer
from ember_prims.decompose import SpecError, UndecomposedOpError, decompose, is_metadata_query, verify
from ember_prims.attention import with_fused_attention

import torch as _torch

ops = _torch.ops.ember_prims

__all__ = ["__version__", "ops", "PRIMS", "PrimInfo", "EXTERN_OPS", "CATEGORIES", "is_prim", "table", "RANDOM_OPS",
           "register", "Decomposer", "decompose", "verify", "SpecError", "UndecomposedOpError", "is_metadata_query",
           "extra_decompositions", "with_fused_attention"]
