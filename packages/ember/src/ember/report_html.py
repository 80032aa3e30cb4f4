"""The compile report as one self-contained HTML page (Note [compile report] in report.py).

Everything is inline (style, a few lines of script, SVG diagrams): the page opens from disk with
no network. It stays fast with hundreds of kernels because every graph, stage and kernel is a
closed `<details>`: a browser lays out only what is opened.
"""
from __future__ import annotations

import datetime
import html
import os
import sys

import torch

from ember.__about__ import __version__
from ember.report import CompileReport, FrameReport, GraphReport, Stage

_STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.4em} h2{font-size:1.2em;border-bottom:1px solid #ccc;margin-top:1.6em}
pre{background:#f6f7f9;padding:.6em;overflow:auto;font:12px/1.35 monospace;max-height:40em}
details{margin:.3em 0 .3em .6em} summary{cursor:pointer} summary:hover{color:#036}
table{border-collapse:collapse} td,th{border:1px solid #ddd;padding:2px 8px;text-align:left}
.src{font:12px/1.35 monospace;white-space:pre;background:#f6f7f9;padding:.4em;overflow:auto}
.src .cap{background:#dff5df} .src .brk{background:#ffd6d6} .src .ln{color:#999;display:inline-block;width:4em}
.tag{font-size:11px;background:#eee;border-radius:3px;padding:0 4px;margin-left:4px}
.why{color:#a00} .diagram{overflow:auto;max-height:50em;border:1px solid #eee}
"""
_SCRIPT = """
function emberToggle(open){document.querySelectorAll('details').forEach(function(d){d.open=open;});}
window.addEventListener('DOMContentLoaded',function(){if(location.hash==='#expand-all'){emberToggle(true);}});
"""


def render(reports: list[CompileReport], title: str = "ember compile report") -> str:
    """The page for `reports` (one per `ember.compile` of the program)."""
    head = (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{_e(title)}</title>"
            f"<style>{_STYLE}</style><script>{_SCRIPT}</script></head><body>")
    argv = " ".join(sys.argv) or "python"
    out = [head, f"<h1>{_e(title)}</h1>",
           f"<p id='meta'>{_e(argv)} &middot; pid {os.getpid()} &middot; "
           f"{datetime.datetime.now().isoformat(timespec='seconds')} &middot; ember {__version__}, "
           f"torch {torch.__version__}, Python {sys.version.split()[0]}</p>",
           "<p><button onclick='emberToggle(true)'>expand all</button> "
           "<button onclick='emberToggle(false)'>collapse all</button></p>",
           _summary(reports)]
    out += [_compile(i, r) for i, r in enumerate(reports)]
    out.append("</body></html>")
    return "\n".join(out)


def _summary(reports: list[CompileReport]) -> str:
    rows = "".join(
        f"<tr><td><a href='#compile-{i}'>{_e(r.function)}</a></td><td>{_e(r.backend)}</td>"
        f"<td>{len(r.graphs)}</td><td>{len(r.breaks)}</td><td>{len(r.recompiles)}</td>"
        f"<td>{sum(len(s.kernels) for g in r.graphs for s in g.stages)}</td>"
        f"<td>{r.compile_seconds * 1e3:.1f}</td></tr>" for i, r in enumerate(reports))
    return ("<section id='summary'><h2>Summary</h2><table><tr><th>compiled</th><th>backend</th>"
            "<th>graphs</th><th>breaks</th><th>recompiles</th><th>kernels</th><th>compile ms</th></tr>"
            f"{rows}</table></section>")


def _compile(i: int, r: CompileReport) -> str:
    parts = [f"<section class='compile' id='compile-{i}'><h2>{_e(r.function)} "
             f"<span class='tag'>{_e(r.backend)}</span></h2>"]
    parts.append("<section class='frames'><h3>Frames</h3>" + "".join(_frame(f) for f in r.frames) + "</section>")
    breaks = "".join(f"<li><b>[{_e(b.kind)}]</b> {_e(b.reason)}<br><code>{_e(b.where())}</code>"
                     f"<br><i>hint: {_e(b.hint)}</i></li>" for b in r.breaks)
    parts.append(f"<section class='breaks'><h3>Graph breaks ({len(r.breaks)})</h3><ol>{breaks}</ol></section>")
    recompiles = "".join(f"<li>{_e(frame)} <code>{_e(where)}</code>: <span class='why'>{_e(why)}</span></li>"
                         for frame, where, why in r.recompiles)
    parts.append(f"<section class='recompiles'><h3>Recompiles ({len(r.recompiles)})</h3><ol>{recompiles}</ol></section>")
    parts.append("<section class='graphs'><h3>Graphs</h3>" + "".join(_graph(i, g) for g in r.graphs) + "</section>")
    parts.append("</section>")
    return "\n".join(parts)


def _frame(f: FrameReport) -> str:
    lines = []
    for lineno, text in f.source:
        cls = "brk" if lineno in f.breaks else "cap" if lineno in f.captured else ""
        title = f" title='{_e('; '.join(f.breaks[lineno]))}'" if lineno in f.breaks else ""
        lines.append(f"<span class='{cls}'{title}><span class='ln'>{lineno}</span>{_e(text)}</span>")
    source = "\n".join(lines) if lines else "(source not available)"
    entries = "".join(
        f"<details><summary>entry {k}: {'graph ' + str(e.graph) if e.graph is not None else 'no graph'}"
        f"{', ends at a graph break' if e.ended_by is not None else ''} ({len(e.guards)} guards)</summary>"
        f"<pre>{_e(chr(10).join(e.guards) or '(no guards)')}</pre></details>"
        for k, e in enumerate(f.entries))
    breaks = "".join(f"<li>line {ln}: {_e('; '.join(why))}</li>" for ln, why in sorted(f.breaks.items()))
    recompiles = "".join(f"<li class='why'>{_e(why)}</li>" for why in f.recompiles)
    return (f"<details class='frame' open><summary><b>{_e(f.name)}</b> <code>{_e(f.filename)}:{f.firstlineno}</code>"
            f"<span class='tag'>{len(f.entries)} entries</span></summary>"
            f"<div class='src'>{source}</div>"
            "<p><span class='src'><span class='cap'>captured</span> <span class='brk'>graph break</span></span></p>"
            + (f"<p>Breaks:</p><ul>{breaks}</ul>" if breaks else "")
            + (f"<p>Recompiled because:</p><ul>{recompiles}</ul>" if recompiles else "")
            + f"<details class='guards'><summary>Guards</summary>{entries}</details></details>")


def _graph(c: int, g: GraphReport) -> str:
    stages = "".join(_stage(s) for s in g.stages)
    return (f"<details class='graph' id='compile-{c}-graph-{g.index}'><summary><b>graph {g.index}</b> of "
            f"{_e(g.frame)} <code>{_e(g.site)}</code> <span class='tag'>{g.ops} ops</span>"
            f"<span class='tag'>{g.seconds * 1e3:.1f} ms</span></summary>{stages}</details>")


def _stage(s: Stage) -> str:
    passes = ", ".join(f"{p} {'' if t is None else f'{t * 1e3:.2f} ms'}".strip() for p, t in s.passes.items())
    body = [f"<pre>{_e(s.text)}</pre>"]
    if s.diagram:
        body.insert(0, f"<details class='diagram-box' open><summary>diagram</summary><div class='diagram'>{s.diagram}</div></details>")
    if s.kernel_times:
        rows = "".join(f"<tr><td>{_e(k)}</td><td>{n}</td><td>{t * 1e3:.3f}</td><td>{t / max(n, 1) * 1e6:.1f}</td></tr>"
                       for k, (n, t) in sorted(s.kernel_times.items(), key=lambda kv: -kv[1][1]))
        body.insert(0, "<table class='kernel-times'><tr><th>kernel</th><th>calls</th><th>total ms</th>"
                       f"<th>us per call</th></tr>{rows}</table>")
    for name, source in s.kernels:
        body.append(f"<details class='kernel'><summary>{_e(name)}</summary><pre>{_e(source)}</pre></details>")
    return (f"<details class='stage' data-stage='{_e(s.name)}'><summary>{_e(s.name)} "
            f"<span class='tag'>{_e(s.layer)}: {_e(passes)}</span></summary>{''.join(body)}</details>")


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)
