"""ember.backends: the registry of named backends and what build_compiler makes of a backend."""
import importlib
import importlib.metadata
import pathlib
import tomllib

import pytest
import torch

import ember
from ember import backends
from ember.backends import AotComposition, build_compiler, list_backends, lookup, register_backend
from ember.errors import BackendUnavailable, InvalidArgument
from ember.settings import make_settings


def settings(name="eager", options=None):
    return make_settings(backend_name=name, fullgraph=False, dynamic=None, mode=None, options=options, env={})


def traced(fn):
    gm = torch.fx.symbolic_trace(fn)
    for node in gm.graph.nodes:  # what capture writes: the user's line on every op
        node.meta["stack_trace"] = '  File "user.py", line 7, in fn\n    y = x.sin()\n'
    return gm


def test_builtin_backends_are_registered_with_docs():
    for name in ("eager", "aot_eager", "inductor", "cudagraphs"):
        assert backends._REGISTRY[name].doc
    assert {"eager", "aot_eager", "inductor"} <= set(list_backends())
    assert list_backends() == sorted(list_backends())


def test_register_backend_as_decorator_and_call():
    @register_backend("test_backends_double")
    def double(gm, example_inputs):
        return lambda *args: tuple(2 * o for o in gm(*args))

    assert "test_backends_double" in list_backends()
    assert lookup("test_backends_double").build(settings()) is double
    with pytest.raises(InvalidArgument, match="exists already"):
        register_backend("test_backends_double", double)
    with pytest.raises(InvalidArgument, match="non-empty string"):
        register_backend("", double)
    with pytest.raises(InvalidArgument, match="not callable"):
        register_backend("test_backends_nothing", 3)


def test_lookup_names_the_valid_backends():
    with pytest.raises(InvalidArgument, match=r"unknown backend 'nope'.*'eager'"):
        lookup("nope")


@pytest.mark.skipif(torch.cuda.is_available(), reason="cudagraphs is available on a CUDA machine")
def test_unavailable_backend_says_why():
    assert "cudagraphs" not in list_backends()
    with pytest.raises(BackendUnavailable, match="no CUDA device"):
        lookup("cudagraphs")


def test_options_only_for_backends_that_take_them():
    with pytest.raises(InvalidArgument, match="takes no options"):
        build_compiler("eager", settings(options={"max_fusion_size": 8}))
    with pytest.raises(InvalidArgument, match="custom backend callable takes none"):
        build_compiler(lambda gm, ex: gm.forward, settings(options={"max_fusion_size": 8}))
    build_compiler("eager", settings(options={"check": True}))  # facade switches: any backend


def test_build_compiler_runs_the_graph():
    gm = traced(lambda x: (x.sin() * 2,))
    x = torch.randn(4)
    for name in ("eager", "aot_eager"):
        torch.testing.assert_close(build_compiler(name, settings(name))(gm, [x])(x)[0], x.sin() * 2)


def test_aot_composition_is_named_and_follows_the_backend_protocol():
    composition = AotComposition(lambda gm, ex: gm.forward, name="mine")
    assert composition.__name__ == "mine" and lookup("aot_eager").build(settings()).__name__ == "aot_eager"
    gm = traced(lambda x: (x.sin() * 2,))
    x = torch.randn(4, requires_grad=True)
    out = composition(gm, [x])(x)[0]  # called as torch.compile calls a backend
    out.sum().backward()
    torch.testing.assert_close(x.grad, 2 * x.detach().cos())


def test_entry_points_for_torch_compile():
    gm = traced(lambda x: (x.sin() * 2,))
    x = torch.randn(4)
    for fn in (backends.eager, backends.aot_eager):
        torch.testing.assert_close(fn(gm, [x])(x)[0], x.sin() * 2)


PYPROJECT = pathlib.Path(__file__).resolve().parents[1] / "pyproject.toml"


def test_pyproject_registers_ember_for_torch_compile():
    entry_points = tomllib.loads(PYPROJECT.read_text())["project"]["entry-points"]["torch_dynamo_backends"]
    assert entry_points["ember"] == "ember.backends:inductor"
    for name, target in entry_points.items():  # each names a function of the facade
        module, _, attr = target.partition(":")
        assert callable(getattr(importlib.import_module(module), attr)), name


@pytest.mark.slow  # importing torch's compiler takes ~15 s
def test_torch_compile_backend_ember(fresh_ember):
    """torch.compile(model, backend="ember") finds ember through its installed entry point."""
    installed = importlib.metadata.entry_points(group="torch_dynamo_backends")
    if "ember" not in installed.names:
        pytest.skip("the installed ember predates its 'ember' entry point: reinstall it "
                    "(pip install -e packages/ember)")
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU())
    try:
        compiled = torch.compile(model, backend="ember", dynamic=False)
        for batch in (4, 4, 6):  # a second call, and a new shape
            x = torch.randn(batch, 8)
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-5)
        # By default torch.compile makes the graph dynamic after a shape changes: ember, which
        # specializes shapes, runs that graph as captured, with one warning naming the reason.
        torch._dynamo.reset()
        compiled = torch.compile(model, backend="ember")
        with pytest.warns(UserWarning, match="SymInt"):
            for batch in (4, 6, 7):
                x = torch.randn(batch, 8)
                torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-5)
    finally:
        torch._dynamo.reset()


def test_cli_lists_backends(capsys):
    from ember.cli import main
    assert main(["backends"]) == 0
    out = capsys.readouterr().out
    assert "eager" in out and "available" in out
    assert main([]) == 0 and ember.__version__ in capsys.readouterr().out
