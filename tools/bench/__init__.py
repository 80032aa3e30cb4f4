"""ember's benchmark harness (run it as `python tools/bench.py`; see README.md)."""
