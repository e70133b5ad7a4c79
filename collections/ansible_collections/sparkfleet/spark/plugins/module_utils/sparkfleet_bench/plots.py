"""PNG plots of a bench report, drawn with the standard library only (zlib for the PNG, an embedded bitmap
font). matplotlib cost about 0.7 CPU-seconds per run (import 0.5 s, two figures 0.2 s), more than the whole
measured decode of a small run, and the bench judges a client by its CPU; this renderer costs ~0.05 s a plot."""
from __future__ import annotations

import math
import struct
import zlib
from pathlib import Path
from typing import Any, Iterator, Optional, Sequence

from .glyphs import ASCENT, GLYPHS, HEIGHT

Color = tuple[int, int, int]
Row = tuple[float, float, float, float]  # x, y, error below, error above

WIDTH, HEIGHT_PX = 770, 495  # the old matplotlib size: 7 x 4.5 in at 110 dpi
LEFT, RIGHT, TOP, BOTTOM = 80, 18, 34, 50  # plot area margins
BLACK: Color = (0, 0, 0)
GRID: Color = (222, 222, 222)
# matplotlib's default cycle (tab10), so the plots keep their colours
CYCLE: tuple[Color, ...] = ((31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (148, 103, 189),
                            (140, 86, 75), (227, 119, 194), (127, 127, 127), (188, 189, 34), (23, 190, 207))


class Canvas:
    """An RGB raster with alpha-blended primitives; white background."""

    def __init__(self, width: int, height: int) -> None:
        self.width, self.height = width, height
        self.px = bytearray(b"\xff") * (width * height * 3)

    def blend(self, x: int, y: int, color: Color, alpha: float) -> None:
        if 0 <= x < self.width and 0 <= y < self.height and alpha > 0:
            i = (y * self.width + x) * 3
            px = self.px
            if alpha >= 1.0:
                px[i:i + 3] = bytes(color)
                return
            r, g, b = color
            px[i] = int(px[i] + (r - px[i]) * alpha + 0.5)
            px[i + 1] = int(px[i + 1] + (g - px[i + 1]) * alpha + 0.5)
            px[i + 2] = int(px[i + 2] + (b - px[i + 2]) * alpha + 0.5)

    def span(self, x0: int, x1: int, y: int, color: Color) -> None:
        """An opaque run of pixels on one row, as one slice assignment."""
        x0, x1 = max(0, x0), min(self.width - 1, x1)
        if 0 <= y < self.height and x0 <= x1:
            i = (y * self.width + x0) * 3
            self.px[i:i + 3 * (x1 - x0 + 1)] = bytes(color) * (x1 - x0 + 1)

    def rect(self, x0: int, y0: int, x1: int, y1: int, color: Color, fill: Optional[Color] = None) -> None:
        if fill is not None:
            for y in range(y0, y1 + 1):
                self.span(x0, x1, y, fill)
        self.span(x0, x1, y0, color)
        self.span(x0, x1, y1, color)
        for y in range(y0, y1 + 1):
            self.blend(x0, y, color, 1.0)
            self.blend(x1, y, color, 1.0)

    def line(self, p0: tuple[float, float], p1: tuple[float, float], color: Color, width: float = 1.5,
             alpha: float = 1.0, dash: float = 0.0) -> None:
        """Anti-aliased segment: each pixel near it is covered by how far it lies inside width/2 (computed once
        per pixel, so overlapping samples do not darken it); dash > 0 draws dash-long marks and gaps."""
        if not dash and (p0[0] == p1[0] or p0[1] == p1[1]):
            self._straight(p0, p1, color, width, alpha)
            return
        for (x, y), cover in segment_coverage(p0, p1, width, dash).items():
            self.blend(x, y, color, cover * alpha)

    def _straight(self, p0: tuple[float, float], p1: tuple[float, float], color: Color, width: float,
                  alpha: float) -> None:
        """A horizontal or vertical line (grid, ticks, error bars: most of a plot's lines): coverage depends
        only on the distance across, so each row or column across is filled at one alpha."""
        vertical = p0[0] == p1[0]
        centre = p0[0] if vertical else p0[1]
        lo, hi = sorted((p0[1], p1[1]) if vertical else (p0[0], p1[0]))
        half = width / 2
        for across in range(int(math.floor(centre - half - 1)), int(math.ceil(centre + half + 1)) + 1):
            cover = min(1.0, half + 0.5 - abs(across - centre)) * alpha
            if cover <= 0:
                continue
            if cover >= 1.0 and not vertical:
                self.span(int(math.ceil(lo)), int(math.floor(hi)), across, color)
                continue
            for along in range(int(math.ceil(lo)), int(math.floor(hi)) + 1):
                if vertical:
                    self.blend(across, along, color, cover)
                else:
                    self.blend(along, across, color, cover)

    def disc(self, cx: float, cy: float, radius: float, color: Color, alpha: float = 1.0) -> None:
        for y in range(int(cy - radius - 1), int(cy + radius + 2)):
            for x in range(int(cx - radius - 1), int(cx + radius + 2)):
                cover = radius + 0.5 - math.hypot(x - cx, y - cy)
                self.blend(x, y, color, max(0.0, min(1.0, cover)) * alpha)

    def text(self, x: float, y: float, text: str, color: Color = BLACK, anchor: str = "left",
             vertical: bool = False) -> None:
        """Text with its top at y; anchor left/center/right along the writing direction. vertical writes
        bottom to top (a y-axis label), x then being the left edge of the rotated glyphs."""
        start = {"left": 0.0, "center": text_width(text) / 2, "right": float(text_width(text))}[anchor]
        for gx, gy, cover in glyph_pixels(text):
            if vertical:
                self.blend(int(x) + gy, int(y + start) - gx, color, cover)
            else:
                self.blend(int(x - start) + gx, int(y) + gy, color, cover)

    def png(self) -> bytes:
        stride = self.width * 3
        raw = b"".join(b"\x00" + bytes(self.px[r * stride:(r + 1) * stride]) for r in range(self.height))
        return png_bytes(self.width, self.height, raw)


def segment_coverage(p0: tuple[float, float], p1: tuple[float, float], width: float,
                     dash: float = 0.0) -> dict[tuple[int, int], float]:
    """Pixel -> coverage of a segment of the given width: walks the longer axis one pixel at a time and
    visits only the few pixels across the line there (a square scan per sample cost 0.25 s a plot)."""
    (x0, y0), (x1, y1) = p0, p1
    steep = abs(y1 - y0) > abs(x1 - x0)
    if steep:  # work as if x were the long axis, swap back on output
        x0, y0, x1, y1 = y0, x0, y1, x1
    dx, dy = x1 - x0, y1 - y0
    length2 = dx * dx + dy * dy
    half = width / 2
    across = int(half * math.sqrt(1 + (dy / dx) ** 2 if dx else 1) + 2)
    covered: dict[tuple[int, int], float] = {}
    for u in range(int(math.floor(min(x0, x1) - half - 1)), int(math.ceil(max(x0, x1) + half + 1)) + 1):
        centre = y0 + (dy * (u - x0) / dx if dx else 0.0)
        for v in range(int(centre) - across, int(centre) + across + 1):
            t = 0.0 if length2 == 0 else min(1.0, max(0.0, ((u - x0) * dx + (v - y0) * dy) / length2))
            if dash and (t * math.sqrt(length2)) % (2 * dash) >= dash:
                continue
            cover = half + 0.5 - math.hypot(u - (x0 + t * dx), v - (y0 + t * dy))
            if cover > 0:
                covered[(v, u) if steep else (u, v)] = min(1.0, cover)
    return covered


def png_bytes(width: int, height: int, raw: bytes) -> bytes:
    """An 8-bit RGB PNG of already filtered scanlines (filter byte 0 before each row)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b"")


def text_width(text: str) -> int:
    return sum(GLYPHS.get(ch, GLYPHS["?"])[0] for ch in text)


def glyph_pixels(text: str) -> Iterator[tuple[int, int, float]]:
    """(x, y, coverage) of every inked pixel of a string, from its top-left corner."""
    pen = 0
    for ch in text:
        advance, data = GLYPHS.get(ch, GLYPHS["?"])
        cols = len(data) // HEIGHT
        for i, nibble in enumerate(data):
            if nibble != "0":
                yield pen + i % cols, i // cols, int(nibble, 16) / 15
        pen += advance


def nice_step(span: float, target: int = 6) -> float:
    """A 1-2-5 × 10^k tick step giving about `target` intervals over span."""
    raw = span / target if span > 0 else 1.0
    power = 10 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= raw)


def linear_ticks(lo: float, hi: float) -> tuple[float, float, list[float]]:
    """Axis range [0 or below, above hi] on whole steps, and its ticks."""
    lo = min(0.0, lo)
    if hi <= lo:
        hi = lo + 1.0
    step = nice_step(hi - lo)
    start, stop = math.floor(lo / step) * step, math.ceil(hi * 1.05 / step) * step
    return start, stop, [start + i * step for i in range(int(round((stop - start) / step)) + 1)]


def log2_ticks(xs: Sequence[float]) -> tuple[float, float, list[float]]:
    """Axis range in log2 units with some room around the data, and the powers of two inside it (at most ~8)."""
    lo, hi = math.log2(min(xs)), math.log2(max(xs))
    # one power of two of room around a single x (one prefill size), so ticks fall on both sides of it
    room = 1.0 if hi - lo < 1 else max(0.3, (hi - lo) * 0.06)
    lo, hi = lo - room, hi + room
    powers = list(range(math.ceil(lo), math.floor(hi) + 1))
    every = max(1, math.ceil(len(powers) / 8))
    return lo, hi, [2.0 ** p for p in powers[::every]]


def tick_label(value: float, step: float) -> str:
    decimals = max(0, -math.floor(math.log10(step))) if step > 0 and step < 1 else 0
    return f"{value:.{decimals}f}"


class Axes:
    """Maps data to pixels: log2 x, linear y, inside the plot area."""

    def __init__(self, xs: Sequence[float], ys: Sequence[float]) -> None:
        self.x_lo, self.x_hi, self.x_ticks = log2_ticks(xs)
        self.y_lo, self.y_hi, self.y_ticks = linear_ticks(min(ys), max(ys))
        self.left, self.right = LEFT, WIDTH - RIGHT
        self.top, self.bottom = TOP, HEIGHT_PX - BOTTOM

    def px(self, x: float, y: float) -> tuple[float, float]:
        fx = (math.log2(x) - self.x_lo) / (self.x_hi - self.x_lo)
        fy = (y - self.y_lo) / (self.y_hi - self.y_lo)
        return self.left + fx * (self.right - self.left), self.bottom - fy * (self.bottom - self.top)


def _frame(canvas: Canvas, ax: Axes, title: str, xlabel: str, ylabel: str) -> None:
    y_step = ax.y_ticks[1] - ax.y_ticks[0] if len(ax.y_ticks) > 1 else 1.0
    for value in ax.y_ticks:
        _, y = ax.px(2.0 ** ax.x_lo, value)
        canvas.line((ax.left, y), (ax.right, y), GRID, width=1.0)
        canvas.line((ax.left - 4, y), (ax.left, y), BLACK, width=1.0)
        canvas.text(ax.left - 7, y - HEIGHT // 2, tick_label(value, y_step), anchor="right")
    for value in ax.x_ticks:
        x, _ = ax.px(value, ax.y_lo)
        canvas.line((x, ax.top), (x, ax.bottom), GRID, width=1.0)
        canvas.line((x, ax.bottom), (x, ax.bottom + 4), BLACK, width=1.0)
        canvas.text(x, ax.bottom + 6, f"{value:g}", anchor="center")
    canvas.rect(ax.left, ax.top, ax.right, ax.bottom, BLACK)
    canvas.text(WIDTH / 2, 10, title, anchor="center")
    canvas.text((ax.left + ax.right) / 2, HEIGHT_PX - HEIGHT - 8, xlabel, anchor="center")
    canvas.text(8, (ax.top + ax.bottom) / 2, ylabel, anchor="center", vertical=True)


def _marker(canvas: Canvas, x: float, y: float, color: Color, cross: bool, alpha: float) -> None:
    if cross:
        canvas.line((x - 3.5, y - 3.5), (x + 3.5, y + 3.5), color, 1.5, alpha)
        canvas.line((x - 3.5, y + 3.5), (x + 3.5, y - 3.5), color, 1.5, alpha)
    else:
        canvas.disc(x, y, 3.5, color, alpha)


def _series(canvas: Canvas, ax: Axes, rows: Sequence[Row], color: Color, baseline: bool) -> None:
    """Line through the means, 95 % CI bars with caps, markers; a baseline dashed, crosses, faded."""
    alpha, dash = (0.6, 6.0) if baseline else (1.0, 0.0)
    points = [ax.px(x, y) for x, y, _, _ in rows]
    for a, b in zip(points, points[1:]):
        canvas.line(a, b, color, 1.5, alpha, dash)
    for (x, y, below, above), (px, py) in zip(rows, points):
        _, lo = ax.px(x, y - below)
        _, hi = ax.px(x, y + above)
        canvas.line((px, lo), (px, hi), color, 1.2, alpha)
        for cap in (lo, hi):
            canvas.line((px - 3, cap), (px + 3, cap), color, 1.2, alpha)
        _marker(canvas, px, py, color, baseline, alpha)


def _legend(canvas: Canvas, ax: Axes, entries: Sequence[tuple[str, Color, bool]]) -> None:
    width = 44 + max(text_width(name) for name, _, _ in entries)
    x0, y0 = ax.left + 10, ax.top + 10
    canvas.rect(x0, y0, x0 + width, y0 + 8 + HEIGHT * len(entries), (200, 200, 200), fill=(255, 255, 255))
    for i, (name, color, baseline) in enumerate(entries):
        y = y0 + 4 + HEIGHT * i
        mid = y + ASCENT * 0.6
        alpha = 0.6 if baseline else 1.0
        canvas.line((x0 + 6, mid), (x0 + 30, mid), color, 1.5, alpha, 4.0 if baseline else 0.0)
        _marker(canvas, x0 + 18, mid, color, baseline, alpha)
        canvas.text(x0 + 36, y, name)


def render(title: str, xlabel: str, ylabel: str, series: dict[str, list[Row]],
           baseline: Optional[dict[str, list[Row]]]) -> bytes:
    """One plot as PNG bytes: every series against log2 x, baselines of the same names overlaid."""
    overlay = {name: rows for name, rows in (baseline or {}).items() if name in series}
    everything = [r for rows in [*series.values(), *overlay.values()] for r in rows]
    ax = Axes([r[0] for r in everything], [r[1] - r[2] for r in everything] + [r[1] + r[3] for r in everything])
    canvas = Canvas(WIDTH, HEIGHT_PX)
    _frame(canvas, ax, title, xlabel, ylabel)
    legend: list[tuple[str, Color, bool]] = []
    for i, (name, rows) in enumerate(series.items()):
        color = CYCLE[i % len(CYCLE)]
        _series(canvas, ax, rows, color, baseline=False)
        legend.append((name, color, False))
        if name in overlay:
            _series(canvas, ax, overlay[name], color, baseline=True)
            legend.append((f"{name} (baseline)", color, True))
    _legend(canvas, ax, legend)
    return canvas.png()


def _errbar(summary: dict[str, Any]) -> tuple[float, float, float]:
    mean = summary["mean"]
    lo, hi = summary["ci95"]
    return mean, mean - lo, hi - mean


def _decode_series(report: dict[str, Any], metric: str) -> dict[str, list[tuple[int, float, float, float]]]:
    series: dict[str, list[tuple[int, float, float, float]]] = {}
    for p in (report.get("suites", {}).get("decode") or {}).get("points", []):
        summary = p["metrics"].get(metric)
        if summary and summary.get("mean") is not None:
            series.setdefault(p["case"], []).append((p["concurrency"], *_errbar(summary)))
    return {case: sorted(rows) for case, rows in series.items()}


def _prefill_series(report: dict[str, Any]) -> dict[str, list[tuple[int, float, float, float]]]:
    series: dict[str, list[tuple[int, float, float, float]]] = {}
    for p in (report.get("suites", {}).get("prefill") or {}).get("points", []):
        summary = p["metrics"].get("prefill_tps")
        tokens = p["metrics"].get("prompt_tokens") or {}
        if summary and summary.get("mean") is not None:
            series.setdefault(p["text"], []).append((int(tokens.get("mean") or p["size"]), *_errbar(summary)))
    return {text: sorted(rows) for text, rows in series.items()}


def _draw(path: Path, title: str, xlabel: str, ylabel: str, series: dict[str, Any],
          baseline: Optional[dict[str, Any]]) -> str:
    path.write_bytes(render(title, xlabel, ylabel, series, baseline))
    return str(path)


def write_plots(out_dir: Path, report: dict[str, Any], baseline: Optional[dict[str, Any]] = None) -> list[str]:
    """decode_tps.png (tok/s vs streams per case, 95% CI bars) and prefill_tps.png, with baseline overlays."""
    written: list[str] = []
    for metric, label in (("tps", "aggregate tok/s"), ("decode_window_tps", "decode-window tok/s")):
        series = _decode_series(report, metric)
        if series:
            base = _decode_series(baseline, metric) if baseline else None
            written.append(_draw(out_dir / f"decode_{metric}.png", f"Decode: {label} vs streams", "streams",
                                 label, series, base))
    prefill = _prefill_series(report)
    if prefill:
        base = _prefill_series(baseline) if baseline else None
        written.append(_draw(out_dir / "prefill_tps.png", "Cold prefill: tok/s vs prompt length", "prompt tokens",
                             "prefill tok/s", prefill, base))
    return written
