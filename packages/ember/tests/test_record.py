"""Note [compile record]: each layer's passes per graph, with seconds and artifacts."""
import pytest
import torch

import ember
from ember.errors import InvalidArgument
from ember.record import CompileRecord


def step(x, w):
    return torch.tanh(x @ w).sum()


def test_record_orders_and_sums_steps():
    record = CompileRecord()
    assert record.new_graph("gm0") == 0 and record.new_graph("gm1") == 1
    record.add(0, "autograd", "fw_compile", 0.5)
    record.add_timings(0, "autograd", {"trace": 0.25, "partition": 0.125}, at=1)
    assert [(s.graph, s.stage) for s in record.steps] == [
        (0, "graph"), (0, "trace"), (0, "partition"), (1, "graph"), (0, "fw_compile")]
    assert record.seconds("autograd") == 0.875 and record.seconds("autograd", "trace") == 0.25
    assert "2 graph(s)" in str(record) and "250.00 ms" in str(record)


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_compile_record_of_a_training_step(backend):
    compiled = ember.compile(step, backend=backend)
    record = ember.compile_record(compiled)
    assert record.steps == []  # nothing compiled before the first call
    x, w = torch.randn(4, 5), torch.randn(5, 3, requires_grad=True)
    compiled(x, w).backward()
    stages = [(s.layer, s.stage) for s in record.steps]
    assert stages[0] == ("capture", "graph") and ("backend", f"compile ({backend})") in stages
    if backend != "eager":
        assert ("autograd", "trace") in stages and ("autograd", "backward_compile") in stages
    if backend == "inductor":
        assert {("inductor", p) for p in ("lower", "fuse", "plan_buffers", "render", "build")} <= set(stages)
        assert all(s.seconds >= 0 for s in record.steps if s.layer == "inductor")
    w2 = w.detach().clone().requires_grad_()
    step(x, w2).backward()
    torch.testing.assert_close(w.grad, w2.grad, rtol=1e-4, atol=1e-5)


def test_compile_record_of_a_module_and_explain_prints_it():
    model = torch.nn.Linear(3, 2)
    compiled = ember.compile(model, backend="aot_eager")
    compiled(torch.randn(2, 3))
    assert ember.compile_record(compiled).graphs == 1
    report = ember.explain(step, backend="aot_eager")(torch.randn(4, 5), torch.randn(5, 3))
    assert report.graph_count == 1 and report.compile_record.graphs == 1
    assert "Compile record: 1 graph(s)" in str(report) and "forward_compile" in str(report)
    with pytest.raises(InvalidArgument, match="not made by ember.compile"):
        ember.compile_record(step)
