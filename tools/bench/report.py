"""From per-model records to rows, geomeans, and the three outputs: terminal, markdown, JSON.

One row per (model, phase, ember backend). Speedups are over eager, paired: eager's median timed
in alternation with the variant's, divided by the variant's (>1 is faster); "ember/tc" is ember's
speedup over torch.compile's, i.e. how much faster ember is than torch.compile (>1: ember).
Without paired eager times (older results), the eager variant's own median stands in.
"""
from __future__ import annotations

import math
from typing import Any

COLUMNS = [
    # (key, header, align)
    ("model", "model", "<"), ("phase", "phase", "<"), ("backend", "ember backend", "<"),
    ("eager_ms", "eager ms", ">"), ("ember_ms", "ember ms", ">"), ("tc_ms", "tc ms", ">"),
    ("ember_speedup", "ember x", ">"), ("tc_speedup", "tc x", ">"), ("ember_vs_tc", "ember/tc", ">"),
    ("ember_first_s", "ember 1st s", ">"), ("tc_first_s", "tc 1st s", ">"),
    ("ember_warm_s", "ember warm 1st s", ">"), ("tc_warm_s", "tc warm 1st s", ">"),
    ("ember_err", "ember err", ">"), ("tc_err", "tc err", ">"),
    ("eager_mb", "eager MB", ">"), ("ember_mb", "ember MB", ">"), ("tc_mb", "tc MB", ">"),
    ("eager_res_mb", "eager res MB", ">"), ("ember_res_mb", "ember res MB", ">"), ("tc_res_mb", "tc res MB", ">"),
    ("notes", "notes", "<"),
]
TC = "torch.compile"


def _ok(res: dict | None, key: str) -> float | None:
    if res is None or res.get("status") != "ok":
        return None
    v = res.get(key)
    return v if isinstance(v, (int, float)) else None


def _ratio(num: float | None, den: float | None) -> float | None:
    return num / den if num is not None and den else None


def _speedup(res: dict | None, eager_ms: float | None) -> float | None:
    """eager / variant, with the eager time taken alongside the variant when there is one."""
    ms = _ok(res, "ms")
    paired = _ok(res, "eager_paired_ms")
    return _ratio(paired if paired is not None else eager_ms, ms)


def _worst_err(res: dict | None) -> tuple[float | None, bool]:
    """(the larger of the output and gradient errors, within tolerance?)"""
    if res is None or res.get("status") != "ok":
        return None, True
    errs = [e for e in (res.get("max_rel_err"), res.get("grad_max_rel_err")) if e is not None]
    return (max(errs) if errs else None), bool(res.get("within_tolerance", True))


def _problem(label: str, res: dict | None) -> tuple[str, str] | None:
    """(full note, short note) for a variant that did not give a clean result, else None."""
    if res is None:
        return None
    status = res.get("status")
    if status != "ok":
        error = res.get("error", "")
        kind = error.split(":", 1)[0] if status == "error" and ":" in error else ""
        short = f"{label}: {status}" + (f" ({kind})" if kind and " " not in kind else "")
        return f"{label}: {status}: {error}".rstrip(": "), short
    if not res.get("within_tolerance", True):
        out, grad = res.get("max_rel_err"), res.get("grad_max_rel_err")
        detail = f"out {out:.1e} (tol {res['tolerance']:.0e})"
        if grad is not None:
            detail += f", grad {grad:.1e} (tol {res['grad_tolerance']:.0e})"
        if res.get("accuracy_note"):
            detail += f"; {res['accuracy_note']}"
        return f"{label}: MISMATCH {detail}", f"{label}: MISMATCH"
    if res.get("accuracy_note"):
        return f"{label}: {res['accuracy_note']}", f"{label}: ok vs float64"
    return None


def build_rows(records: list[dict], variants: list[str]) -> list[dict]:
    backends = [v for v in variants if v.startswith("ember:")] or [None]
    rows = []
    for rec in records:
        if rec["status"] != "ok" and not rec["results"]:
            note = f"{rec['status']}: {rec['reason']}"
            rows.append({"model": rec["model"], "phase": "-", "backend": "-", "status": rec["status"],
                         "notes": note, "notes_short": note})
            continue
        phases = rec["phases"] or sorted({r["phase"] for r in rec["results"]})
        for phase in phases:
            res = {r["variant"]: r for r in rec["results"] if r["phase"] == phase}
            eager, tc = res.get("eager"), res.get(TC)
            for backend in backends:
                em = res.get(backend) if backend else None
                eager_ms, ember_ms, tc_ms = _ok(eager, "ms"), _ok(em, "ms"), _ok(tc, "ms")
                ember_err, ember_within = _worst_err(em)
                tc_err, tc_within = _worst_err(tc)
                notes = [p for p in (_problem("eager", eager), _problem("ember", em), _problem("tc", tc)) if p]
                rows.append({
                    "model": rec["model"], "phase": phase,
                    "backend": backend.split(":", 1)[1] if backend else "-", "status": "ok",
                    "eager_ms": eager_ms, "ember_ms": ember_ms, "tc_ms": tc_ms,
                    "ember_speedup": _speedup(em, eager_ms), "tc_speedup": _speedup(tc, eager_ms),
                    "ember_vs_tc": _ratio(_speedup(em, eager_ms), _speedup(tc, eager_ms)),
                    "ember_first_s": _ok(em, "first_call_s"), "tc_first_s": _ok(tc, "first_call_s"),
                    "ember_warm_s": _ok(em, "warm_first_call_s"), "tc_warm_s": _ok(tc, "warm_first_call_s"),
                    "ember_err": ember_err, "ember_within_tolerance": ember_within,
                    "tc_err": tc_err, "tc_within_tolerance": tc_within,
                    "eager_mb": _ok(eager, "peak_mb"), "ember_mb": _ok(em, "peak_mb"), "tc_mb": _ok(tc, "peak_mb"),
                    "eager_res_mb": _ok(eager, "reserved_mb"), "ember_res_mb": _ok(em, "reserved_mb"),
                    "tc_res_mb": _ok(tc, "reserved_mb"),
                    "ember_status": em.get("status") if em else None, "tc_status": tc.get("status") if tc else None,
                    "notes": "; ".join(n for n, _ in notes), "notes_short": "; ".join(n for _, n in notes),
                })
    return rows


def geomean(values: list[float | None]) -> tuple[float | None, int]:
    xs = [v for v in values if v is not None and v > 0 and math.isfinite(v)]
    return (math.exp(sum(map(math.log, xs)) / len(xs)) if xs else None), len(xs)


def geomeans(rows: list[dict]) -> list[dict]:
    """Per (phase, backend): geomean of each ratio over the rows where that ratio exists."""
    out = []
    keys = sorted({(r["phase"], r["backend"]) for r in rows if r.get("status") == "ok"})
    for phase, backend in keys:
        sel = [r for r in rows if r.get("status") == "ok" and (r["phase"], r["backend"]) == (phase, backend)]
        entry = {"phase": phase, "backend": backend}
        for k in ("ember_speedup", "tc_speedup", "ember_vs_tc"):
            entry[k], entry[f"{k}_n"] = geomean([r.get(k) for r in sel])
        if any(entry[f"{k}_n"] for k in ("ember_speedup", "tc_speedup")):
            out.append(entry)
    return out


# --------------------------------------------------------------------------- formatting

def fmt_ms(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:.0f}" if v >= 100 else f"{v:.1f}" if v >= 10 else f"{v:.2f}" if v >= 1 else f"{v:.3f}"


def fmt_x(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def fmt_s(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}"


def fmt_err(v: float | None, within: bool = True) -> str:
    return "-" if v is None else f"{v:.1e}" + ("" if within else " !")


def fmt_mb(v: float | None) -> str:
    return "-" if v is None else f"{v:.0f}"


def cells(row: dict) -> dict[str, str]:
    return {
        "model": row["model"], "phase": row["phase"], "backend": row["backend"],
        "eager_ms": fmt_ms(row.get("eager_ms")), "ember_ms": fmt_ms(row.get("ember_ms")),
        "tc_ms": fmt_ms(row.get("tc_ms")), "ember_speedup": fmt_x(row.get("ember_speedup")),
        "tc_speedup": fmt_x(row.get("tc_speedup")), "ember_vs_tc": fmt_x(row.get("ember_vs_tc")),
        "ember_first_s": fmt_s(row.get("ember_first_s")), "tc_first_s": fmt_s(row.get("tc_first_s")),
        "ember_warm_s": fmt_s(row.get("ember_warm_s")), "tc_warm_s": fmt_s(row.get("tc_warm_s")),
        "ember_err": fmt_err(row.get("ember_err"), row.get("ember_within_tolerance", True)),
        "tc_err": fmt_err(row.get("tc_err"), row.get("tc_within_tolerance", True)),
        "eager_mb": fmt_mb(row.get("eager_mb")), "ember_mb": fmt_mb(row.get("ember_mb")),
        "tc_mb": fmt_mb(row.get("tc_mb")), "eager_res_mb": fmt_mb(row.get("eager_res_mb")),
        "ember_res_mb": fmt_mb(row.get("ember_res_mb")), "tc_res_mb": fmt_mb(row.get("tc_res_mb")),
        "notes": row.get("notes", ""),
        "notes_short": row.get("notes_short", row.get("notes", "")),
    }


def geomean_cells(g: dict) -> dict[str, str]:
    n = max(g["ember_speedup_n"], g["tc_speedup_n"])
    return {"model": f"geomean (n={n})", "phase": g["phase"], "backend": g["backend"],
            "ember_speedup": fmt_x(g["ember_speedup"]), "tc_speedup": fmt_x(g["tc_speedup"]),
            "ember_vs_tc": fmt_x(g["ember_vs_tc"]),
            "notes": f"over {g['ember_speedup_n']} ember / {g['tc_speedup_n']} tc / "
                     f"{g['ember_vs_tc_n']} paired rows"}


def columns(rows: list[dict]) -> list[tuple[str, str, str]]:
    """COLUMNS, less the warm first-call ones when no row has a warm run (--warm-cache)."""
    warm = any(r.get("ember_warm_s") is not None or r.get("tc_warm_s") is not None for r in rows)
    return [c for c in COLUMNS if warm or c[0] not in ("ember_warm_s", "tc_warm_s")]


def _table(rows: list[dict], gms: list[dict], notes_width: int | None) -> tuple[list[str], list[list[str]]]:
    """Header and cells; with `notes_width` (the terminal), short notes cut to that width."""
    headers = [h for _, h, _ in columns(rows)]
    body = []
    for c in [cells(r) for r in rows] + [geomean_cells(g) for g in gms]:
        if notes_width is not None:
            c["notes"] = c.get("notes_short", c.get("notes", ""))
        line = [c.get(k, "") for k, _, _ in columns(rows)]
        if notes_width is not None and len(line[-1]) > notes_width:
            line[-1] = line[-1][: notes_width - 3] + "..."
        body.append(line)
    return headers, body


def terminal_table(rows: list[dict], gms: list[dict], notes_width: int = 70) -> str:
    headers, body = _table(rows, gms, notes_width)
    widths = [max(len(x) for x in col) for col in zip(headers, *body)]
    aligns = [a for _, _, a in columns(rows)]

    def line(vals):
        return "  ".join(f"{v:{a}{w}}" for v, a, w in zip(vals, aligns, widths)).rstrip()

    sep = "  ".join("-" * w for w in widths)
    n_rows = len(rows)
    out = [line(headers), sep] + [line(b) for b in body[:n_rows]]
    if gms:
        out += [sep] + [line(b) for b in body[n_rows:]]
    return "\n".join(out)


def markdown_table(rows: list[dict], gms: list[dict]) -> str:
    headers, body = _table(rows, gms, None)
    aligns = [a for _, _, a in columns(rows)]
    esc = [[v.replace("|", "\\|") for v in b] for b in body]
    out = ["| " + " | ".join(headers) + " |",
           "|" + "|".join(":--" if a == "<" else "--:" for a in aligns) + "|"]
    out += ["| " + " | ".join(b) + " |" for b in esc[: len(rows)]]
    if gms:
        out += ["| " + " | ".join(f"**{v}**" if v else "" for v in b) + " |" for b in esc[len(rows):]]
    return "\n".join(out)


LEGEND = """\
Columns: `eager ms`, `ember ms`, `tc ms` (torch.compile): median time of one call (inference) or
one training step (forward, loss, backward, SGD step); `ember x`, `tc x`: speedup over eager, with
eager timed in alternation with the variant (so a slow spell of the machine hits both);
`ember/tc`: ember x / tc x (>1: ember is faster than torch.compile); `1st s`: wall seconds of the first
call, compile included (`warm 1st s`, with --warm-cache: the same in a second process, on the caches
the first filled); `err`: max relative error vs eager, max|got-ref|/max|ref| per tensor, over
outputs (and, for train, the loss and every gradient after one step); `!` marks an error beyond
tolerance (float32 1e-3, bfloat16 3e-2, float16 1e-2; gradients 10x) that is also worse than
eager's own error against a float64 run ("ok vs float64" in the notes when it is not); `MB`: peak
memory (CUDA: max_memory_allocated, absolute; CPU: peak RSS of one call above the pre-call
baseline); `res MB` (CUDA): peak max_memory_reserved, what the allocator holds from the driver,
CUDA-graph pools included, comparable across compilers. Details: tools/bench/README.md."""


def markdown(meta: dict, rows: list[dict], gms: list[dict], png_name: str | None) -> str:
    head = [f"# ember benchmark: suite `{meta['suite']}` on {meta['device_name']}", ""]
    for k in ("date", "command", "host", "cpu", "gpu", "python", "torch", "triton", "ember", "git",
              "dtype", "mode", "backends", "torch_compile_backend", "run"):
        if meta.get(k) is not None:
            head.append(f"- {k}: `{meta[k]}`")
    parts = ["\n".join(head), markdown_table(rows, gms), LEGEND]
    if png_name:
        parts.append(f"![speedup over eager]({png_name})")
    return "\n\n".join(parts) + "\n"


def _bar(speedup: float | None, status: str | None) -> float | str | None:
    """A bar's value, or the word that stands in for it (the eager time may be what is missing)."""
    if speedup is not None:
        return speedup
    return status if status not in (None, "ok") else None


def chart_groups(rows: list[dict]) -> tuple[list[tuple[str, list[Any]]], list[str]]:
    """Bars for the PNG: one group per (model, phase), ember backends then torch.compile."""
    backends = list(dict.fromkeys(r["backend"] for r in rows if r.get("status") == "ok" and r["backend"] != "-"))
    series = [f"ember:{b}" for b in backends] + [TC]
    groups: dict[tuple[str, str], list] = {}
    for r in rows:
        if r.get("status") != "ok":
            continue
        vals = groups.setdefault((r["model"], r["phase"]), [None] * len(series))
        if r["backend"] in backends:
            vals[backends.index(r["backend"])] = _bar(r.get("ember_speedup"), r.get("ember_status"))
        vals[-1] = _bar(r.get("tc_speedup"), r.get("tc_status"))
    return [(f"{m} {p}", v) for (m, p), v in groups.items()], series
