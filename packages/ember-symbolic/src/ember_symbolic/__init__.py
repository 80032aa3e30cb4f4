"""ember-symbolic: symbolic sizes for every layer of ember (Note [symbolic sizes] in env.py).

    >>> env = SizeEnv()
    >>> n = env.symint(8, "x.size(0)")
    >>> (n * 4 + 1).node.expr
    4*s0 + 1
"""
from ember_symbolic.__about__ import __version__
from ember_symbolic.env import SizeEnv, SizePrinter, env_of, expr_of, hint_of, is_symbolic
from ember_symbolic.graph import SIZE_OPS, SizeNodes, is_size_node
from ember_symbolic.node import SymNode
from ember_symbolic.tensors import (
    fake_with_sizes, plain_fake_mode, symbolic_dispatch, symbolic_fake_mode, symbolic_strides,
)

__all__ = [
    "SIZE_OPS", "SizeEnv", "SizeNodes", "SizePrinter", "SymNode", "__version__", "env_of", "expr_of",
    "fake_with_sizes", "hint_of", "is_size_node", "is_symbolic", "plain_fake_mode", "symbolic_dispatch",
    "symbolic_fake_mode", "symbolic_strides",
]
