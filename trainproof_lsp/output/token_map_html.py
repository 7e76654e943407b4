"""The token map's length histogram in the HTML report: bars of the rows' token counts with
the max length marked, drawn from TP-MAP-LENGTHS's evidence (`histogram`: "edges;counts",
`max_len`, p50/p95/p99). Pure: a report in, an SVG string out; nothing is recomputed.
"""

from __future__ import annotations

import hashlib
from html import escape
from typing import Sequence

from ..core.model import Finding, Report

WIDTH, HEIGHT, PAD = 560, 160, 28  # pixels: a small figure beside the findings table


def _parse(text: object) -> tuple[list[int], list[int]] | None:
    if not isinstance(text, str) or ";" not in text:
        return None
    try:
        a, b = text.split(";")
        edges, counts = [int(x) for x in a.split(",")], [int(x) for x in b.split(",")]
    except ValueError:
        return None
    return (edges, counts) if len(edges) == len(counts) + 1 and counts else None


def histogram_svg(f: Finding) -> str | None:
    """The SVG of one TP-MAP-LENGTHS finding, or None when its evidence holds no histogram."""
    parsed = _parse(f.evidence.get("histogram"))
    if parsed is None:
        return None
    edges, counts = parsed
    top = max(counts) or 1
    span = edges[-1] - edges[0] or 1
    plot_w, plot_h = WIDTH - 2 * PAD, HEIGHT - 2 * PAD

    def x(v: float) -> float:
        return PAD + (v - edges[0]) / span * plot_w

    bars = []
    for i, c in enumerate(counts):
        h = c / top * plot_h
        bars.append(f'<rect class="bar" x="{x(edges[i]):.1f}" y="{PAD + plot_h - h:.1f}" '
                    f'width="{max(x(edges[i + 1]) - x(edges[i]) - 1, 1):.1f}" height="{h:.1f}">'
                    f"<title>{edges[i]}–{edges[i + 1]} tokens: {c} row(s)</title></rect>")
    marks: list[str] = []
    max_len = f.evidence.get("max_len")
    if isinstance(max_len, int) and not isinstance(max_len, bool):
        mx = x(max_len)
        marks.append(f'<line class="max-len" x1="{mx:.1f}" y1="{PAD - 6}" x2="{mx:.1f}" y2="{PAD + plot_h}" '
                     f'stroke="#c0392b" stroke-width="2" stroke-dasharray="4 3"/>'
                     f'<text x="{mx + 4:.1f}" y="{PAD - 8}" font-size="11" fill="#c0392b">max length {max_len}</text>')
    axis = (f'<line x1="{PAD}" y1="{PAD + plot_h}" x2="{PAD + plot_w}" y2="{PAD + plot_h}" stroke="#888"/>'
            f'<text x="{PAD}" y="{HEIGHT - 8}" font-size="11">{edges[0]}</text>'
            f'<text x="{PAD + plot_w}" y="{HEIGHT - 8}" font-size="11" text-anchor="end">{edges[-1]} tokens</text>')
    stats = ", ".join(f"{k} {f.evidence[k]}" for k in ("p50", "p95", "p99", "max") if k in f.evidence)
    share = f.evidence.get("share_over_max_len")
    desc = f"Row lengths in tokens ({stats})" + (f"; {100 * share:.3g}% over the max length" if
                                                  isinstance(share, (int, float)) else "")
    sid = "tm-" + hashlib.sha1(f.location.path.encode("utf-8", "surrogatepass")).hexdigest()[:10]
    detail = f"{len(counts)} bars of equal width from {edges[0]} to {edges[-1]} tokens" + (
        f"; the dashed line marks the max length {max_len}" if isinstance(max_len, int) else "")
    return (f'<figure class="token-lengths"><svg role="img" aria-labelledby="{sid}-t {sid}-d" '
            f'viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}"><title id="{sid}-t">{escape(desc)}'
            f'</title><desc id="{sid}-d">{escape(detail)}</desc><g fill="#4a78b5">{"".join(bars)}</g>{axis}'
            f'{"".join(marks)}</svg><figcaption>{escape(desc)}</figcaption></figure>')


def sections(r: Report) -> Sequence[str]:
    """The report's token-length figures (one per TP-MAP-LENGTHS finding)."""
    out = []
    for f in r.findings:
        if f.id == "TP-MAP-LENGTHS":
            svg = histogram_svg(f)
            if svg is not None:
                out.append("<h3>Token lengths</h3>" + svg)
    return out


__all__ = ["histogram_svg", "sections"]
