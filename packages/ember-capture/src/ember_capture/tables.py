"""The helpers behind every rule table: ``@registrar(TABLE)(key, ...)`` fills a dict, and a
``TypeTable`` is a dict keyed by class that is looked up along a class's MRO."""
from __future__ import annotations


def registrar(table: dict):
    """Return a decorator factory that registers a function under one or more keys."""
    def register(*keys):
        def deco(fn):
            for k in keys:
                table[k] = fn
            return fn
        return deco
    return register


class TypeTable(dict):
    """Rules keyed by class: ``find(cls)`` is the rule of ``cls`` or of its nearest base (as an
    attribute is found along the MRO), cached per class."""

    def __init__(self):
        super().__init__()
        self.resolved: dict = {}  # class -> rule, along its MRO (cleared when a rule is added)

    def __setitem__(self, cls, rule):
        super().__setitem__(cls, rule)
        self.resolved.clear()

    def register(self, *types):
        """Decorator: the rule for ``types`` (and their subclasses)."""
        def deco(fn):
            for t in types:
                self[t] = fn
            return fn
        return deco

    def find(self, cls, default=None):
        rule = self.resolved.get(cls)
        if rule is None:
            rule = next((self[k] for k in cls.__mro__ if k in self), default)
            self.resolved[cls] = rule
        return rule
