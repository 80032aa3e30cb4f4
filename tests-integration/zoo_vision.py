"""A zoo of torchvision and timm image models: how much of each ember captures, and whether it
computes what eager computes.

    python tests-integration/zoo_vision.py [--device cuda] [--only NAME,...] [--jobs N] [--torch] [--json PATH] [--budget S]

Each model is built with random weights (no downloads) and run, on two calls with fresh
inputs, eagerly and through ember: capture alone (``backend="eager"``) and the default backend,
in inference (``eval()``, no grad) and in a training step (``train()``, forward, a loss,
backward: the loss and every parameter's gradient against eager's). It reports ember's graphs
and breaks on the first call, whether ``fullgraph=True`` captures the model, and with
``--torch`` torch.compile's counts (``torch._dynamo.explain``, the reference). Each model runs
in its own process (``--jobs`` at a time), so one crash or hang costs one row.
``tests-integration/test_zoo_vision.py`` runs the same rows as a test (slow; skipped without
torchvision and timm).
"""
from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import os
import subprocess
import sys
import time
import warnings

import torch

from zoo import flat_tensors as flat  # the tensors of a model output, in order

BATCH = 2
SIZE = 64
DTYPE = torch.float32  # --dtype float64 tells rounding (a difference that shrinks) from a wrong result


@dataclasses.dataclass
class Spec:
    name: str
    library: str  # torchvision | timm
    builder: str  # the builder's name in torchvision.models / timm.create_model's model name
    kwargs: dict
    size: int = SIZE


def _tv(name, size=SIZE, **kwargs):
    return Spec(name, "torchvision", name, kwargs, size)


def _timm(name, size=SIZE, **kwargs):
    return Spec("timm_" + name, "timm", name, kwargs, size)


SPECS = [  # the slowest to compile first, so that a run with --jobs finishes them in time
    _tv("densenet121"), _tv("maxvit_t", size=224), _tv("resnext50_32x4d"), _tv("resnet50"), _tv("swin_t"),
    _tv("convnext_tiny"), _tv("efficientnet_b0"), _tv("vit_b_16", image_size=64), _tv("vgg11"), _tv("resnet18"),
    _tv("mobilenet_v2"), _tv("mobilenet_v3_small"), _tv("squeezenet1_1"), _tv("shufflenet_v2_x0_5"),
    _tv("regnet_y_400mf"), _tv("mnasnet0_5"), _tv("googlenet", aux_logits=False, init_weights=True), _tv("alexnet"),
    _timm("levit_128s", size=224), _timm("efficientnet_b0"), _timm("poolformer_s12"), _timm("resnet18"),
    _timm("mobilenetv3_small_100"), _timm("regnetx_002"), _timm("vit_tiny_patch16_224", img_size=64),
    _timm("deit_tiny_patch16_224", img_size=64), _timm("convnext_atto"), _timm("mixer_s16_224", img_size=64),
]

# Modules whose training-mode output is random: put in eval mode for the training step, so that
# eager and compiled runs compute the same function.
_RANDOM_LAYERS = ("Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "StochasticDepth", "DropPath",
                  "DropBlock2d")


def build(spec: Spec) -> torch.nn.Module:
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if spec.library == "torchvision":
            import torchvision
            model = getattr(torchvision.models, spec.builder)(weights=None, **spec.kwargs)
        else:
            import timm
            model = timm.create_model(spec.builder, pretrained=False, **spec.kwargs)
    return model


def available() -> bool:
    try:
        import timm  # noqa: F401
        import torchvision  # noqa: F401
    except ImportError:
        return False
    return True


def images(spec: Spec, device, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(BATCH, 3, spec.size, spec.size, generator=g).to(device, DTYPE)


def _scale(t: torch.Tensor) -> float:
    return t.detach().abs().max().item() if t.numel() else 0.0


def rel_error(got: torch.Tensor, want: torch.Tensor, floor: float = 0.0) -> float:
    """max |got - want| / max(max |want|, floor); inf on a shape or dtype mismatch."""
    if got.shape != want.shape or got.dtype != want.dtype:
        return float("inf")
    err = (got.detach().double() - want.detach().double()).abs().max().item() if want.numel() else 0.0
    scale = max(_scale(want), floor)
    return err / scale if scale > 0 else err


def worst(got: list, want: list) -> float:
    """The largest rel_error over pairs; a tensor that is nearly zero in eager (the gradient of a
    convolution's bias before a BatchNorm is zero up to rounding) is measured against 1e-3 of
    the largest value of all, not against its own rounding noise."""
    if len(got) != len(want):
        return float("inf")
    floor = 1e-3 * max([_scale(w) for w in want] or [0.0])
    return max([rel_error(g, w, floor) for g, w in zip(got, want)] or [0.0])


def _quiet(model):
    for m in model.modules():
        if type(m).__name__ in _RANDOM_LAYERS:
            m.eval()
    return model


def inference_error(spec, model, compiled, device) -> float:
    err = 0.0
    with torch.no_grad():
        for call in range(2):
            x = images(spec, device, 100 + call)
            err = max(err, worst(flat(compiled(x)), flat(model(x))))
    return err


def training_error(spec, model, compile_fn, device) -> float:
    """One training step per call, on two calls: the loss and every gradient against eager's."""
    eager, mine = _quiet(copy.deepcopy(model).train()), _quiet(copy.deepcopy(model).train())
    compiled = compile_fn(mine)
    err = 0.0
    for call in range(2):
        x = images(spec, device, 200 + call)
        losses = []
        for m, fn in ((eager, eager), (mine, compiled)):
            m.zero_grad(set_to_none=True)
            loss = sum(t.float().square().mean() for t in flat(fn(x)))
            loss.backward()
            losses.append(loss)
        grads_e = [p.grad for p in eager.parameters() if p.grad is not None]
        grads_m = [p.grad for p in mine.parameters() if p.grad is not None]
        err = max(err, rel_error(losses[1], losses[0]), worst(grads_m, grads_e))
    return err


def step_results(model, fn, spec: Spec, device, dtype, seed: int) -> list:
    """One training step of `fn` (over `model`'s parameters) on `dtype` images: the loss and
    every gradient."""
    model.zero_grad(set_to_none=True)
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(BATCH, 3, spec.size, spec.size, generator=g).to(device, dtype)
    loss = sum(t.square().mean() for t in flat(fn(x)))
    loss.backward()
    return [loss.detach()] + [p.grad.detach() for p in model.parameters() if p.grad is not None]


def errors_against_float64(spec: Spec, model, compilers: dict, device) -> dict:
    """label -> the worst relative error of the loss and every gradient of that compiler's
    float32 training step (`compilers[label](module) -> callable`) against eager float64, over
    two steps on fresh inputs (Note [float64 reference])."""
    base = _quiet(copy.deepcopy(model).train())
    ref64 = copy.deepcopy(base).double()
    errors = {}
    for label, compile_fn in compilers.items():
        m = copy.deepcopy(base).float()
        fn, err = compile_fn(m), 0.0
        for call in range(2):
            want = step_results(ref64, ref64, spec, device, torch.float64, 300 + call)
            got = step_results(m, fn, spec, device, torch.float32, 300 + call)
            err = max(err, worst([t.double() for t in got], want))
        errors[label] = err
    return errors


def measure(spec: Spec, device: str, with_torch: bool) -> dict:
    import ember
    import ember_capture
    row = dict(name=spec.name, library=spec.library)
    t0 = time.perf_counter()
    model = build(spec).to(device, DTYPE).eval()
    x = images(spec, device, 1)

    stats = ember_capture.CaptureStats()
    captured = ember_capture.capture(model, lambda gm, inputs: gm.forward, stats=stats)
    with torch.no_grad():
        captured(x)
    row.update(graphs=len(stats.graphs), breaks=len(stats.breaks), eager_frames=len(stats.fallbacks),
               reasons=[str(r)[:300] for r in stats.breaks])
    try:
        with torch.no_grad():
            ember.compile(model, backend="eager", fullgraph=True)(x)
        row["fullgraph"] = True
    except Exception as e:
        row["fullgraph"] = False
        row["fullgraph_error"] = f"{type(e).__name__}: {e}"[:300]
    steps = {
        "eager_inference": lambda: inference_error(spec, model, ember.compile(model, backend="eager"), device),
        "inductor_inference": lambda: inference_error(spec, model, ember.compile(model), device),
        "eager_training": lambda: training_error(spec, model, lambda m: ember.compile(m, backend="eager"), device),
        "inductor_training": lambda: training_error(spec, model, ember.compile, device),
    }
    for key, step in steps.items():
        ember.reset()
        t = time.perf_counter()
        try:
            row[key] = step()
        except Exception as e:
            row[key] = None
            row[key + "_error"] = f"{type(e).__name__}: {e}"[:300]
        row[key + "_s"] = round(time.perf_counter() - t, 1)
    if DTYPE == torch.float32 and row.get("inductor_training") is not None and not ok(row, "inductor_training"):
        ember.reset()  # Note [float64 reference]: the same step, each float32 program against float64
        try:
            errors = errors_against_float64(spec, model, {"ember": ember.compile, "eager": lambda m: m}, device)
            row["inductor_training_f64"], row["eager_training_f64"] = errors["ember"], errors["eager"]
        except Exception as e:
            row["inductor_training_f64_error"] = f"{type(e).__name__}: {e}"[:300]
    if with_torch:
        try:
            import torch._dynamo as dynamo
            dynamo.reset()
            with torch.no_grad():
                out = dynamo.explain(model)(x)
            row.update(torch_graphs=out.graph_count, torch_breaks=out.graph_break_count)
        except Exception as e:
            row["torch_error"] = f"{type(e).__name__}: {e}"[:300]
    row["seconds"] = round(time.perf_counter() - t0, 1)
    return row


# Tolerances on rel_error (max abs error over max abs value): capture alone runs eager's own
# kernels; the inductor reorders float32 reductions and fuses, so it gets more room.
TOL = {"eager_inference": 1e-4, "eager_training": 1e-3, "inductor_inference": 1e-3, "inductor_training": 1e-2}

# Note [float64 reference]: a float32 training step of a deep batch-norm network over a batch of
# 2 is ill-conditioned: two correct float32 programs (eager's, a compiler's: another reduction
# order, one-pass batch statistics) differ from each other by about as much as each differs
# from float64 (docs/capture.md, "torchvision and timm models"; torch's own accuracy harness
# asks the same question). So a default-backend training row that misses TOL against eager
# float32 is measured again against eager float64, and passes when ember's float32 error is
# within F64_FACTOR of eager's own float32 error (or within TOL). A wrong gradient is off by
# far more than either.
F64_FACTOR = 3.0


def ok(row: dict, key: str) -> bool:
    if row.get(key) is not None and row[key] <= TOL[key]:
        return True
    mine, eagers = row.get(key + "_f64"), row.get("eager_training_f64")
    return (key == "inductor_training" and mine is not None and eagers is not None
            and mine <= max(TOL[key], F64_FACTOR * eagers))


def _run_one(name, device, with_torch, timeout) -> dict:
    cmd = [sys.executable, __file__, "--one", name, "--device", device, "--dtype", str(DTYPE).split(".")[1],
           "--batch", str(BATCH)] + (["--torch"] if with_torch else [])
    if timeout <= 0:
        return dict(name=name, error="not run: out of time")
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return dict(name=name, error=f"timed out after {timeout:.0f}s")
    for line in reversed(done.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    return dict(name=name, error=(done.stderr.strip().splitlines() or ["no output"])[-1][:300])


def markdown(rows: list) -> str:
    def cell(r, key):
        if r.get(key) is None:
            return "error"
        if r[key] <= TOL[key]:
            return "yes"
        if ok(r, key):  # Note [float64 reference]
            return f"yes (f64: {r[key + '_f64']:.1e}, eager {r['eager_training_f64']:.1e})"
        return f"NO ({r[key]:.1e})"
    out = ["| model | library | ember graphs | ember breaks | fullgraph | torch.compile graphs | breaks | "
           "capture alone: inference | training | default backend: inference | training |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        if "error" in r:
            out.append(f"| {r['name']} | | | | | | | {r['error'][:80]} | | | |")
            continue
        out.append(f"| {r['name']} | {r['library']} | {r['graphs']} | {r['breaks']} | "
                   f"{'yes' if r['fullgraph'] else 'no'} | {r.get('torch_graphs', '-')} | {r.get('torch_breaks', '-')} | "
                   f"{cell(r, 'eager_inference')} | {cell(r, 'eager_training')} | {cell(r, 'inductor_inference')} | "
                   f"{cell(r, 'inductor_training')} |")
    return "\n".join(out)


def main():
    global DTYPE, BATCH
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--only", default="", help="comma-separated model names")
    p.add_argument("--torch", action="store_true", help="also measure torch.compile (torch._dynamo.explain)")
    p.add_argument("--jobs", type=int, default=1, help="models measured at once (one process each)")
    p.add_argument("--timeout", type=int, default=600, help="seconds per model")
    p.add_argument("--budget", type=float, default=3600, help="seconds for the whole run: later models are skipped")
    p.add_argument("--json", default="", help="write the rows here")
    p.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    p.add_argument("--batch", type=int, default=BATCH)
    p.add_argument("--one", default="", help=argparse.SUPPRESS)
    args = p.parse_args()
    DTYPE, BATCH = getattr(torch, args.dtype), args.batch
    if args.device == "cuda":  # compare float32 with float32: no TF32 on either side
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    if args.one:
        spec = next(s for s in SPECS if s.name == args.one)
        print(json.dumps(measure(spec, args.device, args.torch)), flush=True)
        return
    only = set(filter(None, args.only.split(",")))
    names = [s.name for s in SPECS if not only or s.name in only]
    deadline = time.monotonic() + args.budget
    from concurrent.futures import ThreadPoolExecutor, as_completed
    rows = {}
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        futures = [pool.submit(lambda n: _run_one(n, args.device, args.torch,
                                                  min(args.timeout, deadline - time.monotonic())), n) for n in names]
        for future in as_completed(futures):
            row = future.result()
            rows[row["name"]] = row
            print(json.dumps({k: v for k, v in row.items() if k != "reasons"}), flush=True)
            for r in row.get("reasons", []):
                print("     ", r, flush=True)
            if args.json:
                with open(args.json, "w") as f:
                    json.dump([rows[n] for n in names if n in rows], f, indent=1)
    print(markdown([rows[n] for n in names]))


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    main()
