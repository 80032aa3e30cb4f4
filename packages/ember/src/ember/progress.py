"""The progress line of a long compile, on a terminal.

Note [progress line]: a compile (one graph's forward, or its backward at the first backward)
that runs longer than `AFTER_S` seconds shows one line on stderr, rewritten in place every
`EVERY_S` seconds: the compiled function, "graph i of n" (n: the graphs captured so far), the
last pass that finished and the kernels built so far. It is cleared when the compile ends, so
nothing is left in the user's output. Nothing is shown when stderr is not a terminal (logs, CI,
pipes) unless EMBER_PROGRESS=1; EMBER_PROGRESS=0 turns it off everywhere. It listens to the
compile record (record.py): the layers know nothing of it. A background thread draws the line,
since the compile itself holds the main thread.
"""
from __future__ import annotations

import sys
import threading
import time
from typing import Any, TextIO

from ember.record import CompileRecord, Step

AFTER_S = 2.0
EVERY_S = 0.5


class Progress:
    def __init__(self, name: str, enabled: bool | None, stream: TextIO | None = None,
                 after: float | None = None, every: float | None = None) -> None:
        self.name = name
        self.stream = stream
        self.enabled = enabled
        self.after, self.every = after, every
        self.kernels = 0
        self.stage = "capture"
        self._seen: set[int] = set()
        self._stop: threading.Event | None = None
        self._thread: threading.Thread | None = None
        self._shown = False
        self._depth = 0  # begin/end pairs may nest (a compile that triggers another)
        self.lines: list[str] = []  # every line drawn (for tests)

    def _on(self) -> bool:
        stream = self.stream or sys.stderr
        if self.enabled is not None:
            return self.enabled
        isatty = getattr(stream, "isatty", None)
        return bool(isatty and isatty())

    def __call__(self, record: CompileRecord, step: Step) -> None:
        self.stage = f"{step.layer} {step.stage}"
        kernels = getattr(step.artifact, "kernels", None)
        if step.layer == "inductor" and isinstance(kernels, list) and id(step.artifact) not in self._seen:
            self._seen.add(id(step.artifact))
            self.kernels += len(kernels)

    def begin(self, record: CompileRecord, graph: int, what: str) -> None:
        self._depth += 1
        if self._thread is not None or not self._on():
            return
        self._stop = threading.Event()
        start = time.perf_counter()
        after = AFTER_S if self.after is None else self.after
        every = EVERY_S if self.every is None else self.every

        def draw() -> None:
            if self._stop.wait(after):
                return
            while True:
                self._draw(f"ember: compiling {self.name}: graph {graph + 1} of {record.graphs} ({what}), "
                           f"after {self.stage}, {self.kernels} kernels built, {time.perf_counter() - start:.0f} s")
                if self._stop.wait(every):
                    return

        self._thread = threading.Thread(target=draw, name="ember-progress", daemon=True)
        self._thread.start()

    def end(self, record: CompileRecord) -> None:
        self._depth -= 1
        if self._thread is None or self._depth > 0:
            return
        self._stop.set()
        self._thread.join()
        self._thread = None
        if self._shown:
            self._write("\r\x1b[K")
            self._shown = False

    def _draw(self, line: str) -> None:
        self.lines.append(line)
        self._shown = True
        self._write(f"\r{line}\x1b[K")

    def _write(self, text: str) -> None:
        stream: Any = self.stream or sys.stderr
        try:
            stream.write(text)
            stream.flush()
        except (OSError, ValueError):  # a closed or broken stream: the compile goes on
            pass
