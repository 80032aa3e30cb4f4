"""The DDP bucket split (Note [DDP buckets], ember/ddp.py) on one process: a captured graph cut
into one piece per bucket computes what the whole graph computes, forward and backward, and each
piece is a captured graph the backends take. The 2-process tests are tests-integration/test_distributed.py."""
import pytest
import torch

import ember
from ember.ddp import bucket_pieces, plan_pieces


class MLP(torch.nn.Module):
    def __init__(self, dim=32, depth=4):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(dim, dim) for _ in range(depth))

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x.sum(), x  # a scalar and an activation out


def _captured(model, x):
    graphs = []

    def keep(gm, example_inputs):
        graphs.append((gm, example_inputs))
        return gm.forward

    ember.compile(model, backend=keep)(x)
    (gm, example_inputs), = graphs
    return gm, example_inputs


def _layer_bytes(model):
    layer = model.layers[0]
    return sum(p.numel() * p.element_size() for p in layer.parameters())


@pytest.mark.parametrize("layers_per_bucket, pieces", [(1, 4), (2, 2), (4, 1), (100, 1)])
def test_one_piece_per_bucket(fresh_ember, layers_per_bucket, pieces):
    model, x = MLP(), torch.randn(3, 32)
    gm, example_inputs = _captured(model, x)
    params = {id(p): p.numel() * p.element_size() for p in model.parameters()}
    cap = layers_per_bucket * _layer_bytes(model)
    assert len(bucket_pieces(gm, example_inputs, params, [cap])) == pieces


def test_a_smaller_first_bucket(fresh_ember):
    model, x = MLP(), torch.randn(3, 32)
    gm, example_inputs = _captured(model, x)
    params = {id(p): p.numel() * p.element_size() for p in model.parameters()}
    # the first bucket (the last layer) holds one layer, the next ones three
    assert len(bucket_pieces(gm, example_inputs, params, [_layer_bytes(model), 3 * _layer_bytes(model)])) == 2


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_pieces_compute_the_whole_graph_forward_and_backward(fresh_ember, backend):
    model, x = MLP(), torch.randn(3, 32)
    gm, example_inputs = _captured(model, x)
    params = {id(p): p.numel() * p.element_size() for p in model.parameters()}
    pieces = bucket_pieces(gm, example_inputs, params, [_layer_bytes(model)])
    plan = plan_pieces(gm, pieces)
    compiled = [ember.compile(p.gm, backend=backend) for p in plan.pieces]
    run = plan.runner(compiled)
    for step in range(2):  # the second call: new inputs
        x = torch.randn(3, 32)
        args = [x if i == 0 else a for i, a in enumerate(example_inputs)]
        total, act = run(*args)
        want_total, want_act = model(x)
        torch.testing.assert_close(act, want_act)
        got = torch.autograd.grad(total, list(model.parameters()))
        want = torch.autograd.grad(want_total, list(model.parameters()))
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-5)


def test_each_piece_is_a_captured_graph(fresh_ember):
    model, x = MLP(), torch.randn(3, 32)
    gm, example_inputs = _captured(model, x)
    params = {id(p): p.numel() * p.element_size() for p in model.parameters()}
    plan = plan_pieces(gm, bucket_pieces(gm, example_inputs, params, [_layer_bytes(model)]))
    for piece, inputs in zip(plan.pieces, plan.example_inputs(example_inputs)):
        placeholders = [n for n in piece.gm.graph.nodes if n.op == "placeholder"]
        assert len(placeholders) == len(inputs)
        for node, value in zip(placeholders, inputs):
            assert "example_value" in node.meta
            assert tuple(node.meta["example_value"].shape) == tuple(value.shape)
        out = piece.gm(*inputs)
        assert isinstance(out, tuple)
