"""The Hugging Face zoo (tests-integration/zoo.py): each architecture, built from a small config
with random weights, equals eager through ember.compile on two calls with fresh inputs, and is
captured in one graph with fullgraph=True, as torch.compile captures each (docs/capture.md).
Slow: run with `-m slow`; skipped without transformers.

float32 tolerances: eager backend rtol=1e-5, atol=1e-5; inductor rtol=1e-3, atol=1e-4.
"""
import pathlib
import sys
import warnings

import pytest
import torch

import ember
import ember_capture

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import zoo  # noqa: E402

pytestmark = pytest.mark.slow

# Every architecture is one graph with no break (fullgraph=True), as with torch.compile; measured with
# zoo.py on transformers 5.23 / torch 2.13.
TOL = {"eager": dict(rtol=1e-5, atol=1e-5), "inductor": dict(rtol=1e-3, atol=1e-4)}


def run_twice(spec, compile_model):
    """(eager tensors, compiled tensors) for two calls with fresh inputs."""
    pytest.importorskip("transformers")
    model = zoo.build(spec)
    compiled = compile_model(model)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for call in range(2):
            torch.manual_seed(100 + call)
            kwargs = spec.inputs()
            yield zoo.flat_tensors(model(**kwargs)), zoo.flat_tensors(compiled(**kwargs))


def assert_equal(want, got, tol):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, **tol)


@pytest.mark.parametrize("spec", zoo.SPECS, ids=[s.name for s in zoo.SPECS])
def test_zoo_equals_eager_eager_backend(spec):
    stats = ember_capture.CaptureStats()
    config = ember_capture.CaptureConfig(fullgraph=True)
    capture = lambda m: ember_capture.capture(m, lambda gm, inputs: gm.forward, config, stats=stats)  # noqa: E731
    for want, got in run_twice(spec, capture):
        assert_equal(want, got, TOL["eager"])
    assert (len(stats.graphs), len(stats.breaks)) == (1, 0), stats.breaks


@pytest.mark.parametrize("name", ["bert", "llama", "bloom", "t5", "bart", "vit", "deit", "convnext", "beit", "swin", "clip", "resnet",
                                  "whisper", "wav2vec2"])
def test_zoo_equals_eager_inductor(name):
    spec = next(s for s in zoo.SPECS if s.name == name)
    for want, got in run_twice(spec, ember.compile):
        assert_equal(want, got, TOL["inductor"])
