"""A real browser draws the run report: headless Chromium screenshots the page of
fixtures/hf_runs/lr_hot_diverges, and the PNG must show curves and the red FAIL markers,
not a blank page.

The page and its screenshot are kept under test-artifacts/html/ (gitignored) for a human
to look at. Needs Debian's `chromium` (`make e2e-deps` installs it; `make test` does that
itself when CI=true); without it the test skips, unless TP_BROWSER=required (as .ci/run
sets) makes a missing browser a failure.
"""

from __future__ import annotations

import os
import struct
import subprocess
import zlib
from collections import Counter
from itertools import accumulate
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "test-artifacts" / "html"
CHROMIUM = Path("/usr/bin/chromium")
REQUIRED = os.environ.get("TP_BROWSER") == "required"
WIDTH, HEIGHT = 1200, 1600

RUN_BLUE = (0x1F, 0x77, 0xB4)  # a run's curve (report_html.CSS)
FAIL_RED = (0xC6, 0x28, 0x28)  # a FAIL marker and badge


def decode_png(data: bytes) -> tuple[int, int, list[bytes]]:
    """(width, height, rows of RGB bytes) of an 8-bit RGB or RGBA PNG, without PIL.

    Shape: the 8-byte signature, then chunks `length(4) type(4) data crc(4)`; IHDR holds
    width, height, bit depth and colour type; the IDAT chunks together are one zlib
    stream of rows, each led by a filter byte (0 none, 1 sub, 2 up, 3 average, 4 Paeth).
    """
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat = 8, bytearray()
    width = height = depth = colour = 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", body[:10])
        elif kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            break
    assert depth == 8 and colour in (2, 6), f"unsupported PNG: depth {depth}, colour type {colour}"
    bpp = 3 if colour == 2 else 4
    raw = zlib.decompress(bytes(idat))
    stride = width * bpp
    rows: list[bytes] = []
    prev = bytes(stride)
    for y in range(height):
        at = y * (stride + 1)
        f, line = raw[at], raw[at + 1:at + 1 + stride]
        if f == 1:  # sub: a running sum per channel
            out = bytearray(stride)
            for k in range(bpp):
                out[k::bpp] = bytes(accumulate(line[k::bpp], lambda a, b: (a + b) & 0xFF))
            line = bytes(out)
        elif f == 2:  # up
            line = bytes([(a + b) & 0xFF for a, b in zip(line, prev)])
        elif f in (3, 4):  # average, Paeth: each byte needs the decoded byte to its left
            out = bytearray(line)
            for i in range(stride):
                a = out[i - bpp] if i >= bpp else 0
                b = prev[i]
                if f == 3:
                    out[i] = (out[i] + ((a + b) >> 1)) & 0xFF
                    continue
                c = prev[i - bpp] if i >= bpp else 0
                pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                out[i] = (out[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
            line = bytes(out)
        prev = line
        rows.append(line if bpp == 3 else bytes(v for k, v in enumerate(line) if k % 4 != 3))
    return width, height, rows


def colours(rows: list[bytes]) -> Counter[tuple[int, int, int]]:
    """How many pixels have each colour."""
    counts: Counter[tuple[int, int, int]] = Counter()
    for r in rows:
        counts.update(zip(r[0::3], r[1::3], r[2::3]))
    return counts


def near(counts: Counter[tuple[int, int, int]], colour: tuple[int, int, int], tol: int = 24) -> int:
    return sum(n for p, n in counts.items() if all(abs(a - b) <= tol for a, b in zip(p, colour)))


def screenshot(page: Path, png: Path, profile: Path) -> bytes:
    png.unlink(missing_ok=True)
    cmd = [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
           "--force-color-profile=srgb", f"--user-data-dir={profile}", f"--screenshot={png}",
           f"--window-size={WIDTH},{HEIGHT}", page.resolve().as_uri()]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=180, check=False)
    assert png.is_file(), f"chromium wrote no screenshot (exit {done.returncode}): {done.stderr[-2000:]}"
    return png.read_bytes()


@pytest.fixture
def chromium() -> Path:
    if not CHROMIUM.is_file():
        if REQUIRED:
            pytest.fail(f"{CHROMIUM} is missing (run `make e2e-deps`)")
        pytest.skip(f"{CHROMIUM} is missing (run `make e2e-deps`)")
    return CHROMIUM


def test_browser_screenshot_of_the_diverging_run_shows_curves_and_fail_markers(chromium, tmp_path):
    from test_html import DIVERGES, doctor_page

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    html = doctor_page(DIVERGES)
    page = ARTIFACTS / "lr_hot_diverges.html"
    page.write_text(html, encoding="utf-8")
    png = screenshot(page, ARTIFACTS / "lr_hot_diverges.png", tmp_path / "profile")
    assert len(png) > 30_000, f"{len(png)} bytes: too small to be a page with charts"
    width, height, rows = decode_png(png)
    assert (width, height) == (WIDTH, HEIGHT)
    counts = colours(rows)
    assert len(counts) >= 64, f"{len(counts)} distinct colours: a blank page?"
    background, n_background = counts.most_common(1)[0]
    assert n_background < 0.95 * WIDTH * HEIGHT, f"95% of the page is {background}"

    # What the curves and the markers add, measured against the same page without them:
    # layout-independent proof that the browser drew both.
    bare = ARTIFACTS / "lr_hot_diverges.no-curves-no-markers.html"
    bare.write_text(html.replace("</head>", "<style>svg.chart .curve,svg.chart .marker{display:none}</style></head>"),
                    encoding="utf-8")
    _, _, bare_rows = decode_png(screenshot(bare, ARTIFACTS / "lr_hot_diverges.no-curves-no-markers.png",
                                            tmp_path / "profile2"))
    bare_counts = colours(bare_rows)
    assert near(counts, RUN_BLUE) - near(bare_counts, RUN_BLUE) > 500, "the curves are not visible"
    assert near(counts, FAIL_RED) - near(bare_counts, FAIL_RED) > 300, "the FAIL markers are not visible"


def test_png_decoder_reads_every_filter_type():
    """The decoder against rows written with each of the five filters by hand."""
    rgb = [bytes((x * 40 + y * 7) % 256 for x in range(12)) for y in range(5)]  # 4 pixels a row
    raw = bytearray()
    prev = bytes(12)
    for f, row in enumerate(rgb):  # row y uses filter y
        enc = bytearray()
        for i, v in enumerate(row):
            a = row[i - 3] if i >= 3 else 0
            b, c = prev[i], prev[i - 3] if i >= 3 else 0
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            pred = [0, a, b, (a + b) // 2, a if pa <= pb and pa <= pc else b if pb <= pc else c][f]
            enc.append((v - pred) & 0xFF)
        raw += bytes([f]) + enc
        prev = row

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 4, 5, 8, 2, 0, 0, 0))
           + chunk(b"IDAT", zlib.compress(bytes(raw))) + chunk(b"IEND", b""))
    assert decode_png(png) == (4, 5, rgb)
