"""Capture's cost of a cached call on model-shaped modules: a resnet50-shaped CNN (bottleneck
blocks 3-4-6-3, narrow channels: the guards, not the convolutions, are measured) and a 12-layer
Hugging Face BERT (small config), each captured with a backend whose graph runs once and then
hands back the same outputs, so a call costs binding, guards and the result only.

Run: python packages/ember-capture/benchmarks/model_guard_cost.py [--rounds 30] [--compare]

The entry is timed with the native guard checks (Note [Native guards]: the script waits for
the C++ checker to be built or loaded first). `--compare` also captures each model with the
Python checks (as before the checker, or where it cannot be built) and times both entries
alternately in one process, so that the machine's load moves both alike.
"""
from __future__ import annotations

import argparse
import time

import torch
from torch import nn

import ember_capture
from ember_capture import native


class Bottleneck(nn.Module):
    def __init__(self, cin, mid, stride=1):
        super().__init__()
        cout = mid * 4
        self.conv1, self.bn1 = nn.Conv2d(cin, mid, 1, bias=False), nn.BatchNorm2d(mid)
        self.conv2, self.bn2 = nn.Conv2d(mid, mid, 3, stride, 1, bias=False), nn.BatchNorm2d(mid)
        self.conv3, self.bn3 = nn.Conv2d(mid, cout, 1, bias=False), nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + (x if self.downsample is None else self.downsample(x)))


class ResNet50Shape(nn.Module):
    def __init__(self, width=4, layers=(3, 4, 6, 3)):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(3, width, 7, 2, 3, bias=False), nn.BatchNorm2d(width)
        self.relu, self.maxpool = nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1)
        stages, cin = [], width
        for i, n in enumerate(layers):
            mid = width * 2 ** i
            stages.append(nn.Sequential(Bottleneck(cin, mid, 1 if i == 0 else 2),
                                        *[Bottleneck(mid * 4, mid) for _ in range(n - 1)]))
            cin = mid * 4
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.avgpool, self.fc = nn.AdaptiveAvgPool2d(1), nn.Linear(cin, 10)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def models():
    yield "resnet50-shaped CNN", ResNet50Shape().eval(), torch.randn(1, 3, 32, 32)
    try:
        from transformers import BertConfig, BertModel
    except ImportError:
        return
    config = BertConfig(hidden_size=32, num_hidden_layers=12, num_attention_heads=2, intermediate_size=37,
                        vocab_size=100)
    yield "BERT, 12 layers", BertModel(config).eval(), torch.randint(0, 100, (2, 7))


def memoized(gm, example_inputs):
    memo = []

    def call(*args):
        if not memo:
            memo.append(gm(*args))
        return memo[0]
    return call


def capture(model, x, python_checks=False):
    captured = ember_capture.capture(model, memoized)
    if python_checks:
        with native.python_checks():  # the batches decide on their first hit
            captured(x)
            captured(x)
    else:
        captured(x)
        captured(x)
    return captured


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=30, help="timings of 10 calls each, the least kept")
    parser.add_argument("--compare", action="store_true", help="also time the entry with the Python checks")
    args = parser.parse_args()
    torch.manual_seed(0)
    if not native.wait():
        print("the native guard checker could not be built here: every entry uses the Python checks")
    with torch.no_grad():
        for name, model, x in models():
            variants = {"native checks": capture(model, x)}
            if args.compare:
                variants["Python checks"] = capture(model, x, python_checks=True)
            best = dict.fromkeys(variants, float("inf"))
            for _ in range(args.rounds):
                for label, captured in variants.items():
                    start = time.perf_counter()
                    for _ in range(10):
                        captured(x)
                    best[label] = min(best[label], (time.perf_counter() - start) / 10 * 1e6)
            tensors = sum(1 for _ in model.parameters()) + sum(1 for _ in model.buffers())
            (entry,) = variants["native checks"]._ember_state.entries
            sources = entry.source.count("X = _s")
            print(f"{name}: {tensors} parameters and buffers, {sources} guarded sources; "
                  + ", ".join(f"{label} {us:.0f} us" for label, us in best.items()) + " per cached call")


if __name__ == "__main__":
    main()
