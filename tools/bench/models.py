"""The model zoo: every workload the benchmark knows, and the suites that group them.

A workload is built inside the per-model subprocess (see worker.py), so importing this module is
cheap: third-party model libraries (torchvision, timm, transformers) are imported by the builder
that needs them, and a spec names them in `requires` so the parent can report "skipped" without
starting a process.

No downloads, ever: torchvision and timm models are built with `weights=None` /
`pretrained=False`, Hugging Face models from their config with random weights.

Note: dropout is set to zero everywhere. The correctness check compares one training step's
gradients against eager; dropout would draw different random masks under a compiler (inductor
has its own RNG), and the comparison would only measure that.
"""
from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import nn

PHASES = ("infer", "train")


@dataclass
class Batch:
    """One set of inputs: `fn(*args, **kwargs)`; `target` feeds the loss."""

    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    target: Any = None


@dataclass
class Workload:
    """What the worker measures: `fn` (a module or a plain function) on batches from `make_batch`.

    `loss(out, batch)` turns an output into the scalar a training step differentiates; a workload
    without parameters or without a loss is inference-only.
    """

    fn: Callable
    make_batch: Callable[[torch.Generator, str], Batch]
    loss: Callable[[Any, Batch], torch.Tensor] | None = None

    @property
    def phases(self) -> tuple[str, ...]:
        has_params = isinstance(self.fn, nn.Module) and any(True for _ in self.fn.parameters())
        return PHASES if (self.loss is not None and has_params) else ("infer",)


@dataclass(frozen=True)
class ModelSpec:
    name: str
    build: Callable[[torch.device, torch.dtype], Workload]
    description: str
    requires: tuple[str, ...] = ()
    # Relative cost, used to share a time budget among models (1 = a small model): roughly
    # proportional to torch.compile's cold compile time for the model, the bulk of a model's time.
    cost: float = 1.0

    def missing(self) -> list[str]:
        """The required libraries that cannot be imported here."""
        return [m for m in self.requires if importlib.util.find_spec(m) is None]


MODELS: dict[str, ModelSpec] = {}


def register(name: str, description: str, requires: tuple[str, ...] = (), cost: float = 1.0):
    def deco(build):
        MODELS[name] = ModelSpec(name, build, description, requires, cost)
        return build

    return deco


# --------------------------------------------------------------------------- helpers

def _f32(t: torch.Tensor) -> torch.Tensor:
    """Losses in at least float32 (half-precision losses lose the gradients' low bits)."""
    return t.float() if t.dtype in (torch.float16, torch.bfloat16) else t


def _randn(gen: torch.Generator, shape, device, dtype) -> torch.Tensor:
    return torch.randn(shape, generator=gen, device=device, dtype=dtype)


def _randint(gen: torch.Generator, high: int, shape, device) -> torch.Tensor:
    return torch.randint(0, high, shape, generator=gen, device=device)


def _image_classifier(model: nn.Module, batch: int, size: int, classes: int, device, dtype):
    model = model.to(device=device, dtype=dtype)

    def make_batch(gen, phase):
        x = _randn(gen, (batch, 3, size, size), device, dtype)
        return Batch((x,), target=_randint(gen, classes, (batch,), device))

    return Workload(model, make_batch, lambda out, b: F.cross_entropy(_f32(out), b.target))


def _regression(model: nn.Module, in_shape, out_shape, device, dtype) -> Workload:
    model = model.to(device=device, dtype=dtype)

    def make_batch(gen, phase):
        return Batch((_randn(gen, in_shape, device, dtype),), target=_randn(gen, out_shape, device, dtype))

    return Workload(model, make_batch, lambda out, b: F.mse_loss(_f32(out), _f32(b.target)))


def _pointwise_fn(fn, numel: int, device, dtype) -> Workload:
    return Workload(fn, lambda gen, phase: Batch((_randn(gen, (numel,), device, dtype),)))


# --------------------------------------------------------------------------- the seed workloads

def simple_fn(x: torch.Tensor) -> torch.Tensor:
    """The documents' seed: each intermediate is used twice (see ARCHITECTURE.md, pitfalls)."""
    for _ in range(20):
        y = torch.sin(x)
        x = x + y
    return x


def mlp(d_in=1024, d_hidden=2048, d_out=1024) -> nn.Module:
    return nn.Sequential(nn.Linear(d_in, d_hidden), nn.ReLU(), nn.Linear(d_hidden, d_out))


@register("simple_fn_1e4", "20 x (sin, add), 1e4 elements", cost=3)
def _(device, dtype):
    return _pointwise_fn(simple_fn, 10_000, device, dtype)


@register("simple_fn_1e6", "20 x (sin, add), 1e6 elements")
def _(device, dtype):
    return _pointwise_fn(simple_fn, 1_000_000, device, dtype)


@register("simple_fn_1.6e7", "20 x (sin, add), 1.6e7 elements", cost=3)
def _(device, dtype):
    return _pointwise_fn(simple_fn, 16_000_000, device, dtype)


@register("mlp_b512", "MLP 1024-2048-1024, batch 512")
def _(device, dtype):
    return _regression(mlp(), (512, 1024), (512, 1024), device, dtype)


@register("resnet50_b1", "torchvision resnet50, batch 1, 224x224", ("torchvision",), cost=2.5)
def _(device, dtype):
    import torchvision

    return _image_classifier(torchvision.models.resnet50(weights=None), 1, 224, 1000, device, dtype)


@register("resnet50_b32", "torchvision resnet50, batch 32, 224x224", ("torchvision",), cost=2.5)
def _(device, dtype):
    import torchvision

    return _image_classifier(torchvision.models.resnet50(weights=None), 32, 224, 1000, device, dtype)


@register("densenet121_b16", "torchvision densenet121, batch 16, 128x128", ("torchvision",), cost=4)
def _(device, dtype):
    import torchvision

    model = torchvision.models.densenet121(weights=None)
    return _image_classifier(model, 16, 128, 1000, device, dtype)


@register("resnext101_32x8d_b64", "timm resnext101_32x8d, batch 64, 224x224", ("timm",), cost=4)
def _(device, dtype):
    import timm

    model = timm.create_model("resnext101_32x8d", pretrained=False)
    return _image_classifier(model, 64, 224, 1000, device, dtype)


def _lm_workload(model: nn.Module, vocab: int, batch: int, seq: int, device, dtype) -> Workload:
    """A Hugging Face language model; training passes `labels`, so the model computes its loss."""
    model = model.to(device=device, dtype=dtype)

    def make_batch(gen, phase):
        ids = _randint(gen, vocab, (batch, seq), device)
        kwargs = {"input_ids": ids}
        if phase == "train":
            kwargs["labels"] = ids.clone()
        return Batch(kwargs=kwargs)

    return Workload(model, make_batch, lambda out, b: out.loss)


@register("bert_base_b8_s128", "HF BertForMaskedLM (bert-base config), batch 8, seq 128",
          ("transformers",), cost=2)
def _(device, dtype):
    from transformers import BertConfig, BertForMaskedLM

    cfg = BertConfig(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    return _lm_workload(BertForMaskedLM(cfg), cfg.vocab_size, 8, 128, device, dtype)


@register("gpt2_b4_s512", "HF GPT2LMHeadModel (gpt2 config), batch 4, seq 512",
          ("transformers",), cost=2)
def _(device, dtype):
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False)
    return _lm_workload(GPT2LMHeadModel(cfg), cfg.vocab_size, 4, 512, device, dtype)


# --------------------------------------------------------------------------- CPU-sized models

class BasicBlock(nn.Module):
    """ResNet's basic block: two 3x3 convs with batch norm, a projection when the shape changes."""

    def __init__(self, c_in: int, c_out: int, stride: int = 1):
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.proj = None
        if stride != 1 or c_in != c_out:
            self.proj = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out))

    def forward(self, x):
        skip = x if self.proj is None else self.proj(x)
        y = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(y)) + skip)


class SmallResNet(nn.Module):
    """A ResNet-style CNN small enough for a 2-core CPU: stem, two stages, pool, classifier."""

    def __init__(self, width: int = 32, classes: int = 10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, 2, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU())
        self.stages = nn.Sequential(BasicBlock(width, width), BasicBlock(width, 2 * width, stride=2))
        self.head = nn.Linear(2 * width, classes)

    def forward(self, x):
        x = self.stages(self.stem(x))
        return self.head(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class TransformerBlock(nn.Module):
    """A pre-norm transformer block: attention (scaled_dot_product_attention) then a GELU MLP."""

    def __init__(self, dim: int = 256, heads: int = 4, mlp_ratio: int = 4):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, mlp_ratio * dim)
        self.fc2 = nn.Linear(mlp_ratio * dim, dim)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (t.view(b, s, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.out(a.transpose(1, 2).reshape(b, s, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


def softmax_fn(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x, dim=-1)


@register("small_resnet_b16", "ResNet-style CNN (2 stages, width 32), batch 16, 64x64", cost=1.5)
def _(device, dtype):
    return _image_classifier(SmallResNet(), 16, 64, 10, device, dtype)


@register("transformer_block_b8_s128", "pre-norm transformer block, dim 256, 4 heads, batch 8, seq 128")
def _(device, dtype):
    return _regression(TransformerBlock(), (8, 128, 256), (8, 128, 256), device, dtype)


@register("softmax_4096x1024", "softmax over the last dim of a 4096x1024 tensor", cost=0.5)
def _(device, dtype):
    return Workload(softmax_fn, lambda gen, phase: Batch((_randn(gen, (4096, 1024), device, dtype),)))


@register("layer_norm_4096x1024", "nn.LayerNorm(1024) on 4096x1024", cost=0.5)
def _(device, dtype):
    return _regression(nn.LayerNorm(1024), (4096, 1024), (4096, 1024), device, dtype)


# --------------------------------------------------------------------------- miniatures (tests)

def tiny_fn(x: torch.Tensor) -> torch.Tensor:
    for _ in range(4):
        x = x + torch.sin(x)
    return x


@register("tiny_fn", "4 x (sin, add) on 1000 elements", cost=0.5)
def _(device, dtype):
    return _pointwise_fn(tiny_fn, 1000, device, dtype)


@register("tiny_mlp", "MLP 16-32-16, batch 8", cost=0.5)
def _(device, dtype):
    return _regression(mlp(16, 32, 16), (8, 16), (8, 16), device, dtype)


# Self-test workloads: they fail on purpose, so the tests can check that a failure stays in its row.

class _Raises(nn.Module):
    def forward(self, x):
        raise RuntimeError("selftest_raises: this model raises on purpose")


@register("selftest_raises", "raises in forward (tests the harness)", cost=0.2)
def _(device, dtype):
    return Workload(_Raises(), lambda gen, phase: Batch((_randn(gen, (4,), device, dtype),)))


@register("selftest_abort", "kills its own process (tests the harness)", cost=0.2)
def _(device, dtype):
    os.abort()


class _AbortsOnSecondCall(nn.Module):
    """Call 1 is the eager reference; call 2, the eager variant's first, kills the process."""

    calls = 0

    def forward(self, x):
        type(self).calls += 1
        if type(self).calls == 2:
            os.abort()
        return x + 1


@register("selftest_abort_second_call", "kills its process on its 2nd call (tests the harness)", cost=0.2)
def _(device, dtype):
    return Workload(_AbortsOnSecondCall(), lambda gen, phase: Batch((_randn(gen, (4,), device, dtype),)))


# --------------------------------------------------------------------------- the gpu-broad suite

# Note [broad sizes]: each gpu-broad builder takes `tiny`. Full size is a realistic float32 GPU
# batch (an H100 step in milliseconds to a few hundred). tiny=True builds the same architecture
# (the same classes and config class, the same code paths: RoPE, grouped-query attention, shifted
# windows, squeeze-excitation, ...) at a size a 2-core CPU checks through ember in seconds:
# images of 64x64 in batches of 2, and Hugging Face configs with a few layers of width 32-64 and a
# vocabulary of 99. tests-integration/zoo_broad.py checks the tiny builds through ember against
# eager; tools/tests/test_bench_broad.py checks that each builds and runs an eager step.
BROAD_TINY: dict[str, Callable[[torch.device, torch.dtype], Workload]] = {}


def _broad(name: str, description: str, requires: tuple[str, ...], cost: float):
    """Registers `build(device, dtype, tiny)` at full size under `name`, and its tiny build in
    BROAD_TINY."""
    def deco(build):
        register(name, description, requires, cost)(lambda device, dtype: build(device, dtype, False))
        BROAD_TINY[name] = lambda device, dtype: build(device, dtype, True)
        return build

    return deco


_RANDOM_IN_TRAIN = ("StochasticDepth", "DropPath")


def _deterministic(model: nn.Module) -> nn.Module:
    """Every dropout and drop-path probability set to 0 (the note at the top of this module)."""
    for m in model.modules():
        if isinstance(m, nn.modules.dropout._DropoutNd):
            m.p = 0.0
        elif type(m).__name__ in _RANDOM_IN_TRAIN:
            for attr in ("p", "drop_prob"):
                if hasattr(m, attr):
                    setattr(m, attr, 0.0)
    return model


def _vision(model: nn.Module, batch: int, tiny: bool, device, dtype) -> Workload:
    """An ImageNet classifier at 224x224, or (tiny) 2 images of 64x64."""
    size = 64 if tiny else 224
    return _image_classifier(_deterministic(model), 2 if tiny else batch, size, 1000, device, dtype)


def _torchvision(builder: str, batch: int, tiny: bool, device, dtype, **kwargs) -> Workload:
    import torchvision

    return _vision(getattr(torchvision.models, builder)(weights=None, **kwargs), batch, tiny, device, dtype)


def _timm(name: str, batch: int, tiny: bool, device, dtype, **kwargs) -> Workload:
    import timm

    if tiny and kwargs.pop("sized", False):
        kwargs["img_size"] = 64
    kwargs.pop("sized", None)
    model = timm.create_model(name, pretrained=False, drop_rate=0.0, drop_path_rate=0.0, **kwargs)
    return _vision(model, batch, tiny, device, dtype)


def _hf_config(config_cls: str, full: dict, tiny_overrides: dict, tiny: bool):
    import transformers

    cfg = getattr(transformers, config_cls)(**(dict(full, **tiny_overrides) if tiny else full))
    for key, value in list(vars(cfg).items()):  # every dropout / layer-drop probability to 0
        if "drop" in key and isinstance(value, float):
            setattr(cfg, key, 0.0)
    cfg.use_cache = False
    return cfg


def _hf_model(model_cls: str, cfg) -> nn.Module:
    import transformers

    return _deterministic(getattr(transformers, model_cls)(cfg))


# Tiny Hugging Face text configs (Note [broad sizes]): the zoo's sizes (tests-integration/zoo.py).
_TINY_TEXT = dict(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=37,
                  max_position_embeddings=64)
_TINY_SEQ, _TINY_BATCH = 12, 2


def _seq2seq_workload(model: nn.Module, vocab: int, batch: int, src: int, tgt: int, src_kind: str,
                      device, dtype, feature_shape: tuple = ()) -> Workload:
    """An encoder-decoder: `input_ids` (or audio `input_features` of `feature_shape`) and
    `decoder_input_ids` for inference; `labels` for training (the model shifts them into the
    decoder's inputs and computes its loss)."""
    model = model.to(device=device, dtype=dtype)

    def make_batch(gen, phase):
        if src_kind == "ids":
            kwargs = {"input_ids": _randint(gen, vocab, (batch, src), device)}
        else:
            kwargs = {"input_features": _randn(gen, (batch, *feature_shape), device, dtype)}
        target = _randint(gen, vocab, (batch, tgt), device)
        kwargs["labels" if phase == "train" else "decoder_input_ids"] = target
        return Batch(kwargs=kwargs)

    return Workload(model, make_batch, lambda out, b: out.loss)


@_broad("mobilenet_v3_large_b64", "torchvision mobilenet_v3_large, batch 64, 224x224", ("torchvision",), 2)
def _(device, dtype, tiny):
    return _torchvision("mobilenet_v3_large", 64, tiny, device, dtype)


@_broad("efficientnet_b0_b64", "torchvision efficientnet_b0, batch 64, 224x224", ("torchvision",), 2.5)
def _(device, dtype, tiny):
    return _torchvision("efficientnet_b0", 64, tiny, device, dtype)


@_broad("convnext_tiny_b32", "torchvision convnext_tiny, batch 32, 224x224", ("torchvision",), 2.5)
def _(device, dtype, tiny):
    return _torchvision("convnext_tiny", 32, tiny, device, dtype)


@_broad("regnet_y_1_6gf_b64", "torchvision regnet_y_1_6gf, batch 64, 224x224", ("torchvision",), 3)
def _(device, dtype, tiny):
    return _torchvision("regnet_y_1_6gf", 64, tiny, device, dtype)


@_broad("shufflenet_v2_x1_0_b128", "torchvision shufflenet_v2_x1_0, batch 128, 224x224", ("torchvision",), 2)
def _(device, dtype, tiny):
    return _torchvision("shufflenet_v2_x1_0", 128, tiny, device, dtype)


@_broad("swin_t_b32", "torchvision swin_t, batch 32, 224x224", ("torchvision",), 3)
def _(device, dtype, tiny):
    return _torchvision("swin_t", 32, tiny, device, dtype)


@_broad("vit_b_16_b32", "torchvision vit_b_16, batch 32, 224x224 (tiny: 64x64)", ("torchvision",), 2.5)
def _(device, dtype, tiny):
    return _torchvision("vit_b_16", 32, tiny, device, dtype, image_size=64 if tiny else 224)


@_broad("timm_deit_small_b64", "timm deit_small_patch16_224, batch 64, 224x224", ("timm",), 2)
def _(device, dtype, tiny):
    return _timm("deit_small_patch16_224", 64, tiny, device, dtype, sized=True)


@_broad("timm_mixer_b16_b32", "timm mixer_b16_224 (MLP-Mixer), batch 32, 224x224", ("timm",), 2)
def _(device, dtype, tiny):
    return _timm("mixer_b16_224", 32, tiny, device, dtype, sized=True)


@_broad("timm_efficientnetv2_s_b32", "timm efficientnetv2_rw_s, batch 32, 224x224", ("timm",), 3)
def _(device, dtype, tiny):
    return _timm("efficientnetv2_rw_s", 32, tiny, device, dtype)


@_broad("roberta_base_b16_s128", "HF RobertaForMaskedLM (roberta-base config), batch 16, seq 128",
        ("transformers",), 2)
def _(device, dtype, tiny):
    cfg = _hf_config("RobertaConfig", dict(vocab_size=50265, max_position_embeddings=514, type_vocab_size=1,
                                           pad_token_id=1), _TINY_TEXT, tiny)
    batch, seq = (_TINY_BATCH, _TINY_SEQ) if tiny else (16, 128)
    return _lm_workload(_hf_model("RobertaForMaskedLM", cfg), cfg.vocab_size, batch, seq, device, dtype)


@_broad("distilbert_b32_s256", "HF DistilBertForMaskedLM (distilbert-base config), batch 32, seq 256",
        ("transformers",), 1.5)
def _(device, dtype, tiny):
    tiny_cfg = dict(vocab_size=99, dim=32, n_layers=2, n_heads=2, hidden_dim=37, max_position_embeddings=64)
    cfg = _hf_config("DistilBertConfig", {}, tiny_cfg, tiny)
    batch, seq = (_TINY_BATCH, _TINY_SEQ) if tiny else (32, 256)
    return _lm_workload(_hf_model("DistilBertForMaskedLM", cfg), cfg.vocab_size, batch, seq, device, dtype)


@_broad("t5_small_b16_s256", "HF T5ForConditionalGeneration (t5-small config), batch 16, source 256, target 64",
        ("transformers",), 2.5)
def _(device, dtype, tiny):
    tiny_cfg = dict(vocab_size=99, d_model=32, d_kv=16, d_ff=37, num_layers=2, num_heads=2)
    cfg = _hf_config("T5Config", dict(decoder_start_token_id=0), tiny_cfg, tiny)
    batch, src, tgt = (_TINY_BATCH, _TINY_SEQ, 6) if tiny else (16, 256, 64)
    model = _hf_model("T5ForConditionalGeneration", cfg)
    return _seq2seq_workload(model, cfg.vocab_size, batch, src, tgt, "ids", device, dtype)


# A Llama-style decoder (RoPE, RMSNorm, SwiGLU) and a Qwen2 one (the same with biased q/k/v
# projections and grouped-query attention): 8 and 6 layers of width 1024, a 32000-token vocabulary.
_DECODER = dict(vocab_size=32000, hidden_size=1024, intermediate_size=2816, num_attention_heads=16,
                max_position_embeddings=2048)
_TINY_DECODER = dict(_TINY_TEXT, hidden_size=64, num_attention_heads=4)


@_broad("llama_l8_d1024_b8_s512", "HF LlamaForCausalLM, 8 layers, dim 1024, 16 heads, batch 8, seq 512",
        ("transformers",), 3)
def _(device, dtype, tiny):
    cfg = _hf_config("LlamaConfig", dict(_DECODER, num_hidden_layers=8, num_key_value_heads=16),
                     dict(_TINY_DECODER, num_key_value_heads=4), tiny)
    batch, seq = (_TINY_BATCH, _TINY_SEQ) if tiny else (8, 512)
    return _lm_workload(_hf_model("LlamaForCausalLM", cfg), cfg.vocab_size, batch, seq, device, dtype)


@_broad("qwen2_gqa_l6_d1024_b8_s512",
        "HF Qwen2ForCausalLM, 6 layers, dim 1024, 16 query / 4 key-value heads, batch 8, seq 512",
        ("transformers",), 3)
def _(device, dtype, tiny):
    cfg = _hf_config("Qwen2Config", dict(_DECODER, num_hidden_layers=6, num_key_value_heads=4),
                     dict(_TINY_DECODER, num_key_value_heads=2), tiny)
    batch, seq = (_TINY_BATCH, _TINY_SEQ) if tiny else (8, 512)
    return _lm_workload(_hf_model("Qwen2ForCausalLM", cfg), cfg.vocab_size, batch, seq, device, dtype)


@_broad("hf_vit_base_b32", "HF ViTForImageClassification (vit-base config), batch 32, 224x224",
        ("transformers",), 2)
def _(device, dtype, tiny):
    tiny_cfg = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=37, image_size=64,
                    patch_size=16)
    cfg = _hf_config("ViTConfig", dict(num_labels=1000), tiny_cfg, tiny)
    model = _hf_model("ViTForImageClassification", cfg).to(device=device, dtype=dtype)
    batch, size = (2, 64) if tiny else (32, 224)

    def make_batch(gen, phase):
        x = _randn(gen, (batch, 3, size, size), device, dtype)
        return Batch(kwargs={"pixel_values": x}, target=_randint(gen, 1000, (batch,), device))

    return Workload(model, make_batch, lambda out, b: F.cross_entropy(_f32(out.logits), b.target))


@_broad("whisper_tiny_b8", "HF WhisperForConditionalGeneration (whisper-tiny config), batch 8, 30 s of audio "
        "(80 x 3000 log-mel), 64 target tokens", ("transformers",), 2.5)
def _(device, dtype, tiny):
    full = dict(d_model=384, encoder_layers=4, decoder_layers=4, encoder_attention_heads=6,
                decoder_attention_heads=6, encoder_ffn_dim=1536, decoder_ffn_dim=1536)
    tiny_cfg = dict(vocab_size=99, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=2,
                    decoder_attention_heads=2, encoder_ffn_dim=37, decoder_ffn_dim=37, num_mel_bins=8,
                    max_source_positions=16, max_target_positions=32, decoder_start_token_id=0, pad_token_id=0)
    cfg = _hf_config("WhisperConfig", full, tiny_cfg, tiny)
    batch, tgt = (_TINY_BATCH, 6) if tiny else (8, 64)
    features = (cfg.num_mel_bins, 2 * cfg.max_source_positions)
    model = _hf_model("WhisperForConditionalGeneration", cfg)
    return _seq2seq_workload(model, cfg.vocab_size, batch, 0, tgt, "features", device, dtype, features)


# --------------------------------------------------------------------------- suites

SUITES: dict[str, tuple[str, ...]] = {
    "seeds": (
        "simple_fn_1e4", "simple_fn_1.6e7", "mlp_b512", "resnet50_b1", "resnet50_b32",
        "densenet121_b16", "resnext101_32x8d_b64", "bert_base_b8_s128", "gpt2_b4_s512",
    ),
    "cpu": (
        "simple_fn_1e6", "mlp_b512", "small_resnet_b16", "transformer_block_b8_s128",
        "softmax_4096x1024", "layer_norm_4096x1024",
    ),
    "tiny": ("tiny_fn", "tiny_mlp"),
    "gpu-broad": tuple(BROAD_TINY),
}
