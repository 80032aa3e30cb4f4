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
}
