#!/usr/bin/env bash
# The GPU checks, from a source checkout with nothing installed (the GPU machines' python3 has
# torch and triton): environment, the tests marked gpu, capture and integration tests on this
# Python, and the demo on CUDA. Logs go to $OUT (default ./gpu-out).
#   bash tools/gpu_check.sh [pytest selection...]
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH=$(ls -d "$PWD"/packages/*/src | paste -sd:)${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1 EMBER_CACHE_DIR=${EMBER_CACHE_DIR:-/tmp/ember-cache}
out=${OUT:-gpu-out}; mkdir -p "$out"
python3 - <<'PY' 2>&1 | tee "$out/env.txt"
import sys, torch, triton
print("python", sys.version.split()[0], "torch", torch.__version__, "triton", triton.__version__)
print("device", torch.cuda.get_device_name() if torch.cuda.is_available() else "none")
try:
    import xdist; print("pytest-xdist", xdist.__version__)
except ImportError:
    print("pytest-xdist missing")
PY
par=""; python3 -c "import xdist" 2>/dev/null && par="-n 8"
sel=("$@"); [ ${#sel[@]} -eq 0 ] && sel=(packages/ember-capture/tests tests-integration -m "gpu or not gpu")
python3 -m pytest -q -p no:cacheprovider $par "${sel[@]}" 2>&1 | tee "$out/tests.log" | tail -40
python3 tools/demo.py 2>&1 | tee "$out/demo.log"
