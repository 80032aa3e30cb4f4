"""Note [one failure path] (ember/fallback.py): whatever stage of a backend fails (forward compile,
backward compile at the first loss.backward(), first call of a compiled forward or backward, a
lazy compile for a grad mode met later), the result is eager's, with one warning that points at
the user's line; under fullgraph=True, an error naming the user's function, file and line."""
import dataclasses
import warnings

import pytest
import torch

import ember
from ember.backends import AotComposition, lookup
from ember.settings import make_settings


def step(x, w):
    h = torch.tanh(x @ w)  # the line warnings point at: the graph's first operation
    return (h * h).sum() + x.sin().mean()


STEP_LINE = step.__code__.co_firstlineno + 1


def inductor_composition(cache_dir, **options) -> AotComposition:
    settings = make_settings(backend_name="inductor", fullgraph=False, dynamic=None, mode=None,
                             options=options, env={"EMBER_CACHE_DIR": str(cache_dir)})
    return lookup("inductor").build(settings)


def failing_compiler(gm, example_inputs):
    raise RuntimeError("this compiler always fails")


def failing_at_first_call(gm, example_inputs):
    def run(*args):
        raise RuntimeError("this graph fails when run")
    return run


def inputs(seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(4, 5, generator=g), torch.randn(5, 3, generator=g)


def check_training(compiled, seeds=(0, 1)):
    """Loss and gradients equal eager's on two calls with new inputs; returns the warnings."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for seed in seeds:
            x, w = inputs(seed)
            w_c, w_e = w.clone().requires_grad_(), w.clone().requires_grad_()
            loss_c = compiled(x, w_c)
            loss_c.backward()
            loss_e = step(x, w_e)
            loss_e.backward()
            torch.testing.assert_close(loss_c, loss_e)
            torch.testing.assert_close(w_c.grad, w_e.grad)
    return [w for w in caught if "ember" in str(w.message)]


def assert_one_warning_at_user_line(caught, stage):
    assert len(caught) == 1, [str(w.message) for w in caught]
    (w,) = caught
    assert stage in str(w.message) and "runs eagerly" in str(w.message)
    assert (w.filename, w.lineno) == (__file__, STEP_LINE), (w.filename, w.lineno)


@pytest.mark.skipif("inductor" not in ember.list_backends(), reason="the inductor layer is not here")
def test_inductor_backward_compile_failure_falls_back_after_compiled_forward(tmp_path):
    good = inductor_composition(tmp_path / "good")
    # a real failure of the inductor on the backward graph only: its C++ compiler does not exist
    bad = inductor_composition(tmp_path / "bad", cpp_compiler=str(tmp_path / "no-such-compiler"))
    backend = dataclasses.replace(good, bw_compiler=bad.fw_compiler)
    caught = check_training(ember.compile(step, backend=backend))
    assert_one_warning_at_user_line(caught, "backward compile")


@pytest.mark.parametrize("where", ["fw", "bw"])
@pytest.mark.parametrize("how", [failing_compiler, failing_at_first_call], ids=["compile", "first_call"])
def test_forward_or_backward_failure_falls_back(where, how):
    eager = lambda gm, example_inputs: gm.forward  # noqa: E731
    backend = AotComposition(how, eager) if where == "fw" else AotComposition(eager, how)
    caught = check_training(ember.compile(step, backend=backend))
    stage = {"fw": "forward", "bw": "backward"}[where]
    assert_one_warning_at_user_line(caught, "compile" if how is failing_compiler else f"first call of the compiled {stage}")


def test_inference_after_training_failure_falls_back():
    # the inference graph is traced and compiled at the first call under no_grad, long after
    # capture handed the graph over; a failure there falls back too
    fails_in_inference = []

    def fw(gm, example_inputs):
        if not any(n.name.startswith("tangents") for n in gm.graph.nodes) and \
                not gm.graph.output_node().meta.get("ember_saved_outputs"):
            fails_in_inference.append(gm)
            raise RuntimeError("no inference graphs")
        return gm.forward

    compiled = ember.compile(step, backend=AotComposition(fw))
    assert check_training(compiled) == []
    x, w = inputs(2)
    with warnings.catch_warnings(record=True) as caught, torch.no_grad():
        warnings.simplefilter("always")
        torch.testing.assert_close(compiled(x, w), step(x, w))
        torch.testing.assert_close(compiled(x, 2 * w), step(x, 2 * w))
    assert fails_in_inference
    assert_one_warning_at_user_line([w for w in caught if "ember" in str(w.message)], "forward compile")


def test_user_error_in_graph_is_the_users_not_a_fallback():
    def index(x, i):
        return torch.index_select(x, 0, i) * 2

    compiled = ember.compile(index, backend="aot_eager")
    x = torch.randn(3, requires_grad=True)
    compiled(x, torch.tensor([0, 1]))
    with warnings.catch_warnings(record=True) as caught, pytest.raises(IndexError):
        warnings.simplefilter("always")
        compiled(x, torch.tensor([7]))
    assert not [w for w in caught if "ember" in str(w.message)]


@pytest.mark.parametrize("where", ["fw", "bw"])
def test_fullgraph_failure_names_function_file_and_line(where):
    eager = lambda gm, example_inputs: gm.forward  # noqa: E731
    backend = AotComposition(failing_compiler, eager) if where == "fw" else AotComposition(eager, failing_compiler)
    compiled = ember.compile(step, backend=backend, fullgraph=True)
    x, w = inputs(0)
    w.requires_grad_()
    with pytest.raises(ember.BackendCompilerFailed, match=f"step .*{__file__}:{STEP_LINE}.*always fails"):
        compiled(x, w).backward()


def test_backend_failure_warning_points_at_user_line():
    def broken(gm, example_inputs):
        raise RuntimeError("this backend always fails")

    compiled = ember.compile(step, backend=broken)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        x, w = inputs(0)
        torch.testing.assert_close(compiled(x, w), step(x, w))
    assert_one_warning_at_user_line([w for w in caught if "ember" in str(w.message)], "forward compile")
