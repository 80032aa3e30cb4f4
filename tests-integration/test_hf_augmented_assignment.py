"""Hugging Face models whose code does `x = 0; x += tensor` (T5's and MPNet's relative position
buckets): ember generated `0 += mul` for them and raised SyntaxError to the user (issue 13).
Small configs, random weights, eval mode; two calls with fresh inputs against eager.

float32 tolerances: eager backend rtol=1e-5, atol=1e-5; inductor rtol=1e-3, atol=1e-4.
"""
import pytest
import torch

import ember

TOL = {"eager": dict(rtol=1e-5, atol=1e-5), "inductor": dict(rtol=1e-3, atol=1e-4)}


def _t5(transformers):
    config = transformers.T5Config(vocab_size=100, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4,
                                   decoder_start_token_id=0, pad_token_id=0)
    model = transformers.T5ForConditionalGeneration(config)
    return model, lambda: dict(input_ids=torch.randint(0, 100, (2, 7)),
                               decoder_input_ids=torch.randint(0, 100, (2, 5)))


def _mpnet(transformers):
    config = transformers.MPNetConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                      intermediate_size=64, max_position_embeddings=64)
    return transformers.MPNetForMaskedLM(config), lambda: dict(input_ids=torch.randint(0, 100, (2, 9)))


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["eager", "inductor"])
@pytest.mark.parametrize("make", [_t5, _mpnet], ids=["t5", "mpnet"])
def test_relative_position_buckets_compile(make, backend):
    transformers = pytest.importorskip("transformers")
    model, inputs = make(transformers)
    model.eval()
    compiled = ember.compile(model, backend=backend)
    with torch.no_grad():
        for _ in range(2):
            kwargs = inputs()
            torch.testing.assert_close(compiled(**kwargs).logits, model(**kwargs).logits, **TOL[backend])


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_t5_relative_position_bucket(backend):
    # the function itself: in T5's full model it is reached only once T5Stack.forward is captured
    t5 = pytest.importorskip("transformers.models.t5.modeling_t5")
    fn = t5.T5Attention._relative_position_bucket
    compiled = ember.compile(fn, backend=backend)
    for n in (7, 9):
        position = torch.arange(n)[None, :] - torch.arange(n)[:, None]
        torch.testing.assert_close(compiled(position, True, 32, 128), fn(position, True, 32, 128))
