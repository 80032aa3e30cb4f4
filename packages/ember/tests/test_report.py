"""The compile report (Note [compile report], Note [one report per run]) and the progress line
(Note [progress line])."""
import html.parser
import os
import select
import subprocess
import sys
import tty

import pytest
import torch

import ember
from ember import progress, trace
from ember.report import STAGES
from ember.report_html import render


def step(x, w):
    h = torch.tanh(x @ w)
    if h.sum() > 0:  # a graph break (data-dependent branch)
        h = h * 2
    return torch.relu(h).sum()


@pytest.fixture(autouse=True)
def program(monkeypatch):
    """A fresh program trace per test: the process's one report would collect every test's."""
    fresh = trace.ProgramTrace()
    monkeypatch.setattr(trace, "PROGRAM", fresh)
    return fresh


def _run(backend, where, **options):
    compiled = ember.compile(step, backend=backend,
                             options={"trace.enabled": True, "trace.dir": str(where), **options})
    w = torch.randn(5, 3, requires_grad=True)
    for dtype in (torch.float32, torch.float64):  # the second dtype fails a guard: a recompile
        x = torch.randn(4, 5, dtype=dtype)
        wd = w.detach().to(dtype).requires_grad_()
        we = wd.detach().clone().requires_grad_()
        out = compiled(x, wd)
        out.backward()
        expected = step(x, we)
        expected.backward()
        torch.testing.assert_close(out, expected)
        torch.testing.assert_close(wd.grad, we.grad)
    return compiled


class _Stages(html.parser.HTMLParser):
    """graph id -> the data-stage of each stage inside it; section ids and classes."""

    def __init__(self):
        super().__init__()
        self.graphs, self.sections, self._graph = {}, set(), None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "details" and "graph" in (a.get("class") or "").split():
            self._graph = a["id"]
            self.graphs[self._graph] = []
        elif tag == "details" and a.get("class") == "stage":
            self.graphs[self._graph].append(a["data-stage"])
        elif tag == "section":
            self.sections.add(a.get("id") or a.get("class"))


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_report_shows_every_stage_of_every_graph(backend, tmp_path):
    compiled = _run(backend, tmp_path)
    report = ember.compile_report(compiled)
    assert len(report.graphs) == 4  # (before, after the break) x (float32, float64)
    assert len(report.breaks) >= 1 and report.breaks[0].lineno == step.__code__.co_firstlineno + 2
    frame, where, why = report.recompiles[0]
    assert frame == "step" and where.endswith(f":{step.__code__.co_firstlineno}")
    assert "L['x'].dtype is torch.float32 (got torch.float64)" in why
    expected = ["captured", "joint", "forward", "backward", "prims forward", "prims backward"]
    if backend == "inductor":
        expected += ["fused kernels forward", "generated source forward", "fused kernels backward",
                     "generated source backward"]
    for g in report.graphs:
        assert sorted(s.name for s in g.stages) == sorted(expected), g.index
        assert all(s.text for s in g.stages)
        assert [s.name for s in g.stages] == [n for n in STAGES if n in expected]
    frame = report.frames[0]
    lines = dict(frame.source)
    assert "h.sum() > 0" in lines[min(frame.breaks)] and frame.captured  # the break's line, captured lines
    assert all(e.guards for e in frame.entries)

    page = render([report])
    parser = _Stages()
    parser.feed(page)
    assert {"summary", "frames", "breaks", "recompiles", "graphs"} <= parser.sections
    assert len(parser.graphs) == 4
    for graph_id, stages in parser.graphs.items():
        assert sorted(stages) == sorted(expected), graph_id
    if backend == "inductor":
        assert page.count("<svg") >= 8  # a diagram per fused forward and backward
    assert "http://" not in page.replace("http://www.w3.org/2000/svg", "") and "https://" not in page


def test_report_file_profiles_kernels_and_is_one_per_run(tmp_path, program):
    compiled = _run("inductor", tmp_path, **{"trace.profile": True})
    path = ember.write_report()
    assert path == os.path.join(str(tmp_path), f"ember_report_{os.getpid()}.html")
    page = open(path, encoding="utf-8").read()
    assert "kernel-times" in page
    report = ember.compile_report(compiled)
    times = report.graphs[0].stage("generated source forward").kernel_times
    assert times and all(calls >= 1 and seconds > 0 for calls, seconds in times.values())
    assert ember.last_compile().function == "step"
    # a second traced compile goes to the same page
    f = ember.compile(lambda x: torch.sin(x), options={"trace.enabled": True})
    f(torch.randn(3))
    assert ember.write_report() == path and len(program.records) == 2


@pytest.mark.skipif(not os.path.exists("/usr/bin/chromium"),
                    reason="headless Chromium is not installed (/usr/bin/chromium: Debian's `chromium` package)")
def test_report_opens_in_headless_chromium(tmp_path):
    _run("inductor", tmp_path / "trace")
    path = ember.write_report(str(tmp_path / "report.html"))
    shot = tmp_path / "report.png"
    cmd = ["/usr/bin/chromium", "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr",
           "--v=0", "--window-size=1280,4000", f"--screenshot={shot}", f"file://{path}#expand-all"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert shot.exists() and shot.stat().st_size > 20_000, proc.stderr[-2000:]
    assert open(shot, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    console = [line for line in proc.stderr.splitlines() if ":CONSOLE" in line]
    assert console == [], console
    dom = subprocess.run(cmd[:-2] + ["--dump-dom", f"file://{path}#expand-all"], capture_output=True,
                         text=True, timeout=120).stdout
    for section in ("id=\"summary\"", "class=\"frames\"", "class=\"breaks\"", "class=\"recompiles\"",
                    "class=\"graphs\"", "data-stage=\"generated source backward\"", "<svg"):
        assert section in dom, section
    assert "<details class=\"graph\" id=\"compile-0-graph-0\" open=\"\"" in dom  # the script ran: all opened


def test_progress_line_on_a_terminal_only(monkeypatch):
    monkeypatch.setattr(progress, "AFTER_S", 0.0)
    monkeypatch.setattr(progress, "EVERY_S", 0.05)
    master, slave = os.openpty()
    tty.setraw(slave)  # no line discipline: every byte written comes back unchanged
    terminal = os.fdopen(slave, "w")
    monkeypatch.setattr(sys, "stderr", terminal)
    slow = ember.compile(lambda x: torch.tanh(x).sum(0) * 3)
    x = torch.randn(16, 8)
    torch.testing.assert_close(slow(x), torch.tanh(x).sum(0) * 3)
    shown = [listener for listener in ember.compile_record(slow).listeners
             if isinstance(listener, progress.Progress)][0]
    terminal.flush()
    drawn = b""
    while select.select([master], [], [], 0.2)[0]:
        drawn += os.read(master, 1 << 16)
    drawn = drawn.decode()
    assert shown.lines and "graph 1 of 1 (forward)" in shown.lines[-1] and "kernels built" in shown.lines[-1]
    assert "ember: compiling" in drawn and drawn.endswith("\r\x1b[K")  # the line is cleared at the end
    os.close(master)
    terminal.close()

    class NotATerminal:
        text = ""

        def write(self, s):
            self.text += s

        def flush(self):
            pass

        def isatty(self):
            return False

    quiet = NotATerminal()
    monkeypatch.setattr(sys, "stderr", quiet)
    slow = ember.compile(lambda x: torch.cos(x).sum(0) * 3)
    slow(x)
    assert quiet.text == ""

