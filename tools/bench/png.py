"""A bar chart of speedups, rasterized here and written as a PNG with zlib + struct.

Why not matplotlib: it is not installed in the project's environment and one chart does not earn
a dependency of that size. The chart is a plain RGB canvas with a 5x8 bitmap font (lowercase,
digits, a little punctuation; uppercase is drawn as lowercase); this module has no dependencies
beyond the standard library.
"""
from __future__ import annotations

import math
import struct
import zlib

Color = tuple[int, int, int]

WHITE, BLACK, GREY, LIGHT = (255, 255, 255), (0, 0, 0), (110, 110, 110), (225, 225, 225)
# Series colours: ember backends first (blues, greens, purples), torch.compile last (orange).
PALETTE = [(31, 119, 180), (44, 160, 44), (148, 103, 189), (23, 190, 207), (140, 86, 75)]
REFERENCE_COLOR = (255, 127, 14)

_FONT_SRC = """
a
.....
.....
.###.
....#
.####
#...#
.####
.....
b
#....
#....
####.
#...#
#...#
#...#
####.
.....
c
.....
.....
.###.
#....
#....
#....
.###.
.....
d
....#
....#
.####
#...#
#...#
#...#
.####
.....
e
.....
.....
.###.
#...#
#####
#....
.###.
.....
f
..##.
.#...
####.
.#...
.#...
.#...
.#...
.....
g
.....
.....
.####
#...#
#...#
.####
....#
.###.
h
#....
#....
####.
#...#
#...#
#...#
#...#
.....
i
..#..
.....
.##..
..#..
..#..
..#..
.###.
.....
j
...#.
.....
..##.
...#.
...#.
...#.
#..#.
.##..
k
#....
#....
#..#.
#.#..
##...
#.#..
#..#.
.....
l
.##..
..#..
..#..
..#..
..#..
..#..
.###.
.....
m
.....
.....
##.#.
#.#.#
#.#.#
#.#.#
#.#.#
.....
n
.....
.....
####.
#...#
#...#
#...#
#...#
.....
o
.....
.....
.###.
#...#
#...#
#...#
.###.
.....
p
.....
.....
####.
#...#
#...#
####.
#....
#....
q
.....
.....
.####
#...#
#...#
.####
....#
....#
r
.....
.....
#.##.
##..#
#....
#....
#....
.....
s
.....
.....
.####
#....
.###.
....#
####.
.....
t
.#...
.#...
####.
.#...
.#...
.#..#
..##.
.....
u
.....
.....
#...#
#...#
#...#
#..##
.##.#
.....
v
.....
.....
#...#
#...#
#...#
.#.#.
..#..
.....
w
.....
.....
#...#
#...#
#.#.#
#.#.#
.#.#.
.....
x
.....
.....
#...#
.#.#.
..#..
.#.#.
#...#
.....
y
.....
.....
#...#
#...#
#...#
.####
....#
.###.
z
.....
.....
#####
...#.
..#..
.#...
#####
.....
0
.###.
#...#
#..##
#.#.#
##..#
#...#
.###.
.....
1
..#..
.##..
..#..
..#..
..#..
..#..
.###.
.....
2
.###.
#...#
....#
...#.
..#..
.#...
#####
.....
3
#####
...#.
..#..
...#.
....#
#...#
.###.
.....
4
...#.
..##.
.#.#.
#..#.
#####
...#.
...#.
.....
5
#####
#....
####.
....#
....#
#...#
.###.
.....
6
..##.
.#...
#....
####.
#...#
#...#
.###.
.....
7
#####
....#
...#.
..#..
.#...
.#...
.#...
.....
8
.###.
#...#
#...#
.###.
#...#
#...#
.###.
.....
9
.###.
#...#
#...#
.####
....#
...#.
.##..
.....
.
.....
.....
.....
.....
.....
.##..
.##..
.....
,
.....
.....
.....
.....
.....
.##..
..#..
.#...
:
.....
.##..
.##..
.....
.##..
.##..
.....
.....
_
.....
.....
.....
.....
.....
.....
.....
#####
-
.....
.....
.....
#####
.....
.....
.....
.....
+
.....
..#..
..#..
#####
..#..
..#..
.....
.....
/
.....
....#
...#.
..#..
.#...
#....
.....
.....
(
...#.
..#..
.#...
.#...
.#...
..#..
...#.
.....
)
.#...
..#..
...#.
...#.
...#.
..#..
.#...
.....
=
.....
.....
#####
.....
#####
.....
.....
.....
%
##...
##..#
...#.
..#..
.#...
#..##
...##
.....
!
..#..
..#..
..#..
..#..
..#..
.....
..#..
.....
?
.###.
#...#
....#
...#.
..#..
.....
..#..
.....
*
.....
..#..
#.#.#
.###.
#.#.#
..#..
.....
.....
|
..#..
..#..
..#..
..#..
..#..
..#..
..#..
..#..
"""


def _parse_font(src: str) -> dict[str, list[str]]:
    lines = src.strip("\n").splitlines()
    return {lines[i]: lines[i + 1:i + 9] for i in range(0, len(lines), 9)}


FONT = _parse_font(_FONT_SRC)
FONT[" "] = ["....."] * 8
GLYPH_W, GLYPH_H = 6, 8  # 5 columns of ink plus one of spacing


class Canvas:
    def __init__(self, width: int, height: int, background: Color = WHITE):
        self.width, self.height = width, height
        self.pixels = bytearray(bytes(background) * (width * height))

    def rect(self, x0: int, y0: int, x1: int, y1: int, color: Color) -> None:
        """Fill [x0, x1) x [y0, y1), clipped to the canvas."""
        x0, x1 = max(0, min(x0, x1)), min(self.width, max(x0, x1))
        y0, y1 = max(0, min(y0, y1)), min(self.height, max(y0, y1))
        if x1 <= x0:
            return
        row = bytes(color) * (x1 - x0)
        for y in range(y0, y1):
            start = (y * self.width + x0) * 3
            self.pixels[start:start + len(row)] = row

    def text(self, x: int, y: int, s: str, color: Color = BLACK, scale: int = 1) -> None:
        for k, ch in enumerate(s):
            glyph = FONT.get(ch.lower(), FONT["?"])
            gx = x + k * GLYPH_W * scale
            for r, bits in enumerate(glyph):
                for c, bit in enumerate(bits):
                    if bit == "#":
                        self.rect(gx + c * scale, y + r * scale, gx + (c + 1) * scale, y + (r + 1) * scale, color)

    def png(self) -> bytes:
        raw = b"".join(b"\x00" + bytes(self.pixels[y * self.width * 3:(y + 1) * self.width * 3])
                       for y in range(self.height))

        def chunk(kind: bytes, data: bytes) -> bytes:
            return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

        header = struct.pack(">IIBBBBB", self.width, self.height, 8, 2, 0, 0, 0)  # 8-bit RGB
        return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
                + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def text_width(s: str, scale: int) -> int:
    return len(s) * GLYPH_W * scale


def _is_bar(v) -> bool:
    return isinstance(v, (int, float)) and v > 0 and math.isfinite(v)


def bar_chart(groups: list[tuple[str, list[float | str | None]]], series: list[str], title: str,
              scale: int = 2) -> bytes:
    """Horizontal bars on a log2 axis centred on 1x: one group per label, one bar per series.

    `groups` is [(label, [value per series])]: a number is a bar, a string (why there is no
    number: "timeout", "error") or None ("n/a") is written in grey instead.
    """
    values = [v for _, vs in groups for v in vs if _is_bar(v)]
    lo = math.floor(math.log2(min(values + [0.5])))
    hi = math.ceil(math.log2(max(values + [2.0])))
    colors = [PALETTE[i % len(PALETTE)] for i in range(len(series) - 1)] + [REFERENCE_COLOR]
    if series and not series[-1].startswith("torch"):
        colors[-1] = PALETTE[(len(series) - 1) % len(PALETTE)]

    ch, pad = GLYPH_H * scale, 8 * scale
    bar_h, bar_gap, group_gap = ch, 2 * scale, 6 * scale
    label_w = max([text_width(label, scale) for label, _ in groups] + [0]) + pad
    plot_w = 360 * scale
    value_w = text_width("00.00x", scale) + pad
    legend_h = (ch + 4 * scale) * len(series)
    top = pad + ch + pad + legend_h + pad
    group_h = len(series) * (bar_h + bar_gap) + group_gap
    axis_h = ch + 2 * pad
    width = pad + label_w + plot_w + value_w + pad
    height = top + max(1, len(groups)) * group_h + axis_h
    cv = Canvas(width, height)

    cv.text(pad, pad, title, BLACK, scale)
    for i, name in enumerate(series):
        y = pad + ch + pad + i * (ch + 4 * scale)
        cv.rect(pad, y, pad + ch, y + ch, colors[i])
        cv.text(pad + ch + pad, y, name, BLACK, scale)

    x_left = pad + label_w

    def x_of(v: float) -> int:
        return x_left + round((math.log2(v) - lo) / (hi - lo) * plot_w)

    plot_bottom = top + len(groups) * group_h
    for e in range(lo, hi + 1):  # grid and tick labels at powers of two
        x = x_of(2.0 ** e)
        cv.rect(x, top - scale, x + max(1, scale // 2), plot_bottom, LIGHT if e else GREY)
        tick = f"{2.0 ** e:g}x"
        cv.text(x - text_width(tick, scale) // 2, plot_bottom + pad // 2, tick, GREY, scale)
    for g, (label, vs) in enumerate(groups):
        y = top + g * group_h
        cv.text(pad, y + (len(series) * (bar_h + bar_gap) - ch) // 2, label, BLACK, scale)
        for i, v in enumerate(vs):
            yb = y + i * (bar_h + bar_gap)
            if not _is_bar(v):
                cv.text(x_of(1.0) + 2 * scale, yb, v if isinstance(v, str) else "n/a", GREY, scale)
                continue
            x0, x1 = x_of(1.0), x_of(min(max(v, 2.0 ** lo), 2.0 ** hi))
            cv.rect(min(x0, x1), yb, max(x0, x1) + 1, yb + bar_h, colors[i])
            cv.text(max(x0, x1) + 2 * scale, yb, f"{v:.2f}x", BLACK, scale)
    return cv.png()
