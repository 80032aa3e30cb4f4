"""ember_autograd.trees.tree_map is torch's pytree.tree_map, fast on plain containers."""
import collections

import torch
from torch.utils import _pytree as pytree

from ember_autograd.trees import tree_map

Pair = collections.namedtuple("Pair", "a b")


def _double(x):
    return x * 2 if isinstance(x, (int, torch.Tensor)) and not isinstance(x, bool) else x


def test_tree_map_agrees_with_pytree_on_op_arguments():
    t = torch.ones(2)
    trees = [
        ((t, 3, [1, 2]), {"dim": 0, "keepdim": True}),
        ((t, None, (4, [t, 5.0])), {}),
        (t, Pair(1, [t]), collections.OrderedDict(x=2), torch.fx.immutable_collections.immutable_list([3])),
        [],
        (),
        7,
    ]
    for tree in trees:
        ours, theirs = tree_map(_double, tree), pytree.tree_map(_double, tree)
        assert pytree.tree_structure(ours) == pytree.tree_structure(theirs)
        for a, b in zip(pytree.tree_leaves(ours), pytree.tree_leaves(theirs)):
            assert type(a) is type(b)
            assert torch.equal(a, b) if isinstance(a, torch.Tensor) else a == b
    assert type(tree_map(_double, Pair(1, 2))) is Pair
