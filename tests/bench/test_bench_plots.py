"""The standard-library plot renderer: axes arithmetic, line coverage, the PNG container and the font."""
from __future__ import annotations

import string
import struct
import zlib
from pathlib import Path

import pytest

from sparkfleet_bench import plots as pl
from sparkfleet_bench.glyphs import GLYPHS, HEIGHT


def _png_pixels(data: bytes) -> tuple[int, int, bytes]:
    """Width, height and unfiltered RGB rows of a PNG written by png_bytes (filter 0, one IDAT)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, chunks = 8, {}
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        assert struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])[0] == zlib.crc32(kind + body)
        chunks[kind] = body
        pos += 12 + length
    width, height, depth, colour = struct.unpack(">IIBB", chunks[b"IHDR"][:10])
    assert (depth, colour) == (8, 2) and b"IEND" in chunks
    raw = zlib.decompress(chunks[b"IDAT"])
    rows = [raw[r * (3 * width + 1):(r + 1) * (3 * width + 1)] for r in range(height)]
    assert all(row[0] == 0 for row in rows)
    return width, height, b"".join(row[1:] for row in rows)


@pytest.mark.parametrize("span,step", [(500, 100), (4000, 1000), (0.12, 0.02), (49.0, 10), (1e6, 2e5)])
def test_nice_step(span: float, step: float) -> None:
    assert pl.nice_step(span) == pytest.approx(step)


def test_linear_ticks_start_at_zero_and_cover_the_data() -> None:
    lo, hi, ticks = pl.linear_ticks(44.0, 386.0)
    assert lo == 0 and hi >= 386 * 1.05 and ticks[0] == 0 and ticks[-1] == hi
    assert len({round(b - a, 9) for a, b in zip(ticks, ticks[1:])}) == 1
    assert pl.linear_ticks(5.0, 5.0)[1] > 5.0


def test_log2_ticks() -> None:
    lo, hi, ticks = pl.log2_ticks([1, 8, 64])
    assert lo < 0 < 6 < hi and ticks == [1, 2, 4, 8, 16, 32, 64]
    lo, hi, ticks = pl.log2_ticks([1940])  # a single x gets powers of two on both sides
    assert ticks == [1024, 2048]
    assert len(pl.log2_ticks([1, 2 ** 20])[2]) <= 8


def test_tick_label() -> None:
    assert pl.tick_label(400.0, 100) == "400" and pl.tick_label(0.25, 0.05) == "0.25"


def test_segment_coverage_horizontal_and_dashed() -> None:
    solid = pl.segment_coverage((10, 20), (30, 20), width=2.0)
    assert all(solid[(x, 20)] == 1.0 for x in range(10, 31))
    assert (20, 23) not in solid and (5, 20) not in solid
    dashed = pl.segment_coverage((0, 5), (40, 5), width=2.0, dash=5.0)
    assert (2, 5) in dashed and (7, 5) not in dashed and (12, 5) in dashed
    steep = pl.segment_coverage((5, 0), (6, 30), width=1.5)
    assert all(any((x, y) in steep for x in (4, 5, 6, 7)) for y in range(0, 31))


def test_png_bytes_round_trip() -> None:
    canvas = pl.Canvas(7, 3)
    canvas.blend(2, 1, (255, 0, 0), 1.0)
    canvas.blend(99, 99, (0, 0, 0), 1.0)  # off the canvas: ignored
    width, height, pixels = _png_pixels(canvas.png())
    assert (width, height) == (7, 3)
    assert pixels[(1 * 7 + 2) * 3:(1 * 7 + 3) * 3] == b"\xff\x00\x00" and pixels.count(0) == 2


def test_font_covers_printable_ascii() -> None:
    for ch in string.printable.strip() + " ":
        advance, data = GLYPHS[ch]
        assert advance > 0 and len(data) % HEIGHT == 0
    assert pl.text_width("ab") == GLYPHS["a"][0] + GLYPHS["b"][0]
    assert pl.text_width("\u2603") == GLYPHS["?"][0]  # unknown characters draw as '?'


def test_render_draws_series_in_the_cycle_colour(tmp_path: Path) -> None:
    rows = [(1, 50.0, 1.0, 1.0), (8, 390.0, 5.0, 5.0)]
    data = pl.render("t", "streams", "tok/s", {"prose": rows}, {"prose": [(1, 52.0, 1.0, 1.0)], "other": rows})
    width, height, pixels = _png_pixels(data)
    assert (width, height) == (pl.WIDTH, pl.HEIGHT_PX)
    blue = bytes(pl.CYCLE[0])
    assert pixels.count(blue) > 200  # the line, markers and bars; the baseline of a case not measured is left out
    assert bytes(pl.CYCLE[1]) not in pixels


def test_straight_lines_match_the_general_rasteriser() -> None:
    """The grid/bar fast path covers the same pixels as the anti-aliased segment code."""
    fast, slow = pl.Canvas(40, 40), pl.Canvas(40, 40)
    for a, b in (((5, 10.5), (30, 10.5)), ((12, 3), (12, 33))):
        fast.line(a, b, (0, 0, 0), 1.5)
        for (x, y), cover in pl.segment_coverage(a, b, 1.5).items():
            slow.blend(x, y, (0, 0, 0), cover)
    differ = sum(abs(f - s) > 8 for f, s in zip(fast.px, slow.px))
    assert differ <= 3 * 8  # at most the rounded line ends
