"""OpInfo samples with requires_grad inputs through `aot` with eager compilers, against eager.

    python packages/ember-autograd/scripts/opinfo_pass_rate.py [--samples N] [--ops a,b,c] [--out FILE]

For each OpInfo in op_db that supports autograd in float32 on CPU: its first N samples
(requires_grad inputs) become a one-node torch-level graph; forward outputs and the gradients
of sum(out * w) (random w) w.r.t. every input must match eager (rtol 1.3e-6, atol 1e-5, float32;
an op's own OpInfo tolerance overrides when larger). Each sample's outcome:
  pass      outputs and gradients match
  mismatch  ran, but a value differs
  refused   aot raised AotError (a clean refusal the facade turns into a fallback)
  crash     any other exception (a bug)
  random    a mismatch in a graph holding a random op (tag nondeterministic_seeded): eager's
            RNG stream is not reproduced op for op, so values cannot be compared
Samples on which eager itself fails are skipped. The pass rate is pass / (all but skipped and
random).
"""
from __future__ import annotations

import argparse
import collections
import sys
import time
import warnings

import torch
import torch.fx
from torch.testing._internal.common_methods_invocations import op_db
from torch.utils import _pytree as pytree

from ember_autograd import AotError, aot

RTOL, ATOL = 1.3e-6, 1e-5


def one_node_graph(fn, args, kwargs):
    """A torch-level graph calling `fn` once; tensors in (args, kwargs) become placeholders."""
    leaves, spec = pytree.tree_flatten((args, kwargs))
    graph = torch.fx.Graph()
    inputs, nodes = [], []
    for i, leaf in enumerate(leaves):
        if isinstance(leaf, torch.Tensor):
            inputs.append(leaf)
            nodes.append(graph.placeholder(f"arg{i}"))
        else:
            nodes.append(leaf)
    call_args, call_kwargs = pytree.tree_unflatten(nodes, spec)
    out = graph.call_function(fn, tuple(call_args), dict(call_kwargs))
    return graph, out, inputs, spec


def finish_graph(graph, out, result):
    if isinstance(result, torch.Tensor):
        graph.output((out,))
    else:
        import operator
        graph.output(tuple(graph.call_function(operator.getitem, (out, i)) for i in range(len(result))))
    return torch.fx.GraphModule({}, graph)


def grads_of(outputs, inputs, weights):
    diff = [(o, w) for o, w in zip(outputs, weights) if isinstance(o, torch.Tensor) and o.requires_grad]
    wrt = [x for x in inputs if x.requires_grad]
    if not diff or not wrt:
        return []
    loss = sum((o * w).sum() for o, w in diff)
    return list(torch.autograd.grad(loss, wrt, allow_unused=True))


def run_sample(op, sample) -> tuple[str, str]:
    fn = op.op
    args, kwargs = (sample.input, *sample.args), dict(sample.kwargs)
    graph, out_node, inputs, spec = one_node_graph(fn, args, kwargs)
    leaves = pytree.tree_leaves((args, kwargs))

    def call(tensors):
        it = iter(tensors)
        new = [next(it) if isinstance(x, torch.Tensor) else x for x in leaves]
        a, k = pytree.tree_unflatten(new, spec)
        return fn(*a, **k)

    def fresh():
        return [x.detach().clone().requires_grad_(x.requires_grad) for x in inputs]

    try:
        eager_in = fresh()
        torch.manual_seed(0)
        expected = call(eager_in)
        flat_expected = [expected] if isinstance(expected, torch.Tensor) else list(expected)
        if not all(isinstance(o, torch.Tensor) for o in flat_expected):
            return "skipped", "non-tensor output"
        weights = [torch.randn_like(o) if o.is_floating_point() else None for o in flat_expected]
        expected_grads = grads_of(flat_expected, eager_in, weights)
    except Exception as e:  # noqa: BLE001
        return "skipped", f"eager: {type(e).__name__}"
    gm = finish_graph(graph, out_node, expected)
    try:
        aot_in = fresh()
        compiled = aot(gm, aot_in, fw_compiler=lambda g, i: g)
        torch.manual_seed(0)
        got = list(compiled(*aot_in))
        got_grads = grads_of(got, aot_in, weights)
    except AotError as e:
        return "refused", e.kind
    except Exception as e:  # noqa: BLE001
        return "crash", f"{type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else ''}"
    rtol, atol = max(RTOL, getattr(op, "rtol", 0) or 0), max(ATOL, getattr(op, "atol", 0) or 0)
    try:
        torch.testing.assert_close(got, flat_expected, rtol=rtol, atol=atol, equal_nan=True)
        torch.testing.assert_close(got_grads, expected_grads, rtol=rtol, atol=atol, equal_nan=True)
    except AssertionError as e:
        graphs = [compiled.artifacts.forward, compiled.artifacts.backward]
        if any(isinstance(n.target, torch._ops.OpOverload) and torch.Tag.nondeterministic_seeded in n.target.tags
               for g in graphs if g is not None for n in g.graph.nodes):
            return "random", ""
        return "mismatch", str(e).splitlines()[0][:120]
    return "pass", ""


def opinfos(names=None):
    for op in op_db:
        if names is not None and op.name not in names:
            continue
        if op.supports_autograd and torch.float32 in op.supported_dtypes("cpu"):
            yield op


def run(names=None, samples: int = 2):
    results = []  # (op name, variant, outcome, detail)
    for op in opinfos(names):
        try:
            it = op.sample_inputs("cpu", torch.float32, requires_grad=True)
            chosen = [s for _, s in zip(range(samples), it)]
        except Exception as e:  # noqa: BLE001
            results.append((op.name, op.variant_test_name, "skipped", f"samples: {type(e).__name__}"))
            continue
        for sample in chosen:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                outcome, detail = run_sample(op, sample)
            results.append((op.name, op.variant_test_name, outcome, detail))
    return results


def summarize(results) -> str:
    counts = collections.Counter(r[2] for r in results)
    attempted = sum(v for k, v in counts.items() if k not in ("skipped", "random"))
    rate = counts["pass"] / attempted if attempted else 0.0
    ops = collections.defaultdict(set)
    for name, variant, outcome, _ in results:
        ops[(name, variant)].add(outcome)
    ops_attempted = [k for k, v in ops.items() if not v <= {"skipped", "random"}]
    ops_passing = [k for k in ops_attempted if ops[k] <= {"pass", "skipped", "random"}]
    lines = [f"samples: {counts['pass']}/{attempted} pass ({100 * rate:.1f}%); "
             + ", ".join(f"{k} {counts[k]}" for k in ("mismatch", "refused", "crash", "random", "skipped")),
             f"ops: {len(ops_passing)}/{len(ops_attempted)} with every sample passing"]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=2)
    parser.add_argument("--ops", default=None)
    parser.add_argument("--out", default=None, help="write per-sample outcomes here")
    a = parser.parse_args(argv)
    start = time.perf_counter()
    results = run(set(a.ops.split(",")) if a.ops else None, a.samples)
    summary = summarize(results)
    print(summary)
    print(f"time: {time.perf_counter() - start:.0f}s")
    if a.out:
        with open(a.out, "w") as f:
            f.write(summary + "\n\n")
            for name, variant, outcome, detail in results:
                if outcome != "pass":
                    f.write(f"{name}{'.' + variant if variant else ''}: {outcome} {detail}\n")


if __name__ == "__main__":
    sys.exit(main())
