"""The Hugging Face zoo (tests-integration/zoo.py): each architecture, built from a small config
with random weights, equals eager through ember.compile on two calls with fresh inputs, and
captures into at most the graphs and breaks recorded in docs/capture.md (so that a regression in
coverage fails here). Slow: run with `-m slow`; skipped without transformers.

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

# (graphs, breaks) on the first call, measured with zoo.py on transformers 5.23 / torch 2.13.
EXPECTED = {name: (1, 0) for name in (
    "bert", "roberta", "distilbert", "albert", "electra", "xlm-roberta", "deberta-v2", "mobilebert", "gpt2",
    "gpt-neo", "opt", "llama", "mistral", "qwen2", "qwen3", "phi", "phi3", "gemma", "gemma2", "falcon",
    "gptj", "vit", "deit", "beit", "swin", "convnext", "resnet", "clip")}
EXPECTED.update({'bloom': (1, 3), 't5': (4, 8), 'bart': (4, 10), 'marian': (4, 10), 'whisper': (2, 9), 'wav2vec2': (3, 6)})
# BLOOM's and Whisper's breaks are inside a loop: that frame ran eagerly (its loop in one piece);
# since breaks in loops resume inside the loop, its iterations are captured piecewise: more
# graphs and breaks, fewer ops run eagerly (Note [Breaks in loops]).
EXPECTED.update({'bloom': (9, 14), 'whisper': (12, 19)})
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
    counts = []
    for want, got in run_twice(spec, lambda m: ember_capture.capture(m, lambda gm, inputs: gm.forward, stats=stats)):
        assert_equal(want, got, TOL["eager"])
        counts = counts or [len(stats.graphs), len(stats.breaks)]
    max_graphs, max_breaks = EXPECTED[spec.name]
    assert counts[0] <= max_graphs and counts[1] <= max_breaks, (counts, stats.breaks)


@pytest.mark.parametrize("name", ["bert", "llama", "t5", "vit", "deit", "convnext", "beit", "swin", "clip", "resnet"])
def test_zoo_equals_eager_inductor(name):
    spec = next(s for s in zoo.SPECS if s.name == name)
    for want, got in run_twice(spec, ember.compile):
        assert_equal(want, got, TOL["inductor"])
