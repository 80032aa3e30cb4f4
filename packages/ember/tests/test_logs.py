"""EMBER_LOGS through ember.compile: what each log prints, under ember's names and TORCH_LOGS'."""
import pytest
import torch

import ember


def scale(x, n):
    return torch.sin(x) * n


@pytest.mark.parametrize("backend", ["inductor", "eager"])
def test_recompiles_log_names_the_failed_guard(fresh_ember, monkeypatch, capsys, backend):
    monkeypatch.setenv("EMBER_LOGS", "recompiles")
    f = ember.compile(scale, backend=backend)
    x = torch.randn(8)
    torch.testing.assert_close(f(x, 2), scale(x, 2))
    x64 = torch.randn(8, dtype=torch.float64)
    torch.testing.assert_close(f(x64, 2), scale(x64, 2))  # a new dtype: a recompile, still right
    err = capsys.readouterr().err
    assert f"[ember:recompiles] recompiling scale ({__file__}:" in err
    assert "guard failed: L['x'].dtype is torch.float32 (got torch.float64)" in err
    torch.testing.assert_close(f(x64, 2), scale(x64, 2))  # a hit: nothing printed
    assert capsys.readouterr().err == ""


def test_no_log_no_output(fresh_ember, monkeypatch, capsys):
    monkeypatch.delenv("EMBER_LOGS", raising=False)
    f = ember.compile(scale, backend="eager")
    f(torch.randn(8), 2)
    f(torch.randn(8, dtype=torch.float64), 2)
    assert capsys.readouterr().err == ""


def test_graph_code_and_aot_graphs(fresh_ember, monkeypatch, capsys):
    monkeypatch.setenv("EMBER_LOGS", "graph_code,aot_graphs")
    f = ember.compile(scale, backend="aot_eager")
    x = torch.randn(8, requires_grad=True)
    f(x, 3).sum().backward()
    torch.testing.assert_close(x.grad, 3 * torch.cos(x.detach()))
    err = capsys.readouterr().err
    assert "[ember:graph] graph of scale" in err and "torch.sin" in err  # the captured FX graph
    assert "[ember:aot_graphs] forward graph of scale" in err
    assert "[ember:aot_graphs] backward graph of scale" in err and "aten.cos" in err


def test_output_code(fresh_ember, monkeypatch, capsys):
    monkeypatch.setenv("EMBER_LOGS", "output_code")
    f = ember.compile(scale)
    x = torch.randn(8)
    torch.testing.assert_close(f(x, 2), scale(x, 2))
    assert "ember_inductor output code" in capsys.readouterr().err


def test_unknown_log_name_raises_at_compile(monkeypatch):
    monkeypatch.setenv("EMBER_LOGS", "recompile")
    with pytest.raises(ember.InvalidArgument, match="valid: .*recompiles"):
        ember.compile(scale)
