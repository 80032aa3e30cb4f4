"""The one helper behind every rule table: ``@registrar(TABLE)(key, ...)`` fills a dict."""
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
