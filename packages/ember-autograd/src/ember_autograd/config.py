"""Configuration: a frozen dataclass passed in; nothing global."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class AotConfig:
    """Options for `ember_autograd.aot`.

    verify: run `verify_functional` after every pass (tracing, partitioning); a debug option.
    stateful_ops: qualified names (``"ns::name"``) of ops the partitioner must never recompute,
        in addition to every op tagged ``nondeterministic_seeded`` or with a mutable schema.
        ``ember_prims::random_seed`` is listed by name so that this layer need not import prims.
    recompute_ops: qualified names the min-cut partitioner may recompute in addition to ops
        tagged ``pointwise`` and view ops (see the cost model in the README).
    view_ops: qualified names of functional ops that only re-index their first input (a
        decomposition's permute, reshape, broadcast): the default partitioner saves their input
        and re-takes them in the backward, as it does for ops whose schema returns an alias.
    pointwise_ops: qualified names of functional ops that compute each element from their
        inputs' elements (the facade names ember_prims' elementwise prims), besides the ops
        tagged ``pointwise``.
    recompute_pointwise: the default partitioner recomputes a saved value made by a few
        pointwise ops from values saved anyway (Note [pointwise values recomputed from saved
        ones], partition.py).
    lowering_cache: None, or an object with `load(gm, args, mode, config)` and
        `store(gm, args, mode, config, value)` (mode "training": value (Signature, Partition);
        "inference": (Signature, forward graph)): a hit skips the trace and the partition (the
        facade's warm start keeps them on disk, Note [warm start] in ember/warm_start.py).
    """

    verify: bool = False
    stateful_ops: frozenset[str] = field(default_factory=lambda: frozenset({"ember_prims::random_seed"}))
    recompute_ops: frozenset[str] = field(default_factory=frozenset)
    view_ops: frozenset[str] = field(default_factory=frozenset)
    pointwise_ops: frozenset[str] = field(default_factory=frozenset)
    recompute_pointwise: bool = True
    lowering_cache: Any = None

    def __post_init__(self):
        for name in (*self.stateful_ops, *self.recompute_ops, *self.view_ops):
            if "::" not in name:
                raise ValueError(f"op names are qualified 'namespace::name', got {name!r}")
