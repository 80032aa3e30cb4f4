"""ember's benchmark: eager vs ember vs torch.compile, one subprocess per model.

    python tools/bench.py --suite cpu --out bench-out
    python tools/bench.py --suite seeds --device cuda --quick --out bench-out
    hatch run bench -- --suite tiny

See tools/bench/README.md. The code lives in the `bench` package next to this file.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench.cli import main  # noqa: E402  (the path above makes the package importable)

if __name__ == "__main__":
    sys.exit(main())
