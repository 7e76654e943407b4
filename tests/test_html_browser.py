"""A real browser draws the run report.

Headless Chromium screenshots the page of fixtures/hf_runs/lr_hot_diverges (the PNG must
show the curves and the red FAIL markers, not a blank page), and opens the page of a
training folder (a run, a tokenizer, a dataset) and of a comparison at 1280 and 420 CSS
pixels wide, driven over the DevTools protocol (`--remote-debugging-pipe`): a script
evaluated in the page measures what the browser laid out — no two marker labels overlap,
every curve comes before the tokenizer's and the dataset's tables, nothing overflows the
page's width — and each is screenshotted whole.

Screenshots are kept in the test's tmp_path and under test-artifacts/html/ (gitignored)
for a human to look at. Needs Debian's `chromium` (`make e2e-deps` installs it; `make
test` does that itself when CI=true); without it the test skips, unless
TP_BROWSER=required (as .ci/run sets) makes a missing browser a failure.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import struct
import subprocess
import zlib
from collections import Counter
from itertools import accumulate
from pathlib import Path
from typing import Any

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


# --- the DevTools protocol over a pipe -----------------------------------------------------

# A safety net for one answer or event from the browser (a page renders in well under a
# second; a busy 2-core machine may take many times that). Nothing waits for a time: each
# step waits for the browser's answer or event.
CDP_TIMEOUT = 120.0


class Browser:
    """Headless Chromium driven over `--remote-debugging-pipe`: the browser reads
    NUL-terminated JSON commands from fd 3 and writes answers and events to fd 4."""

    def __init__(self, profile: Path) -> None:
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()
        # Above 2 so that placing them on fds 3 and 4 cannot clobber one with the other.
        high_r = fcntl.fcntl(to_browser_r, fcntl.F_DUPFD, 10)
        high_w = fcntl.fcntl(from_browser_w, fcntl.F_DUPFD, 10)
        os.close(to_browser_r)
        os.close(from_browser_w)

        def on_fds_3_and_4() -> None:
            os.dup2(high_r, 3)
            os.dup2(high_w, 4)

        self._log = (profile.parent / f"{profile.name}.log").open("w")
        self.proc = subprocess.Popen(
            [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
             "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run",
             "--hide-scrollbars", "--force-color-profile=srgb", f"--user-data-dir={profile}", "about:blank"],
            pass_fds=(3, 4, high_r, high_w), preexec_fn=on_fds_3_and_4, stdin=subprocess.DEVNULL,
            stdout=self._log, stderr=self._log)
        os.close(high_r)
        os.close(high_w)
        self._buffer = b""
        self._next_id = 0
        self._pending: list[dict[str, Any]] = []  # events read while waiting for an answer

    def _read(self) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            ready, _, _ = select.select([self._from_browser], [], [], CDP_TIMEOUT)
            assert ready, f"no word from the browser in {CDP_TIMEOUT:.0f} s"
            chunk = os.read(self._from_browser, 1 << 20)
            assert chunk, f"the browser closed its pipe (exit {self.proc.poll()})"
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def call(self, method: str, params: dict[str, Any] | None = None, session: str | None = None) -> dict[str, Any]:
        self._next_id += 1
        msg: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session is not None:
            msg["sessionId"] = session
        os.write(self._to_browser, json.dumps(msg).encode() + b"\0")
        while True:
            answer = self._read()
            if answer.get("id") == self._next_id:
                assert "error" not in answer, f"{method}: {answer['error']}"
                return answer["result"]
            self._pending.append(answer)

    def event(self, name: str, session: str) -> dict[str, Any]:
        while True:
            for i, m in enumerate(self._pending):
                if m.get("method") == name and m.get("sessionId") == session:
                    return self._pending.pop(i)
            self._pending.append(self._read())

    def open(self, page: Path, width: int) -> str:
        """A new tab `width` CSS pixels wide showing `page`, once its load event fired."""
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        self.call("Page.enable", session=session)
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": False}, session)
        self.call("Page.navigate", {"url": page.resolve().as_uri()}, session)
        self.event("Page.loadEventFired", session)
        return session

    def evaluate(self, session: str, expression: str) -> Any:
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": True}, session)
        assert "exceptionDetails" not in result, result["exceptionDetails"]
        return result["result"]["value"]

    def screenshot(self, session: str, width: int, height: int) -> bytes:
        """The whole page, `height` CSS pixels of it."""
        shot = self.call("Page.captureScreenshot", {
            "format": "png", "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": width, "height": height, "scale": 1}}, session)
        return base64.b64decode(shot["data"])

    def close(self) -> None:
        try:
            self.call("Browser.close")
            self.proc.wait(timeout=CDP_TIMEOUT)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            os.close(self._to_browser)
            os.close(self._from_browser)
            self._log.close()


# What the browser laid out, in CSS pixels of the page (not of the viewport).
PROBE = """(async () => {
  await document.fonts.ready;
  const box = e => { const r = e.getBoundingClientRect();
                     return [r.left + scrollX, r.top + scrollY, r.right + scrollX, r.bottom + scrollY]; };
  return {
    width: innerWidth,
    scrollWidth: document.documentElement.scrollWidth,
    height: document.documentElement.scrollHeight,
    sections: [...document.querySelectorAll('section.report')].map(s => ({
      path: s.dataset.path,
      charts: [...s.querySelectorAll('svg.chart')].map(box),
      tables: [...s.querySelectorAll('table')].map(box)})),
    charts: [...document.querySelectorAll('svg.chart')].map(svg => ({
      series: svg.dataset.series,
      scale: svg.getBoundingClientRect().width / svg.viewBox.baseVal.width,
      labels: [...svg.querySelectorAll('g.marker text')].map(t => ({
        box: box(t), length: t.textLength.baseVal.value, text: t.textContent}))})),
    levels: document.querySelectorAll('svg.chart g.level').length,
  };
})()"""


def overlaps(boxes: list[list[float]]) -> list[tuple[int, int]]:
    return [(i, j) for i, a in enumerate(boxes) for j, b in enumerate(boxes[i + 1:], i + 1)
            if a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]]


def png_size(png: bytes) -> tuple[int, int]:
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and png[12:16] == b"IHDR"
    w, h = struct.unpack(">II", png[16:24])
    return w, h


@pytest.fixture
def browser(chromium, tmp_path):
    b = Browser(tmp_path / "cdp-profile")
    try:
        yield b
    finally:
        b.close()


def test_report_at_two_widths_has_curves_first_and_labels_that_never_overlap(browser, tmp_path, capsys):
    from test_html import DIVERGES, cli_page, mixed_folder
    from trainproof_lsp.cli import main

    folder = mixed_folder(tmp_path)
    pages = {"folder": tmp_path / "folder.html", "compare": tmp_path / "compare.html"}
    assert main(["doctor", str(folder), "--html", str(pages["folder"])]) == 1
    code, _ = cli_page(tmp_path, "compare", "fixtures/hf_runs/healthy", "fixtures/hf_runs/lr_zero",
                       "fixtures/hf_runs/healthy/checkpoint-100", str(DIVERGES))
    assert code == 1
    (tmp_path / "page.html").rename(pages["compare"])
    capsys.readouterr()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    seen_labels = 0
    for name, page in pages.items():
        for width in (1280, 420):
            session = browser.open(page, width)
            laid = browser.evaluate(session, PROBE)
            assert laid["width"] == width
            assert laid["scrollWidth"] <= width, f"{name} at {width}px is {laid['scrollWidth']}px wide"
            # No two marker labels overlap, as the browser drew them; each is as long as
            # its textLength says (what tests/test_html.py computes its boxes from).
            for chart in laid["charts"]:
                boxes = [label["box"] for label in chart["labels"]]
                assert overlaps(boxes) == [], (name, width, chart["series"], [l["text"] for l in chart["labels"]])
                for label in chart["labels"]:
                    drawn = label["box"][2] - label["box"][0]
                    assert abs(drawn - label["length"] * chart["scale"]) < 1.0, (name, width, label)
                seen_labels += len(boxes)
            # Curves first: every chart is above every table of a section without charts,
            # and in a section with charts, its first chart is above its first table.
            with_charts = [s for s in laid["sections"] if s["charts"]]
            without = [s for s in laid["sections"] if not s["charts"]]
            assert laid["sections"][:len(with_charts)] == with_charts
            lowest_chart = max(c[3] for s in with_charts for c in s["charts"])
            assert all(t[1] > lowest_chart for s in without for t in s["tables"])
            for s in with_charts:
                assert min(c[1] for c in s["charts"]) < min(t[1] for t in s["tables"]), s["path"]
            png = browser.screenshot(session, width, laid["height"])
            assert png_size(png) == (width, laid["height"])
            shot = tmp_path / f"{name}-{width}.png"
            shot.write_bytes(png)
            shutil.copyfile(shot, ARTIFACTS / shot.name)
        if name == "folder":
            assert [s["path"] for s in laid["sections"]] == [  # the folder twice: tokenizer, then bundle
                str(folder / "trainer_state.json"), str(folder), str(folder), str(folder / "train.jsonl")]
            assert laid["levels"] == 6  # the diverging run's levels, drawn over its loss
    assert seen_labels >= 2 * 2 * 10  # the pages had labels to keep apart


def test_the_judged_levels_are_visible_over_a_noisy_run_at_two_widths(browser, tmp_path):
    """The red level lines over the noisy curve are pixels a reader sees: the loss chart
    screenshotted with them and with them hidden differs by a red bar's worth."""
    from test_html import noisy_diverging_run
    from trainproof_lsp.core.config import Config
    from trainproof_lsp.judge.compare import doctor_with_runs
    from trainproof_lsp.output.html import to_html

    log, _, _ = noisy_diverging_run(tmp_path)
    page = tmp_path / "noisy.html"
    page.write_text(to_html(*doctor_with_runs([log], Config())), encoding="utf-8")
    chart = "document.querySelector('svg.chart[data-series=\"loss\"]')"
    hide = ("document.head.insertAdjacentHTML('beforeend', "
            "'<style>svg.chart g.level{display:none}</style>'); true")
    for width in (1280, 420):
        session = browser.open(page, width)
        laid = browser.evaluate(session, PROBE)
        assert laid["levels"] == 3 and laid["scrollWidth"] <= width
        (loss,) = [c for c in laid["charts"] if c["series"] == "loss"]
        assert overlaps([label["box"] for label in loss["labels"]]) == []
        box = browser.evaluate(session, f"(() => {{ const r = {chart}.getBoundingClientRect(); "
                                        "return [r.left + scrollX, r.top + scrollY, r.width, r.height]; })()")

        def shot(suffix: str) -> Counter[tuple[int, int, int]]:
            png = browser.call("Page.captureScreenshot", {
                "format": "png", "captureBeyondViewport": True,
                "clip": {"x": box[0], "y": box[1], "width": box[2], "height": box[3], "scale": 1}}, session)["data"]
            data = base64.b64decode(png)
            (tmp_path / f"noisy-loss-{width}{suffix}.png").write_bytes(data)
            shutil.copyfile(tmp_path / f"noisy-loss-{width}{suffix}.png", ARTIFACTS / f"noisy-loss-{width}{suffix}.png")
            return colours(decode_png(data)[2])

        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        with_levels = shot("")
        browser.evaluate(session, hide)
        without = shot(".no-levels")
        # Three bars, each 20 of the 200 steps long and 3 pixels thick at any width (a
        # stroke that does not scale): at 420 px, where the chart is 0.6 of its size,
        # some 30 pixels long each, 176 pixels of them the full FAIL red (the rest
        # blended at their edges).
        assert near(with_levels, FAIL_RED) - near(without, FAIL_RED) > 120, width
