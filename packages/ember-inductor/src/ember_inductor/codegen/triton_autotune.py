"""Block sizes for generated Triton kernels: a heuristic pick, and a small cached autotune.

`candidates(meta)` lists a few launch configs for a kernel's layout and sizes; the first is the
heuristic choice used when autotuning is off (and always under the interpreter). `autotune`
times each candidate with `triton.testing.do_bench` (median of event-timed runs) on the real
arguments and remembers the winner in `<cache_dir>/triton/autotune.json`, keyed by the kernel's
source hash and the GPU's name, so a second process does not re-benchmark.
"""
from __future__ import annotations

import json
import os
import threading
from dataclasses import asdict, dataclass

import torch

from ember_inductor.codegen.atomic import write_text_atomic

_lock = threading.Lock()


@dataclass(frozen=True)
class LaunchConfig:
    XBLOCK: int = 1
    RBLOCK: int | None = None   # looped reductions only (persistent ones fix it in the source)
    YBLOCK: int | None = None   # tiled 2-D pointwise only
    num_warps: int = 4
    num_stages: int = 1

    def kwargs(self) -> dict:
        kw = {"XBLOCK": self.XBLOCK, "num_warps": self.num_warps, "num_stages": self.num_stages}
        if self.RBLOCK is not None:
            kw["RBLOCK"] = self.RBLOCK
        if self.YBLOCK is not None:
            kw["YBLOCK"] = self.YBLOCK
        return kw


def next_pow2(n: int) -> int:
    return 1 << max(0, (int(n) - 1).bit_length())


def candidates(meta: dict) -> list[LaunchConfig]:
    """A few configs for a kernel; the heuristic pick first."""
    layout, xnumel = meta["layout"], meta["xnumel"]
    if layout == "pointwise":
        x = min(1024, next_pow2(xnumel))
        out = [LaunchConfig(XBLOCK=x, num_warps=4 if x >= 512 else max(1, x // 128))]
        out += [LaunchConfig(XBLOCK=b, num_warps=w) for b, w in ((512, 4), (2048, 8), (1024, 8))
                if b <= next_pow2(xnumel)]
    elif layout == "tiled":
        ynumel = meta["ynumel"]
        x, y = min(64, next_pow2(xnumel)), min(64, next_pow2(ynumel))
        out = [LaunchConfig(XBLOCK=x, YBLOCK=y, num_warps=4)]
        out += [LaunchConfig(XBLOCK=min(32, x), YBLOCK=min(32, y), num_warps=4),
                LaunchConfig(XBLOCK=min(128, next_pow2(xnumel)), YBLOCK=min(32, y), num_warps=8)]
    elif layout == "persistent":
        r = meta["rblock"]
        warps = max(1, min(16, r // 512))  # 8 for 4096: what the autotuner picked on an H100
        x = max(1, min(64, 1024 // r, next_pow2(xnumel)))
        out = [LaunchConfig(XBLOCK=x, num_warps=max(warps, 2 if x * r >= 512 else 1))]
        out += [LaunchConfig(XBLOCK=x, num_warps=min(16, max(1, warps * 2))),
                LaunchConfig(XBLOCK=x, num_warps=max(1, warps // 2))]
        if x * r <= 4096 and xnumel >= 2 * x:
            out.append(LaunchConfig(XBLOCK=2 * x, num_warps=min(16, warps * 2)))
    elif meta.get("column"):  # reduction over a strided dim: tiles of columns
        x = min(64, next_pow2(xnumel))
        # enough programs to fill the GPU (~2 per SM of an H100) before wide tiles
        x_fill = x
        while x_fill > 16 and (xnumel + x_fill - 1) // x_fill < 264:
            x_fill //= 2
        r_fill = min(max(16, next_pow2(meta["rnumel"]) // 4), 4096 // x_fill)
        out = [LaunchConfig(XBLOCK=x_fill, RBLOCK=r_fill, num_warps=8),
               LaunchConfig(XBLOCK=x, RBLOCK=64, num_warps=8),
               LaunchConfig(XBLOCK=min(128, next_pow2(xnumel)), RBLOCK=32, num_warps=8),
               LaunchConfig(XBLOCK=min(32, x), RBLOCK=128, num_warps=8),
               LaunchConfig(XBLOCK=x, RBLOCK=32, num_warps=4)]
    else:  # looped reduction (4096/16 warps: what the autotuner picked for 64K-wide rows)
        # never more than a quarter of the row per step, so short rows still loop
        cap = lambda r: min(r, max(16, next_pow2(meta["rnumel"]) // 4))  # noqa: E731
        out = [LaunchConfig(XBLOCK=1, RBLOCK=cap(4096), num_warps=min(16, max(1, cap(4096) // 256))),
               LaunchConfig(XBLOCK=1, RBLOCK=cap(2048), num_warps=min(8, max(1, cap(2048) // 256))),
               LaunchConfig(XBLOCK=1, RBLOCK=cap(1024), num_warps=min(4, max(1, cap(1024) // 256))),
               LaunchConfig(XBLOCK=2, RBLOCK=cap(1024), num_warps=min(8, max(1, cap(1024) // 128)))]
    seen, unique = set(), []
    for c in out:
        if c not in seen:
            seen.add(c)
            unique.append(c)
    return unique


def _cache_path(cache_dir: str) -> str:
    return os.path.join(os.path.expanduser(cache_dir), "triton", "autotune.json")


def _read(cache_dir: str) -> dict:
    try:
        with open(_cache_path(cache_dir)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def cached_config(cache_dir: str, key: str) -> LaunchConfig | None:
    entry = _read(cache_dir).get(key)
    return LaunchConfig(**entry) if entry else None


def store_config(cache_dir: str, key: str, config: LaunchConfig) -> None:
    path = _cache_path(cache_dir)
    with _lock:
        data = _read(cache_dir)
        data[key] = asdict(config)
        write_text_atomic(path, json.dumps(data, indent=1, sort_keys=True))  # Note [atomic cache writes]


def autotune(key: str, configs: list[LaunchConfig], run, cache_dir: str) -> LaunchConfig:
    """Time `run(config)` for each config on the current GPU; cache and return the fastest.

    `run` must be safe to repeat (the caller passes scratch copies of in-place buffers).
    """
    from triton.testing import do_bench

    full_key = f"{key}:{torch.cuda.get_device_name()}"
    hit = cached_config(cache_dir, full_key)
    if hit is not None:
        return hit
    timings = []
    for cfg in configs:
        try:
            ms = do_bench(lambda: run(cfg), warmup=5, rep=20, return_mode="median")
        except Exception:  # a config that does not compile (too many registers) just loses
            continue
        timings.append((ms, cfg))
    if not timings:
        raise RuntimeError(f"no launch config of kernel {key} ran")
    best = min(timings, key=lambda t: t[0])[1]
    store_config(cache_dir, full_key, best)
    return best
