"""torch.compile's documented options and modes through `ember.compile` (issue 19): each is
accepted with its meaning, validated, and has its effect; compared against eager on CPU."""
from __future__ import annotations

import glob
import logging
import re
import warnings

import pytest
import torch
import torch.nn as nn

import ember

# The options dict as the documents write it (every option they name, torch's spellings).
DOCUMENTED_OPTIONS = {
    "epilogue_fusion": True,
    "max_autotune": True,
    "fallback_random": True,
    "shape_padding": True,
    "triton.cudagraphs": True,
    "trace.enabled": True,
    "trace.graph_diagram": True,
}


def mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 64))


def test_documented_options_dict_compiles_the_mlp(tmp_path):
    model = mlp()
    options = {**DOCUMENTED_OPTIONS, "trace.dir": str(tmp_path)}
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*CUDA graphs.*need a CUDA device")
        compiled = ember.compile(model, options=options)
    with torch.no_grad():
        for batch in (torch.randn(32, 64), torch.randn(32, 64)):  # second call: new inputs
            torch.testing.assert_close(compiled(batch), model(batch))
    assert glob.glob(str(tmp_path / "*" / "graph_diagram.svg"))


@pytest.mark.parametrize("mode", ["max-autotune", "max-autotune-no-cudagraphs"])
def test_max_autotune_modes_run_on_cpu_and_say_so(mode, caplog):
    model = mlp()
    import ember_inductor.compile as inductor_compile
    inductor_compile._SAID_CPU_AUTOTUNE[0] = False
    with warnings.catch_warnings(), caplog.at_level(logging.INFO, logger="ember_inductor"):
        warnings.filterwarnings("ignore", message=".*CUDA graphs.*need a CUDA device")
        compiled = ember.compile(model, mode=mode)
        x = torch.randn(8, 64)
        with torch.no_grad():
            torch.testing.assert_close(compiled(x), model(x))
            torch.testing.assert_close(compiled(x + 1), model(x + 1))
    said = [r.getMessage() for r in caplog.records if "max_autotune" in r.getMessage()]
    assert len(said) == 1 and "C++ (CPU) backend" in said[0]


@pytest.mark.parametrize("name", ["epilogue_fusion", "max_autotune", "fallback_random", "shape_padding",
                                  "triton.cudagraphs", "trace.enabled", "trace.graph_diagram",
                                  "max_autotune_gemm"])
def test_wrong_type_names_option_and_valid_values(name):
    with pytest.raises(ember.InvalidArgument, match=rf"{re.escape(repr(name.replace('max_autotune_gemm', 'max_autotune').replace('triton.cudagraphs', 'cudagraphs')))}.*True or False.*'yes'"):
        ember.compile(mlp(), options={name: "yes"})


def dropout_fn(x):
    return nn.functional.dropout(x * 2, p=0.3, training=True) + 1


@pytest.mark.parametrize("backend", ["inductor", "eager"])
def test_fallback_random_dropout_draws_eagers_numbers(backend):
    options = {"fallback_random": True} if backend == "inductor" else None
    compiled = ember.compile(dropout_fn, backend=backend, options=options)
    for seed in (5, 6):  # the second call runs the cached graph
        x = torch.randn(64, 33, requires_grad=True)
        torch.manual_seed(seed)
        ref = dropout_fn(x)
        ref.sum().backward()
        ref_grad, x.grad = x.grad, None
        torch.manual_seed(seed)
        out = compiled(x)
        out.sum().backward()
        assert torch.equal(out, ref)
        assert torch.equal(x.grad, ref_grad)


def test_without_fallback_random_dropout_uses_ember_numbers():
    # the contrast: by default ember draws its own (Philox) numbers, so the mask differs
    compiled = ember.compile(dropout_fn)
    x = torch.randn(64, 33)
    torch.manual_seed(5)
    ref = dropout_fn(x)
    torch.manual_seed(5)
    assert not torch.equal(compiled(x), ref)


@pytest.mark.parametrize("backend", ["inductor", "eager"])
def test_shape_padding_1023_matmul_equals_eager(backend, tmp_path):
    options = {"shape_padding": True, "trace.enabled": True, "trace.dir": str(tmp_path)} \
        if backend == "inductor" else None
    compiled = ember.compile(lambda a, b: torch.relu(a @ b), backend=backend, options=options)
    for _ in range(2):
        a, b = torch.randn(1023, 1023), torch.randn(1023, 1023)
        torch.testing.assert_close(compiled(a, b), torch.relu(a @ b), rtol=1e-4, atol=1e-4)
    if backend == "inductor":  # the product ran on padded operands and was sliced back
        [wrapper] = glob.glob(str(tmp_path / "*" / "wrapper.py"))
        source = open(wrapper).read()
        assert "(1024, 1024)" in source and "(1023, 1023)" in source


@pytest.mark.parametrize("backend", ["inductor", "eager"])
def test_max_autotune_triton_templates_train_an_mlp_under_the_interpreter(backend):
    # the GPU path (GEMM templates with fused epilogues, forward and backward) run by Triton's
    # interpreter on CPU tensors
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 8))
    options = {"backend": "triton", "max_autotune": True} if backend == "inductor" else None
    compiled = ember.compile(model, backend=backend, options=options)
    for _ in range(2):
        x = torch.randn(12, 16)
        compiled(x).square().sum().backward()
        got = [p.grad.clone() for p in model.parameters()]
        model.zero_grad()
        model(x).square().sum().backward()
        for g, p in zip(got, model.parameters()):
            torch.testing.assert_close(g, p.grad, rtol=1e-4, atol=1e-4)
        model.zero_grad()


@pytest.mark.gpu
def test_documented_options_dict_compiles_the_mlp_gpu(tmp_path):
    model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 256)).cuda()
    compiled = ember.compile(model, options={**DOCUMENTED_OPTIONS, "trace.dir": str(tmp_path)})
    with torch.no_grad():
        for _ in range(3):  # CUDA graphs: run, record, replay
            x = torch.randn(64, 256, device="cuda")
            torch.testing.assert_close(compiled(x).clone(), model(x), rtol=1e-4, atol=1e-4)
    assert glob.glob(str(tmp_path / "*" / "graph_diagram.svg"))


@pytest.mark.gpu
def test_fallback_random_dropout_draws_eagers_numbers_gpu():
    compiled = ember.compile(dropout_fn, options={"fallback_random": True})
    for seed in (5, 6):
        x = torch.randn(64, 33, device="cuda")
        torch.manual_seed(seed)
        ref = dropout_fn(x)
        torch.manual_seed(seed)
        assert torch.equal(compiled(x), ref)


def test_graph_diagram_names_every_kernel(tmp_path):
    """trace.graph_diagram draws each compiled graph (forward and backward of the MLP) after
    fusion: every kernel and extern call the wrapper launches is a box in the .dot and named in
    the .svg."""
    model = mlp()
    compiled = ember.compile(model, options={"trace.enabled": True, "trace.graph_diagram": True,
                                             "trace.dir": str(tmp_path)})
    compiled(torch.randn(8, 64, requires_grad=True)).sum().backward()
    folders = sorted(glob.glob(str(tmp_path / "*" / "wrapper.py")))
    assert len(folders) == 2  # forward, backward
    for wrapper in folders:
        folder = wrapper.rsplit("/", 1)[0]
        launched = set(re.findall(r"\b((?:kernel|combo)\d+)(?:_c)?\(", open(wrapper).read()))
        assert launched, open(wrapper).read()
        dot, svg = open(f"{folder}/graph_diagram.dot").read(), open(f"{folder}/graph_diagram.svg").read()
        boxes = set(re.findall(r"^\s*(\w+) \[shape=box", dot, re.M))
        assert launched <= boxes, (launched - boxes, dot)
        for name in boxes:
            assert re.search(rf">\s*{name}\s*<", svg), f"{name} not named in the svg"
