"""The benchmark harness, end to end on CPU: real models through real eager, ember and
torch.compile, each model in its own subprocess, as `python tools/bench.py` runs them.

ember's layers are being written while this harness is; so these tests require each ember
variant to be *reported* (a time or an error in its row), not to succeed.
"""
from __future__ import annotations

import json
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "tools" / "bench.py"
sys.path.insert(0, str(REPO / "tools"))

from bench import png, report  # noqa: E402


def run_bench(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, str(BENCH), *args, "--no-live"], cwd=REPO,
                          capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    return proc


def read_png(data: bytes) -> tuple[int, int, bytes]:
    """Parse an 8-bit RGB PNG strictly (signature, chunk CRCs, filter bytes); return w, h, pixels."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, chunks = 8, []
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])
        assert crc == zlib.crc32(kind + body), f"bad CRC in {kind!r}"
        chunks.append((kind, body))
        pos += 12 + length
    assert [k for k, _ in chunks][0] == b"IHDR" and chunks[-1][0] == b"IEND"
    w, h, depth, color, _, _, _ = struct.unpack(">IIBBBBB", chunks[0][1])
    assert (depth, color) == (8, 2)
    raw = zlib.decompress(b"".join(b for k, b in chunks if k == b"IDAT"))
    assert len(raw) == h * (1 + 3 * w)
    rows = [raw[y * (1 + 3 * w):(y + 1) * (1 + 3 * w)] for y in range(h)]
    assert all(r[0] == 0 for r in rows)
    return w, h, b"".join(r[1:] for r in rows)


def result(doc: dict, model: str, variant: str, phase: str) -> dict:
    (rec,) = [m for m in doc["models"] if m["model"] == model]
    (res,) = [r for r in rec["results"] if r["variant"] == variant and r["phase"] == phase]
    return res


def test_tiny_suite_end_to_end(tmp_path):
    """One run of the tiny suite (kept to one test: under pytest-xdist, a shared fixture would
    run the suite once per worker).

    ember and torch.compile both use their `aot_eager` backend here: real capture and real
    autograd lowering, without the C++ builds of an inductor, which would take this test past a
    minute on 2 cores (the harness treats every backend alike)."""
    proc = run_bench("--suite", "tiny", "--quick", "--out", str(tmp_path),
                     "--backends", "aot_eager", "--torch-backend", "aot_eager")
    doc = json.loads((tmp_path / "results.json").read_text())
    check_json(doc)
    check_markdown_and_terminal(tmp_path, proc)
    check_png(tmp_path)


def check_json(doc: dict) -> None:
    assert doc["meta"]["suite"] == "tiny" and doc["meta"]["device"] == "cpu"
    assert doc["meta"]["torch"].startswith("2.")
    assert [m["model"] for m in doc["models"]] == ["tiny_fn", "tiny_mlp"]
    assert [m["phases"] for m in doc["models"]] == [["infer"], ["infer", "train"]]
    for model, phase in [("tiny_fn", "infer"), ("tiny_mlp", "infer"), ("tiny_mlp", "train")]:
        for variant in ("eager", "torch.compile"):
            r = result(doc, model, variant, phase)
            assert r["status"] == "ok", r
            assert r["ms"] > 0 and r["reps"] >= 3 and r["first_call_s"] > 0
            assert r["within_tolerance"] and r["max_rel_err"] <= 1e-3
            assert r["peak_mb"] is not None and r["peak_mb"] >= 0
            assert (r["grad_max_rel_err"] is not None) == (phase == "train")
        assert result(doc, model, "eager", phase)["max_rel_err"] == 0.0  # eager against itself
        ember = result(doc, model, "ember:aot_eager", phase)
        assert ember["status"] in ("ok", "error", "timeout"), ember
        if ember["status"] == "ok":
            assert ember["ms"] > 0 and ember["max_rel_err"] is not None
        else:
            assert ember["error"]
    rows = doc["rows"]
    assert [(r["model"], r["phase"], r["backend"]) for r in rows] == [
        ("tiny_fn", "infer", "aot_eager"), ("tiny_mlp", "infer", "aot_eager"), ("tiny_mlp", "train", "aot_eager")]
    for r, (model, phase) in zip(rows, [("tiny_fn", "infer"), ("tiny_mlp", "infer"), ("tiny_mlp", "train")]):
        tc = result(doc, model, "torch.compile", phase)
        assert tc["eager_paired_ms"] > 0  # eager timed in alternation with torch.compile
        assert r["tc_speedup"] == pytest.approx(tc["eager_paired_ms"] / r["tc_ms"])
        if r["ember_ms"] is None:
            assert "ember: " in r["notes"]  # why ember has no time is in the row
    gms = {(g["phase"], g["backend"]): g for g in doc["geomeans"]}
    assert gms[("train", "aot_eager")]["tc_speedup"] == pytest.approx(rows[2]["tc_speedup"])
    assert gms[("infer", "aot_eager")]["tc_speedup_n"] == 2
    assert doc["meta"]["torch_compile_backend"] == "aot_eager"


def check_markdown_and_terminal(out: Path, proc: subprocess.CompletedProcess) -> None:
    md = (out / "results.md").read_text()
    assert "| model | phase | ember backend | eager ms |" in md
    assert md.count("| tiny_mlp |") == 2 and "| tiny_fn |" in md
    assert "geomean" in md and "![speedup over eager](speedups.png)" in md
    assert "torch: `2." in md and "command: `python tools/bench.py --suite tiny" in md
    table = proc.stdout
    assert table.splitlines()[1].startswith("model") and "tiny_mlp" in table and "geomean" in table
    assert "[2/2] tiny_mlp" in proc.stderr  # progress


def check_png(out: Path) -> None:
    w, h, pixels = read_png((out / "speedups.png").read_bytes())
    assert w > 300 and h > 100
    colours = {pixels[i:i + 3] for i in range(0, len(pixels), 3)}
    assert bytes(png.REFERENCE_COLOR) in colours  # torch.compile's bars are drawn
    assert bytes(png.BLACK) in colours  # and the labels


def test_failures_stay_in_their_rows(tmp_path):
    """A model that raises, one that kills its process in the middle of a variant, and an ember
    backend that does not exist: each is reported in its own row, and the suite goes on.
    (`selftest_abort`, which dies while building, is left out: a process start costs seconds.)"""
    models = "selftest_raises,selftest_abort_second_call"
    run_bench("--models", models, "--backends", "no_such_backend", "--phases", "infer",
              "--no-torch-compile", "--quick", "--json", str(tmp_path / "r.json"),
              "--markdown", str(tmp_path / "r.md"))
    doc = json.loads((tmp_path / "r.json").read_text())
    assert [m["model"] for m in doc["models"]] == models.split(",")

    raises = result(doc, "selftest_raises", "eager", "infer")
    assert raises["status"] == "error" and "raises on purpose" in raises["error"]

    # The next model ran. Its worker died in the eager variant; a fresh worker went on with
    # the ember variant, which failed on its unknown backend.
    crashed = result(doc, "selftest_abort_second_call", "eager", "infer")
    assert crashed["status"] == "crashed" and "SIGABRT" in crashed["error"]
    backend_error = result(doc, "selftest_abort_second_call", "ember:no_such_backend", "infer")
    assert backend_error["status"] == "error" and backend_error["error"]

    md = (tmp_path / "r.md").read_text()
    assert "raises on purpose" in md and "SIGABRT" in md and backend_error["error"][:40] in md
    assert all(f"| {m} |" in md for m in models.split(","))


def test_rows_and_geomeans_from_records():
    ok = {"status": "ok", "first_call_s": 1.0, "reps": 10, "max_rel_err": 0.0, "grad_max_rel_err": None,
          "tolerance": 1e-3, "within_tolerance": True, "peak_mb": 1.0}
    records = [
        {"model": "a", "status": "ok", "phases": ["infer"], "results": [
            {"variant": "eager", "phase": "infer", **ok, "ms": 4.0},
            {"variant": "ember:inductor", "phase": "infer", **ok, "ms": 1.0},
            {"variant": "torch.compile", "phase": "infer", **ok, "ms": 2.0}]},
        {"model": "b", "status": "ok", "phases": ["infer"], "results": [
            {"variant": "eager", "phase": "infer", **ok, "ms": 9.0},
            {"variant": "ember:inductor", "phase": "infer", **ok, "ms": 1.0, "max_rel_err": 0.5,
             "within_tolerance": False},
            {"variant": "torch.compile", "phase": "infer", "status": "timeout", "error": "timed out"}]},
        {"model": "c", "status": "skipped", "reason": "needs timm (not installed)", "phases": [], "results": []},
    ]
    rows = report.build_rows(records, ["eager", "ember:inductor", "torch.compile"])
    assert [r["ember_speedup"] for r in rows[:2]] == [4.0, 9.0]
    assert rows[0]["ember_vs_tc"] == 2.0 and rows[1]["tc_speedup"] is None
    assert "MISMATCH" in rows[1]["notes"] and "tc: timeout" in rows[1]["notes"]
    assert rows[2]["notes"] == "skipped: needs timm (not installed)"
    (g,) = report.geomeans(rows)
    assert g["ember_speedup"] == pytest.approx(6.0) and g["ember_speedup_n"] == 2
    assert g["tc_speedup"] == pytest.approx(2.0) and g["ember_vs_tc_n"] == 1
    paired = dict(records[0], model="d")
    paired["results"] = [dict(r, eager_paired_ms=5.0) if r["variant"] != "eager" else r for r in records[0]["results"]]
    (d,) = report.build_rows([paired], ["eager", "ember:inductor", "torch.compile"])
    assert (d["ember_speedup"], d["tc_speedup"], d["ember_vs_tc"]) == (5.0, 2.5, 2.0)  # paired eager
    text = report.terminal_table(rows, [g])
    assert "0.5e+00 !" not in text and "5.0e-01 !" in text  # a mismatch is flagged in its cell


def test_png_writer_round_trip():
    data = png.bar_chart([("m infer", [2.0, 0.5]), ("m train", [None, 1.0])], ["ember:x", "torch.compile"], "t")
    w, h, pixels = read_png(data)
    assert len(pixels) == 3 * w * h


def test_warm_cache_columns_side_by_side():
    from bench.runner import merge_warm
    ok = {"status": "ok", "reps": 10, "max_rel_err": 0.0, "tolerance": 1e-3, "within_tolerance": True, "ms": 1.0}
    cold = {"model": "a", "status": "ok", "phases": ["infer"], "results": [
        {"variant": "eager", "phase": "infer", **ok, "first_call_s": 0.1},
        {"variant": "ember:inductor", "phase": "infer", **ok, "first_call_s": 9.0}]}
    warm = {"model": "a", "status": "ok", "phases": ["infer"], "results": [
        {"variant": "eager", "phase": "infer", **ok, "first_call_s": 0.1},
        {"variant": "ember:inductor", "phase": "infer", **ok, "first_call_s": 1.5}]}
    assert "warm" not in report.terminal_table(report.build_rows([cold], ["eager", "ember:inductor"]), [])
    merge_warm(cold, warm)
    (row,) = report.build_rows([cold], ["eager", "ember:inductor"])
    assert (row["ember_first_s"], row["ember_warm_s"]) == (9.0, 1.5)
    text = report.terminal_table([row], [])
    assert "ember 1st s" in text and "ember warm 1st s" in text and " 1.5 " in text
