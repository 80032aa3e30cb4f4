"""The GEMM template against cuBLAS on the seeds MLP's and BERT's matmul shapes (a GPU is needed).

    python packages/ember-inductor/benchmarks/gemm_template.py [--dtypes float16,float32] [--json out.json]

For each shape (M, N, K) of `x @ wᵀ` and dtype: cuBLAS (torch.mm) alone; every template
configuration with no epilogue (the best is shown); cuBLAS followed by a separate bias+ReLU
kernel; the template with bias+ReLU fused; and whether the compiled template uses Hopper's wgmma.
Times are `triton.testing.do_bench` medians in microseconds.
"""
from __future__ import annotations

import argparse
import json
import tempfile

import torch
import triton
from triton.testing import do_bench

import ember_prims
from ember_inductor.graph_builder import GraphBuilder
from ember_inductor.templates import gemm
from ember_inductor.templates.epilogue import build_epilogue, plain
from ember_inductor.templates.kernel import GemmCall

P = ember_prims.ops
aten = torch.ops.aten

SHAPES = {  # (M, N, K): x[M, K] @ w[N, K]ᵀ
    "mlp fc1 (512x1024 @ 1024x2048)": (512, 2048, 1024),
    "mlp fc2 (512x2048 @ 2048x1024)": (512, 1024, 2048),
    "bert qkv/out (1024x768 @ 768x768)": (1024, 768, 768),
    "bert ffn up (1024x768 @ 768x3072)": (1024, 3072, 768),
    "bert ffn down (1024x3072 @ 3072x768)": (1024, 768, 3072),
}


def bias_relu_epilogue(m, n, k, dtype):
    b = GraphBuilder()
    x = b.input(torch.empty(m, k, dtype=dtype, device="meta"))
    w = b.input(torch.empty(n, k, dtype=dtype, device="meta"))
    bias = b.input(torch.empty(n, dtype=dtype, device="meta"))
    h = b.call(aten.mm.default, x, b.call(P.permute.default, w, [1, 0]))
    h = b.call(P.add.default, h, b.call(P.broadcast_in_dim.default, bias, [m, n], [1]))
    zero = b.call(P.full.default, [m, n], 0.0, dtype=dtype, device=torch.device("meta"))
    b.output(b.call(P.maximum.default, h, zero))
    mm = next(nd for nd in b.build().graph.nodes if nd.target is aten.mm.default)
    return build_epilogue(mm)[0]


def bench(fn) -> float:
    return do_bench(fn, warmup=5, rep=40, return_mode="median") * 1e3


def run(dtypes, cache_dir) -> list[dict]:
    rows = []
    for label, (m, n, k) in SHAPES.items():
        for dtype in dtypes:
            x = torch.randn(m, k, dtype=dtype, device="cuda")
            w = torch.randn(n, k, dtype=dtype, device="cuda")
            bias = torch.randn(n, dtype=dtype, device="cuda")
            tf32 = torch.backends.cuda.matmul.allow_tf32
            problem = gemm.Problem(1, m, n, k, dtype, "tf32" if dtype == torch.float32 and tf32 else "ieee")
            out = [((m, n), (n, 1), dtype)]
            t_cublas = bench(lambda: torch.mm(x, w.t()))
            best, best_cfg, wgmma = float("inf"), None, False
            for cfg in gemm.configs(problem):
                call = GemmCall(problem, plain(dtype), cfg, out, ("mat", "matT", "mat"), cache_dir)
                try:
                    t = bench(lambda: call(x, w))
                except Exception as e:  # noqa: BLE001  (a config that does not fit: reported, skipped)
                    print(f"  {label} {cfg}: {type(e).__name__}")
                    continue
                if t < best:
                    best, best_cfg = t, cfg
                    wgmma = any("wgmma" in k.asm.get("ptx", "") for k in _compiled(call))
            epi = bias_relu_epilogue(m, n, k, dtype)
            fused = GemmCall(problem, epi, best_cfg, out, ("mat", "matT", "mat"), cache_dir)
            separate = GemmCall(problem, epi, best_cfg, out, ("mat", "matT", "mat"), cache_dir, pointwise=True)
            t_fused = bench(lambda: fused(x, w, bias))
            product = torch.mm(x, w.t())
            t_sep = t_cublas + bench(lambda: separate(product, bias))
            torch.testing.assert_close(fused(x, w, bias), torch.relu(x @ w.t() + bias), rtol=2e-2, atol=2e-2)
            rows.append(dict(shape=label, dtype=str(dtype).removeprefix("torch."), cublas_us=t_cublas,
                             template_us=best, config=str(best_cfg), wgmma=wgmma,
                             cublas_plus_bias_relu_us=t_sep, template_bias_relu_fused_us=t_fused))
    return rows


def _compiled(call: GemmCall):
    fn = call.kernel(False)
    for per_device in getattr(fn, "device_caches", {}).values():
        yield from per_device[0].values()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dtypes", default="float16,float32")
    ap.add_argument("--json")
    args = ap.parse_args()
    dtypes = [getattr(torch, d) for d in args.dtypes.split(",")]
    rows = run(dtypes, tempfile.mkdtemp(prefix="ember-gemm-bench-"))
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}, "
          f"tf32 {torch.backends.cuda.matmul.allow_tf32}")
    print(f"{'shape':38} {'dtype':8} {'cuBLAS':>8} {'template':>9} {'cuBLAS/tmpl':>11} {'wgmma':>5} "
          f"{'cuBLAS+epi':>10} {'fused':>8} {'sep/fused':>9}  best config")
    for r in rows:
        print(f"{r['shape']:38} {r['dtype']:8} {r['cublas_us']:8.1f} {r['template_us']:9.1f} "
              f"{r['cublas_us'] / r['template_us']:11.2f} {str(r['wgmma']):>5} {r['cublas_plus_bias_relu_us']:10.1f} "
              f"{r['template_bias_relu_fused_us']:8.1f} {r['cublas_plus_bias_relu_us'] / r['template_bias_relu_fused_us']:9.2f}"
              f"  {r['config']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
