"""`ember` on the command line: versions and the backends that can run here."""
from __future__ import annotations

import argparse
import sys

import torch

import ember
from ember import backends


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ember", description="ember, a compiler for PyTorch")
    parser.add_argument("command", choices=["info", "backends"], nargs="?", default="info")
    args = parser.parse_args(argv)
    if args.command == "backends":
        for name, entry in sorted(backends._REGISTRY.items()):
            reason = entry.unavailable()
            print(f"{name:12s} {'available' if reason is None else 'unavailable: ' + reason}")
        return 0
    cuda = torch.cuda.get_device_name() if torch.cuda.is_available() else "none"
    print(f"ember {ember.__version__}; torch {torch.__version__}; python {sys.version.split()[0]}; "
          f"CUDA device: {cuda}")
    print(f"backends available here: {', '.join(ember.list_backends())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
