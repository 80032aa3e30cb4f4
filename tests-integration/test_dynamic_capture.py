"""Dynamic shapes through ember.compile (issue #18): the policies, mark_dynamic/mark_static, int
inputs, formatting, logs and explain, with backend="eager", a counting backend, aot_eager and
the default backend (inductor), each compared with eager on sizes the first compile did not see.

Until ember_autograd and ember_inductor compile symbolic graphs, the compositions built on
ember_autograd take static graphs (Note [static graphs for ember_autograd] in
ember/backends.py): for them the counts below follow AOT_TAKES_SYMBOLIC_SIZES.
"""
from __future__ import annotations

import pytest
import torch
from ember_symbolic import is_symbolic

import ember
from ember.backends import AOT_TAKES_SYMBOLIC_SIZES

BATCHES = (3, 4, 6, 9, 12, 17)


def graphs_of(compiled):
    return ember.compile_record(compiled).capture.graphs


def symbolic_inputs(gm):
    names = []
    for n in gm.graph.nodes:
        if n.op == "placeholder":
            v = n.meta["example_value"]
            if any(is_symbolic(s) for s in (v.shape if isinstance(v, torch.Tensor) else [v])):
                names.append(n.name)
    return names


def head(x, w):
    n = x.shape[0]
    h = torch.tanh(x @ w).reshape(n, 2, -1)
    return h.sum(1) * n, n + 1


def call_all(compiled, fn, inputs):
    for args in inputs:
        out, expected = compiled(*args), fn(*args)
        torch.testing.assert_close(out, expected)


@pytest.mark.parametrize("dynamic,compiles", [(None, 2), (True, 1), (False, len(BATCHES))])
def test_eager_backend_compile_counts(dynamic, compiles):
    w = torch.randn(5, 8)
    compiled = ember.compile(head, backend="eager", dynamic=dynamic)
    call_all(compiled, head, [(torch.randn(b, 5), w) for b in BATCHES])
    call_all(compiled, head, [(torch.randn(b, 5), w) for b in (5, 21)])  # sizes not seen yet
    expected = compiles if dynamic is not False else len(BATCHES) + 2
    assert len(graphs_of(compiled)) == expected


def test_counting_backend_receives_symbolic_graphs():
    got = []

    def counting(gm, example_inputs):
        got.append((gm, example_inputs))
        return gm.forward

    w = torch.randn(5, 8)
    compiled = ember.compile(head, backend=counting)
    call_all(compiled, head, [(torch.randn(b, 5), w) for b in BATCHES])
    assert len(got) == 2
    gm, example_inputs = got[1]
    assert symbolic_inputs(gm) == ["x"]
    assert all(isinstance(x, torch.Tensor) for x in example_inputs)  # real tensors, as always
    assert torch.ops.aten.sym_size.int in {n.target for n in gm.graph.nodes}


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize("dynamic", [None, True])
def test_autograd_backends_correct_on_every_size(backend, dynamic):
    w = torch.randn(5, 8)
    compiled = ember.compile(head, backend=backend, dynamic=dynamic)
    call_all(compiled, head, [(torch.randn(b, 5), w) for b in BATCHES[:4]])
    graphs = graphs_of(compiled)
    if AOT_TAKES_SYMBOLIC_SIZES:
        assert len(graphs) <= 2
    else:  # the static fallback: one static graph per shape
        assert len(graphs) == 4 and all(symbolic_inputs(gm) == [] for gm in graphs)


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_formatting_a_dynamic_size(backend):
    def f(x):
        return x * 2, f"{x.shape[0]:03d}", "n=%d" % len(x), str(x.size(0))

    compiled = ember.compile(f, backend=backend, dynamic=True)
    for b in (4, 7, 4, 10):
        x = torch.randn(b, 3)
        out, expected = compiled(x), f(x)
        torch.testing.assert_close(out[0], expected[0])
        assert out[1:] == expected[1:]


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_size_arithmetic_into_view_reshape_and_a_branch(backend):
    def f(x):
        b, t, c = x.shape
        y = x.view(b * t, c).reshape(-1, 2, c // 2)
        if b * t > 20:
            y = y * 2
        return y.sum(0) + torch.arange(c // 2, dtype=x.dtype), y.new_zeros((b, t)).shape[0]

    compiled = ember.compile(f, backend=backend, dynamic=True)
    for b, t in ((2, 3), (3, 4), (4, 6), (5, 3), (2, 2)):
        x = torch.randn(b, t, 6)
        out, expected = compiled(x), f(x)
        torch.testing.assert_close(out[0], expected[0])
        assert out[1] == expected[1]
    if backend == "eager":  # the branch on b * t > 20 flips once
        assert len(graphs_of(compiled)) == 2


def test_mark_dynamic_and_mark_static():
    def f(x):
        return x.cumsum(0) / x.shape[0]

    compiled = ember.compile(f, backend="eager", dynamic=False)
    xs = [torch.randn(b, 3) for b in (4, 6, 9)]
    ember.mark_dynamic(xs[0], 0)
    call_all(compiled, f, [(x,) for x in xs])
    assert len(graphs_of(compiled)) == 1

    compiled = ember.compile(f, backend="eager", dynamic=True)
    ys = [torch.randn(b, 3) for b in (4, 6, 9)]
    for y in ys:
        ember.mark_static(y, 0)
    call_all(compiled, f, [(y,) for y in ys])
    assert len(graphs_of(compiled)) == 3
    with pytest.raises(ember.InvalidArgument):
        ember.mark_dynamic(torch.randn(3), 2)


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_a_step_counter(backend):
    def f(x, step):
        return x * (step % 7) + step // 3

    compiled = ember.compile(f, backend=backend)
    x = torch.randn(4)
    for step in range(2, 9):
        torch.testing.assert_close(compiled(x, step), f(x, step))
    expected = 2 if backend == "eager" or AOT_TAKES_SYMBOLIC_SIZES else 7
    assert len(graphs_of(compiled)) == expected


def test_recompiles_log_names_the_dimension(monkeypatch, capsys):
    monkeypatch.setenv("EMBER_LOGS", "recompiles")
    compiled = ember.compile(head, backend="eager")
    w = torch.randn(5, 8)
    call_all(compiled, head, [(torch.randn(b, 5), w) for b in (3, 4, 5)])
    err = capsys.readouterr().err
    assert "x.size(0) became dynamic" in err


def test_explain_says_which_inputs_are_dynamic():
    report = ember.explain(head, dynamic=True)(torch.randn(4, 5), torch.randn(5, 8))
    assert report.dynamic_inputs == [["x.size(0) (s0)", "x.size(1) (s1)", "w.size(0) (s2)", "w.size(1) (s3)"]]
    assert "Dynamic inputs of graph 1" in str(report)


def test_transformer_inference_over_sequence_lengths_and_batches():
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval()
    compiled = ember.compile(model, backend="eager")
    with torch.no_grad():
        for b, t in ((1, 7), (2, 16), (3, 33), (5, 64), (8, 100), (4, 128)):
            x = torch.randn(b, t, 16)
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-5)
    assert len(graphs_of(compiled)) <= 2


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_training_step_with_a_varying_batch(backend):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    reference = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    reference.load_state_dict(model.state_dict())

    def step(m, opt, x, y):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(m(x).squeeze(-1), y) * x.shape[0]
        loss.backward()
        opt.step()
        return loss

    compiled_model = ember.compile(model, backend=backend)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.01)
    for b in (4, 7, 10):
        x, y = torch.randn(b, 6), torch.randn(b)
        torch.testing.assert_close(step(compiled_model, opt, x, y), step(reference, ref_opt, x, y))
    for p, q in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(p, q)
    if backend == "eager":
        assert len(graphs_of(compiled_model)) <= 2


def test_hugging_face_bert_over_sequence_lengths_and_batches():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                                  hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = transformers.BertModel(cfg).eval()
    compiled = ember.compile(model, backend="eager")
    with torch.no_grad():
        for b, t in ((1, 7), (2, 16), (3, 33), (5, 64), (8, 100), (4, 128)):
            ids = torch.randint(0, cfg.vocab_size, (b, t))
            torch.testing.assert_close(compiled(input_ids=ids).last_hidden_state,
                                       model(input_ids=ids).last_hidden_state, rtol=1e-4, atol=1e-4)
    assert len(graphs_of(compiled)) <= 2
