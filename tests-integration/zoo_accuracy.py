"""Float32 training against a float64 reference: is a compiler's float32 error eager's?

    python tests-integration/zoo_accuracy.py [--device cuda] [--only NAME,...] [--batch N]

Comparing a float32 compiled training step with float32 eager mixes two roundings; in deep
batch-norm networks with tiny batches the gradients are ill-conditioned, so two correct float32
programs can differ a lot. The fair question (torch's own accuracy harness asks it) is whether
the compiled float32 result is as close to the float64 result as eager's float32 result is. Per
model this prints the worst relative error (``zoo_vision.worst``) of the loss and every gradient,
over two training steps on fresh inputs, for eager float32, ember float32 and torch.compile
float32, each against eager float64, and the ratio ember / eager.
"""
from __future__ import annotations

import argparse
import json
import warnings

import torch

import zoo_vision as Z


def measure(spec, device):
    import ember
    base = Z.build(spec).to(device)
    runs = {"eager": lambda m: m, "ember": ember.compile, "torch.compile": torch.compile}
    errors = Z.errors_against_float64(spec, base, runs, device)
    errors["ember/eager"] = errors["ember"] / errors["eager"] if errors["eager"] else float("inf")
    return dict(name=spec.name, **errors)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--only", default="")
    ap.add_argument("--batch", type=int, default=Z.BATCH)
    args = ap.parse_args()
    Z.BATCH = args.batch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    names = set(args.only.split(",")) if args.only else None
    warnings.simplefilter("ignore")
    for spec in Z.SPECS:
        if names and spec.name not in names:
            continue
        try:
            row = measure(spec, args.device)
        except Exception as e:  # one model's failure is one row
            row = dict(name=spec.name, error=f"{type(e).__name__}: {e}"[:300])
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
