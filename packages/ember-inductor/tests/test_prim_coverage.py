"""Every prim of `ember_prims.PRIMS` is lowered (or runs eagerly, with a reason) and every lowered
prim is rendered by both backends: adding a prim without its lowering and renderers fails here."""
from __future__ import annotations

import dataclasses

import pytest

import ember_prims
from ember_inductor.codegen.common import PRIM_TABLES
from ember_inductor.codegen.cpp import CppBackend
from ember_inductor.codegen.triton import TritonBackend
from ember_inductor.lowering.registry import LOWERINGS, RUNS_EAGERLY

BACKENDS = (TritonBackend, CppBackend)
# categories that lower to op kinds every backend renders (Note [prims and backends])
BY_OP_KIND = {ember_prims.CAST, ember_prims.VIEW, ember_prims.INDEXING, ember_prims.CREATION}


def gaps(prims) -> list[str]:
    """What is missing for `prims` (name -> PrimInfo): one line per missing lowering or renderer."""
    out = []
    for name, info in prims.items():
        if name in RUNS_EAGERLY:
            continue
        if name not in LOWERINGS:
            out.append(f"{name}: no lowering (register one with @lowering, or list it in RUNS_EAGERLY)")
        if info.category in BY_OP_KIND:
            continue
        for backend in BACKENDS:
            attr = PRIM_TABLES[info.category]
            if name not in getattr(backend, attr):
                out.append(f"{name}: not in {backend.__name__}.{attr}")
    return out


def test_every_prim_is_lowered_and_rendered_by_both_backends():
    assert gaps(ember_prims.PRIMS) == []


def test_tables_name_only_prims():
    assert set(RUNS_EAGERLY) <= set(ember_prims.PRIMS) and not set(RUNS_EAGERLY) & set(LOWERINGS)
    assert set(PRIM_TABLES) | BY_OP_KIND == set(ember_prims.CATEGORIES)
    for backend in BACKENDS:
        for attr in set(PRIM_TABLES.values()):
            assert set(getattr(backend, attr)) <= set(ember_prims.PRIMS), (backend.__name__, attr)


@pytest.mark.parametrize("category", sorted(PRIM_TABLES))
def test_a_new_prim_without_lowering_or_renderers_is_reported(category):
    """A prim added to PRIMS (here a copy of an existing row under a new name) is flagged."""
    some = next(info for info in ember_prims.PRIMS.values() if info.category == category)
    prims = {**ember_prims.PRIMS, "new_prim": dataclasses.replace(some, name="new_prim")}
    assert gaps(prims) == ["new_prim: no lowering (register one with @lowering, or list it in RUNS_EAGERLY)",
                           "new_prim: not in TritonBackend." + PRIM_TABLES[category],
                           "new_prim: not in CppBackend." + PRIM_TABLES[category]]
