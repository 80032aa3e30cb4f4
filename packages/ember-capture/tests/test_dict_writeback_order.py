"""The write-back of a dict from the inputs (Note [Mutated input dicts]): the statements that
`Rebuilder.dict_writeback` generates turn the real dict into the modelled one in place, keys in
the order the same changes leave them in Python, for random sequences of changes."""
import collections
import random

import pytest

from ember_capture.codegen import Rebuilder
from ember_capture.guards import Namespace
from ember_capture.variables import ConstVar, DictVar

KEYS = list("abcdefg")


def _apply_random_changes(d: dict, rng: random.Random, var_of: dict):
    """Apply random changes to the Python dict `d` and to its symbolic copy (`var_of`: key ->
    the Var of its value), as the trace would model them."""
    for _ in range(rng.randrange(0, 8)):
        op = rng.choice(["set", "del", "pop_set", "clear", "move", "update", "popitem"])
        k = rng.choice(KEYS)
        if op == "set":
            d[k] = var_of[k] = ConstVar(rng.random())
        elif op == "del" and k in d:
            del d[k]
        elif op == "pop_set" and k in d:  # deleted and set again with the same value: moves last
            v = d.pop(k)
            d[k] = v
        elif op == "clear":
            d.clear()
        elif op == "move" and k in d and isinstance(d, collections.OrderedDict):
            d.move_to_end(k, last=rng.random() < 0.5)
        elif op == "update":
            d.update({k2: ConstVar(rng.random()) for k2 in rng.sample(KEYS, 2)})
        elif op == "popitem" and d:
            d.popitem()


@pytest.mark.parametrize("cls", [dict, collections.OrderedDict])
def test_writeback_reproduces_order_and_values(cls):
    rng = random.Random(0)
    for _ in range(300):
        original = cls((k, ConstVar(i)) for i, k in enumerate(rng.sample(KEYS, rng.randrange(0, 6))))
        modelled = cls(original)
        _apply_random_changes(modelled, rng, {})
        var = DictVar(modelled, "L[0]", cls=cls)
        ns = Namespace()
        rb = Rebuilder(ns, {}, False, [id(var)])
        lines = rb.dict_writeback(var, dict(original))
        real = cls((k, v.value) for k, v in original.items())
        scope = {k: v for k, v in ns.items() if isinstance(k, str)}
        scope["L"] = [real]
        exec("\n".join(rb.prelude + lines), scope)
        assert list(real) == list(modelled), (list(original), list(modelled), lines)
        assert all(real[k] == modelled[k].value for k in real)


def test_unchanged_values_are_not_written():
    a, b = ConstVar(1), ConstVar(2)
    var = DictVar({"a": a, "b": b, "c": ConstVar(3)}, "L[0]")
    rb = Rebuilder(Namespace(), {}, False, [id(var)])
    assert rb.dict_writeback(var, {"a": a, "b": b}) == ["__t0['c'] = 3"]
    var = DictVar({"b": b, "a": a}, "L[0]")  # `a` deleted and set again: it moves after `b`
    rb = Rebuilder(Namespace(), {}, False, [id(var)])
    assert rb.dict_writeback(var, {"a": a, "b": b}) == ["del __t0['a']", "__t0['a'] = 1"]
