"""A zoo of Hugging Face architectures from small configs: how much of each ember captures.

    python tests-integration/zoo.py [--torch] [--only NAME,...] [--reasons]

builds each model with random weights (no downloads), runs it eagerly and through
``ember_capture.capture`` on two calls with fresh inputs, and prints, per model, the number of
graphs and graph breaks ember made, whether the outputs equal eager, and the break reasons
(``--reasons``). ``--torch`` adds torch.compile's counts (``torch._dynamo.explain``, the
reference). ``tests-integration/test_zoo_hf.py`` runs the same table as a test, and each model
through ember.compile in inference and a training step (``inference_check``,
``training_check``). ``EMBER_ZOO_DEVICE=cuda`` builds the models there (default: cpu).
"""
from __future__ import annotations

import argparse
import collections
import contextlib
import copy
import dataclasses
import functools
import os
import re
import time
import warnings

import torch

VOCAB = 99
SEQ = 12
BATCH = 2
TEXT = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=37,
            max_position_embeddings=64)
DECODER = dict(TEXT, num_key_value_heads=1)
VISION = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=37, image_size=32,
              patch_size=8, num_channels=3)


def ids(batch=BATCH, seq=SEQ):
    return torch.randint(1, VOCAB, (batch, seq))


def pixels(size=32):
    return torch.randn(BATCH, 3, size, size)


@dataclasses.dataclass
class Spec:
    name: str
    kind: str  # encoder | decoder | encoder-decoder | vision | audio | multimodal
    config: str  # transformers config class
    model: str  # transformers model class
    kwargs: dict
    inputs: object  # () -> dict of forward kwargs


def _s(name, kind, config, model, kwargs, inputs):
    return Spec(name, kind, config, model, kwargs, inputs)


SPECS = [
    _s("bert", "encoder", "BertConfig", "BertModel", TEXT, lambda: dict(input_ids=ids())),
    _s("roberta", "encoder", "RobertaConfig", "RobertaModel", TEXT, lambda: dict(input_ids=ids())),
    _s("distilbert", "encoder", "DistilBertConfig", "DistilBertModel",
       dict(vocab_size=VOCAB, dim=32, n_layers=2, n_heads=2, hidden_dim=37, max_position_embeddings=64),
       lambda: dict(input_ids=ids())),
    _s("albert", "encoder", "AlbertConfig", "AlbertModel", dict(TEXT, embedding_size=16), lambda: dict(input_ids=ids())),
    _s("electra", "encoder", "ElectraConfig", "ElectraModel", dict(TEXT, embedding_size=16),
       lambda: dict(input_ids=ids())),
    _s("xlm-roberta", "encoder", "XLMRobertaConfig", "XLMRobertaModel", TEXT, lambda: dict(input_ids=ids())),
    _s("deberta-v2", "encoder", "DebertaV2Config", "DebertaV2Model", TEXT, lambda: dict(input_ids=ids())),
    _s("mobilebert", "encoder", "MobileBertConfig", "MobileBertModel",
       dict(TEXT, embedding_size=16, intra_bottleneck_size=16, true_hidden_size=16, num_feedforward_networks=1),
       lambda: dict(input_ids=ids())),
    _s("mpnet", "encoder", "MPNetConfig", "MPNetModel", TEXT, lambda: dict(input_ids=ids())),
    _s("gpt2", "decoder", "GPT2Config", "GPT2LMHeadModel",
       dict(vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=2, n_positions=64), lambda: dict(input_ids=ids())),
    _s("gpt-neo", "decoder", "GPTNeoConfig", "GPTNeoForCausalLM",
       dict(vocab_size=VOCAB, hidden_size=32, num_layers=2, num_heads=2, max_position_embeddings=64,
            attention_types=[[["global", "local"], 1]], window_size=8), lambda: dict(input_ids=ids())),
    _s("opt", "decoder", "OPTConfig", "OPTForCausalLM",
       dict(TEXT, ffn_dim=37, word_embed_proj_dim=32), lambda: dict(input_ids=ids())),
    _s("bloom", "decoder", "BloomConfig", "BloomForCausalLM", dict(vocab_size=VOCAB, hidden_size=32, n_layer=2, n_head=2),
       lambda: dict(input_ids=ids())),
    _s("llama", "decoder", "LlamaConfig", "LlamaForCausalLM", DECODER, lambda: dict(input_ids=ids())),
    _s("mistral", "decoder", "MistralConfig", "MistralForCausalLM", DECODER, lambda: dict(input_ids=ids())),
    _s("qwen2", "decoder", "Qwen2Config", "Qwen2ForCausalLM", DECODER, lambda: dict(input_ids=ids())),
    _s("qwen3", "decoder", "Qwen3Config", "Qwen3ForCausalLM", dict(DECODER, head_dim=16), lambda: dict(input_ids=ids())),
    _s("phi", "decoder", "PhiConfig", "PhiForCausalLM", DECODER, lambda: dict(input_ids=ids())),
    _s("phi3", "decoder", "Phi3Config", "Phi3ForCausalLM", dict(DECODER, pad_token_id=0), lambda: dict(input_ids=ids())),
    _s("gemma", "decoder", "GemmaConfig", "GemmaForCausalLM", dict(DECODER, head_dim=16), lambda: dict(input_ids=ids())),
    _s("gemma2", "decoder", "Gemma2Config", "Gemma2ForCausalLM", dict(DECODER, head_dim=16),
       lambda: dict(input_ids=ids())),
    _s("falcon", "decoder", "FalconConfig", "FalconForCausalLM", dict(TEXT, new_decoder_architecture=False),
       lambda: dict(input_ids=ids())),
    _s("gptj", "decoder", "GPTJConfig", "GPTJForCausalLM",
       dict(vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=2, n_positions=64, rotary_dim=8),
       lambda: dict(input_ids=ids())),
    _s("gpt-neox", "decoder", "GPTNeoXConfig", "GPTNeoXForCausalLM", TEXT, lambda: dict(input_ids=ids())),
    _s("t5", "encoder-decoder", "T5Config", "T5ForConditionalGeneration",
       dict(vocab_size=VOCAB, d_model=32, d_kv=16, d_ff=37, num_layers=2, num_heads=2, decoder_start_token_id=0),
       lambda: dict(input_ids=ids(), decoder_input_ids=ids(seq=6))),
    _s("bart", "encoder-decoder", "BartConfig", "BartForConditionalGeneration",
       dict(vocab_size=VOCAB, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=2,
            decoder_attention_heads=2, encoder_ffn_dim=37, decoder_ffn_dim=37, max_position_embeddings=64),
       lambda: dict(input_ids=ids(), decoder_input_ids=ids(seq=6))),
    _s("marian", "encoder-decoder", "MarianConfig", "MarianMTModel",
       dict(vocab_size=VOCAB, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=2,
            decoder_attention_heads=2, encoder_ffn_dim=37, decoder_ffn_dim=37, max_position_embeddings=64,
            decoder_start_token_id=0, pad_token_id=0),
       lambda: dict(input_ids=ids(), decoder_input_ids=ids(seq=6))),
    _s("vit", "vision", "ViTConfig", "ViTModel", VISION, lambda: dict(pixel_values=pixels())),
    _s("deit", "vision", "DeiTConfig", "DeiTModel", VISION, lambda: dict(pixel_values=pixels())),
    _s("beit", "vision", "BeitConfig", "BeitModel", VISION, lambda: dict(pixel_values=pixels())),
    _s("swin", "vision", "SwinConfig", "SwinModel",
       dict(image_size=32, patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[2, 2], window_size=4),
       lambda: dict(pixel_values=pixels())),
    _s("convnext", "vision", "ConvNextConfig", "ConvNextModel",
       dict(hidden_sizes=[8, 16], depths=[1, 1], num_stages=2), lambda: dict(pixel_values=pixels())),
    _s("resnet", "vision", "ResNetConfig", "ResNetModel",
       dict(embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1]), lambda: dict(pixel_values=pixels())),
    _s("clip", "multimodal", "CLIPConfig", "CLIPModel",
       dict(text_config=dict(TEXT, max_position_embeddings=32), vision_config=VISION, projection_dim=16),
       lambda: dict(input_ids=ids(), pixel_values=pixels())),
    _s("siglip", "multimodal", "SiglipConfig", "SiglipModel",
       dict(text_config=dict(TEXT, max_position_embeddings=32), vision_config=VISION),
       lambda: dict(input_ids=ids(), pixel_values=pixels())),
    _s("hubert", "audio", "HubertConfig", "HubertModel",
       dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=37,
            conv_dim=(8, 8), conv_stride=(4, 4), conv_kernel=(8, 8), num_conv_pos_embeddings=8,
            num_conv_pos_embedding_groups=2, do_stable_layer_norm=True, feat_extract_norm="layer"),
       lambda: dict(input_values=torch.randn(BATCH, 800))),
    _s("whisper", "audio", "WhisperConfig", "WhisperModel",
       dict(vocab_size=VOCAB, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=2,
            decoder_attention_heads=2, encoder_ffn_dim=37, decoder_ffn_dim=37, num_mel_bins=8,
            max_source_positions=16, max_target_positions=32, decoder_start_token_id=0, pad_token_id=0),
       lambda: dict(input_features=torch.randn(BATCH, 8, 32), decoder_input_ids=ids(seq=6))),
    _s("wav2vec2", "audio", "Wav2Vec2Config", "Wav2Vec2Model",
       dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=37,
            conv_dim=(8, 8), conv_stride=(4, 4), conv_kernel=(8, 8), num_conv_pos_embeddings=8,
            num_conv_pos_embedding_groups=2, do_stable_layer_norm=True, feat_extract_norm="layer"),
       lambda: dict(input_values=torch.randn(BATCH, 800))),
]


DEVICE = os.environ.get("EMBER_ZOO_DEVICE", "cpu")

# Config fields whose value makes a model random in train(): dropout, layer-drop and drop-path
# probabilities, SpecAugment's masking rates (wav2vec2, HuBERT).
_RANDOM_FIELDS = re.compile(r"drop|mask_(time|feature)_prob")


def _no_randomness(config) -> None:
    """Sets every random-in-training probability of a config and of its sub-configs to 0."""
    import transformers
    for key, value in list(vars(config).items()):
        if isinstance(value, transformers.PretrainedConfig):
            _no_randomness(value)
        elif _RANDOM_FIELDS.search(key) and isinstance(value, (int, float)) and not isinstance(value, bool):
            setattr(config, key, type(value)(0))


def build(spec: Spec, train: bool = False):
    """The model on DEVICE in eval() mode, or with train=True in train() mode with every dropout
    probability of its config at 0 (and any nn.Dropout left in eval()), so that a training step is
    a deterministic function that eager and compiled runs can be compared on."""
    import transformers
    config = getattr(transformers, spec.config)(**spec.kwargs)
    config._attn_implementation = "eager" if spec.name in ("gpt-neo",) else config._attn_implementation
    if train:
        _no_randomness(config)
    torch.manual_seed(0)
    model = getattr(transformers, spec.model)(config).to(DEVICE)
    if not train:
        return model.eval()
    model.train()
    for m in model.modules():
        if isinstance(m, torch.nn.modules.dropout._DropoutNd):
            m.eval()
    return model


def inputs(spec: Spec, seed: int, train: bool = False, dtype=torch.float32) -> dict:
    """The forward kwargs of call `seed`, on DEVICE, floats in `dtype`. For a training step of a
    model with a language-model head, labels too (the model's loss is then one of its outputs)."""
    torch.manual_seed(seed)
    kwargs = spec.inputs()
    if train and spec.kind == "decoder":
        kwargs["labels"] = kwargs["input_ids"]
    elif train and spec.kind == "encoder-decoder":
        kwargs["labels"] = kwargs["decoder_input_ids"]
    return {k: v.to(DEVICE, dtype) if v.is_floating_point() else v.to(DEVICE) for k, v in kwargs.items()}


def flat_tensors(out) -> list:
    """The tensors of a model output (a ModelOutput, tuple or tensor), in order."""
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, dict):
        out = list(out.values())
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in flat_tensors(o)]
    if hasattr(out, "to_legacy_cache") or hasattr(out, "layers"):  # a Cache object
        return [t for layer in getattr(out, "layers", []) for t in flat_tensors(
            [getattr(layer, "keys", None), getattr(layer, "values", None)])]
    return []


def loss_of(out) -> torch.Tensor:
    """A training step's loss: the sum of the mean squares of the float outputs (the model's own
    loss among them when labels were given), a deterministic function of every output."""
    return sum(t.square().mean() for t in flat_tensors(out) if t.is_floating_point())


def _step(model, fn, kwargs) -> list:
    """One training step: [loss] + every parameter's gradient (None where it got none)."""
    model.zero_grad(set_to_none=True)
    loss = loss_of(fn(**kwargs))
    loss.backward()
    return [loss.detach()] + [p.grad for p in model.parameters()]


def _worst(got: list, want: list) -> float:
    """zoo_vision.worst (max |got - want| / max |want| per tensor, tiny tensors against 1e-3 of
    the largest), where a gradient that is None on one side only is a mismatch."""
    from zoo_vision import worst
    if [g is None for g in got] != [w is None for w in want]:
        return float("inf")
    pairs = [(g, w) for g, w in zip(got, want) if w is not None]
    return worst([g.double() for g, _ in pairs], [w.double() for _, w in pairs])


@dataclasses.dataclass
class Check:
    """One phase of one model through ember.compile, over two calls with fresh inputs: the worst
    relative error against eager float32 (`error`), and for a training step eager's own float32
    error and the compiled float32 error, both against eager float64 (`eager_f64`, `compiled_f64`).
    `graphs`, `breaks`, `recompiles`: capture's counts after both calls; `fallbacks`: ember's
    warnings that a graph ran eagerly because the backend failed on it (without fullgraph=True a
    failure is a warning, and the eager result would equal eager's)."""
    error: float = 0.0
    eager_f64: float | None = None
    compiled_f64: float | None = None
    graphs: int = 0
    breaks: list = dataclasses.field(default_factory=list)
    recompiles: int = 0
    fallbacks: list = dataclasses.field(default_factory=list)

    def count(self, compiled) -> "Check":
        import ember
        stats = ember.compile_record(compiled).capture
        self.graphs, self.breaks, self.recompiles = len(stats.graphs), [str(b) for b in stats.breaks], stats.recompiles
        return self


@contextlib.contextmanager
def _fallbacks(check: Check):
    """Silences warnings, keeping ember's fallback warnings in check.fallbacks."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    check.fallbacks += [str(w.message) for w in caught if str(w.message).startswith("ember:")
                        and "runs eagerly" in str(w.message)]


def inference_check(spec: Spec, compile_fn) -> Check:
    """`compile_fn(model)` against the model in eval() mode, under no_grad."""
    from zoo_vision import worst
    model = build(spec)
    compiled = compile_fn(model)
    check = Check()
    with torch.no_grad(), _fallbacks(check):
        for call in range(2):
            kwargs = inputs(spec, 100 + call)
            want, got = flat_tensors(model(**kwargs)), flat_tensors(compiled(**kwargs))
            check.error = max(check.error, worst(got, want))
    return check.count(compiled)


def training_check(spec: Spec, compile_fn) -> Check:
    """A training step (build(spec, train=True): dropout off; loss_of the outputs; backward) of
    `compile_fn(model)` against eager's: the loss and every parameter's gradient, against eager
    float32 and, with eager's own float32 error beside it, against eager float64."""
    eager = build(spec, train=True)
    ref64, mine = copy.deepcopy(eager).double(), copy.deepcopy(eager)
    compiled = compile_fn(mine)
    check = Check(eager_f64=0.0, compiled_f64=0.0)
    with _fallbacks(check):
        for call in range(2):
            kwargs = inputs(spec, 200 + call, train=True)
            want, got = _step(eager, eager, kwargs), _step(mine, compiled, kwargs)
            ref = _step(ref64, ref64, inputs(spec, 200 + call, train=True, dtype=torch.float64))
            check.error = max(check.error, _worst(got, want))
            check.eager_f64 = max(check.eager_f64, _worst(want, ref))
            check.compiled_f64 = max(check.compiled_f64, _worst(got, ref))
    return check.count(compiled)


# (backend, phase) -> tolerance on Check.error; a training step also passes when its float32 error
# against float64 is at most F64_FACTOR times eager's own (test_zoo_hf.py's docstring says why).
TOL = {("eager", "inference"): 1e-5, ("eager", "training"): 1e-5,
       ("inductor", "inference"): 1e-4, ("inductor", "training"): 1e-3}
F64_FACTOR = 2.0
CHECKS = {"inference": inference_check, "training": training_check}


def within(check: Check, backend: str, phase: str) -> bool:
    if check.fallbacks:
        return False
    if check.error <= TOL[backend, phase]:
        return True
    return phase == "training" and check.compiled_f64 <= F64_FACTOR * check.eager_f64


def run_check(spec: Spec, backend: str, phase: str, fullgraph: bool = False) -> Check:
    import ember
    ember.reset()
    return CHECKS[phase](spec, functools.partial(ember.compile, backend=backend, fullgraph=fullgraph))


@dataclasses.dataclass
class Result:
    name: str
    kind: str
    graphs: int = 0
    breaks: int = 0
    fallbacks: int = 0
    equal: bool | None = None
    reasons: list = dataclasses.field(default_factory=list)
    error: str | None = None
    torch_graphs: int | None = None
    torch_breaks: int | None = None
    seconds: float = 0.0
    checks: dict = dataclasses.field(default_factory=dict)  # (backend, phase) -> Check, or the error
    torch_train_graphs: int | None = None
    torch_train_breaks: int | None = None


def measure(spec: Spec, backend=None, rtol=1e-5, atol=1e-5) -> Result:
    """ember on two calls with fresh inputs, compared to eager; graphs and breaks of the first call."""
    import ember_capture
    res = Result(spec.name, spec.kind)
    t0 = time.perf_counter()
    model = build(spec)
    graphs = []

    def recorder(gm, example_inputs):
        graphs.append(gm)
        return gm.forward if backend is None else backend(gm, example_inputs)

    stats = ember_capture.CaptureStats()
    compiled = ember_capture.capture(model, recorder, stats=stats)
    equal = True
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for call in range(2):
            kwargs = inputs(spec, 100 + call)
            want = flat_tensors(model(**kwargs))
            try:
                got = flat_tensors(compiled(**kwargs))
            except Exception as e:  # a crash is a bug: report it, keep going
                res.error = f"{type(e).__name__}: {e}"[:200]
                equal = False
                break
            if call == 0:
                res.graphs, res.breaks, res.fallbacks = len(graphs), len(stats.breaks), len(stats.fallbacks)
                res.reasons = [str(r) for r in stats.breaks]
            ok = len(got) == len(want) and all(
                g.shape == w.shape and torch.allclose(g, w, rtol=rtol, atol=atol) for g, w in zip(got, want))
            equal = equal and ok
    res.equal = equal
    res.seconds = time.perf_counter() - t0
    return res


def measure_torch(spec: Spec, res: Result, training: bool = False):
    import torch._dynamo
    torch._dynamo.reset()
    model = build(spec)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = torch._dynamo.explain(model)(**inputs(spec, 1))
    res.torch_graphs, res.torch_breaks = out.graph_count, out.graph_break_count
    if training:
        torch._dynamo.reset()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = torch._dynamo.explain(build(spec, train=True))(**inputs(spec, 1, train=True))
        res.torch_train_graphs, res.torch_train_breaks = out.graph_count, out.graph_break_count


def measure_checks(spec: Spec, res: Result):
    """The four checks of test_zoo_hf.py (without fullgraph=True), into res.checks."""
    for backend in ("eager", "inductor"):
        for phase in CHECKS:
            try:
                res.checks[backend, phase] = run_check(spec, backend, phase)
            except Exception as e:  # one phase's failure is one cell
                res.checks[backend, phase] = f"{type(e).__name__}: {e}"[:200]


def _cell(res: Result, backend: str, phase: str) -> str:
    check = res.checks.get((backend, phase))
    if check is None:
        return "-"
    if isinstance(check, str):
        return "error"
    if check.fallbacks:
        return "NO (ran eagerly)"
    return "yes" if within(check, backend, phase) else f"NO ({check.error:.1e})"


def short(reason: str) -> str:
    """A break reason without its location: the cause, for counting."""
    text = reason.split(" at ", 1)[0]
    return text[:140]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--torch", action="store_true", help="also measure torch.compile (torch._dynamo.explain)")
    p.add_argument("--only", default="", help="comma-separated model names")
    p.add_argument("--reasons", action="store_true", help="print each model's break reasons")
    p.add_argument("--markdown", action="store_true", help="print the table as markdown")
    p.add_argument("--checks", action="store_true",
                   help="also run test_zoo_hf.py's checks: capture alone and the default backend, in inference "
                        "and a training step, against eager (with --torch, torch.compile's training graphs too)")
    args = p.parse_args()
    only = set(filter(None, args.only.split(",")))
    results, causes = [], collections.Counter()
    for spec in SPECS:
        if only and spec.name not in only:
            continue
        try:
            res = measure(spec)
        except Exception as e:
            res = Result(spec.name, spec.kind, error=f"build: {type(e).__name__}: {e}"[:200])
        if args.checks and res.error is None:
            measure_checks(spec, res)
        if args.torch and res.error is None:
            try:
                measure_torch(spec, res, training=args.checks)
            except Exception as e:
                res.error = f"torch.compile: {type(e).__name__}: {e}"[:200]
        results.append(res)
        for r in set(map(short, res.reasons)):
            causes[r] += 1
        tc = f"  torch.compile {res.torch_graphs} graphs {res.torch_breaks} breaks" if res.torch_graphs is not None else ""
        print(f"{res.name:12s} {res.kind:16s} graphs {res.graphs:2d} breaks {res.breaks:2d} eager-frames "
              f"{res.fallbacks:2d} equal {res.equal}{tc}  ({res.seconds:.1f}s){'  ERROR ' + res.error if res.error else ''}",
              flush=True)
        for (backend, phase), check in res.checks.items():
            detail = check if isinstance(check, str) else (
                f"error {check.error:.1e} (float64: eager {check.eager_f64 or 0:.1e}, ember {check.compiled_f64 or 0:.1e}) "
                f"graphs {check.graphs} breaks {len(check.breaks)} recompiles {check.recompiles}")
            print(f"     {backend:8s} {phase:9s} {_cell(res, backend, phase):14s} {detail}", flush=True)
        if args.reasons:
            for r in res.reasons:
                print("     ", r[:300])
    print("\nCauses, by number of models they stop:")
    for cause, n in causes.most_common(40):
        print(f"{n:3d}  {cause}")
    if args.markdown:
        print(markdown(results))


def markdown(results: list) -> str:
    def n(v):
        return "-" if v is None else v
    out = ["| model | kind | ember graphs | ember breaks | equal to eager | torch.compile graphs | breaks | "
           "default backend: inference | training step: capture alone | default backend | ember graphs | "
           "torch.compile graphs |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in results:
        train = r.checks.get(("eager", "training"))
        out.append(f"| {r.name} | {r.kind} | {r.graphs} | {r.breaks} | {'yes' if r.equal else 'NO'} | "
                   f"{n(r.torch_graphs)} | {n(r.torch_breaks)} | {_cell(r, 'inductor', 'inference')} | "
                   f"{_cell(r, 'eager', 'training')} | {_cell(r, 'inductor', 'training')} | "
                   f"{train.graphs if isinstance(train, Check) else '-'} | {n(r.torch_train_graphs)} |")
    return "\n".join(out)


if __name__ == "__main__":
    main()
