"""The HTML run report (`doctor --html`, `compare --html`, `render_run_report_html`).

Pages are parsed with html.parser, and positions are checked against the chart's own
axis (`data-x-domain` onto `data-x-range`), so a marker is proven to sit at the step its
finding cites and on the drawn curve. The golden page for fixtures/hf_runs/lr_hot_diverges
must stay byte-identical; after an intended change, regenerate it with

    python tests/test_html.py --update

and review the diff (open the page in a browser too).
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
from contextlib import contextmanager
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Iterator

import pytest

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "golden" / "html_lr_hot_diverges.html"
DIVERGES = Path("fixtures/hf_runs/lr_hot_diverges")  # relative: pages name paths as given


# --- a small DOM over html.parser -------------------------------------------------------

VOID = {"meta", "br", "hr", "img", "input", "link", "area", "base", "col", "embed", "source", "wbr"}


@dataclass
class Node:
    tag: str
    attrs: dict[str, str]
    children: list["Node"] = field(default_factory=list)
    text: str = ""

    def iter(self, tag: str | None = None) -> Iterator["Node"]:
        for c in self.children:
            if tag is None or c.tag == tag:
                yield c
            yield from c.iter(tag)

    def find_all(self, tag: str, **attrs: str) -> list["Node"]:
        return [n for n in self.iter(tag) if all(n.attrs.get(k.replace("_", "-")) == v for k, v in attrs.items())]

    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())

    def all_text(self) -> str:
        return self.text + "".join(c.all_text() for c in self.children)


class _Builder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#root", {})
        self.stack = [self.root]

    def handle_starttag(self, tag, attrs):
        node = Node(tag, {k: v or "" for k, v in attrs})
        self.stack[-1].children.append(node)
        if tag not in VOID:
            self.stack.append(node)

    def handle_startendtag(self, tag, attrs):
        self.stack[-1].children.append(Node(tag, {k: v or "" for k, v in attrs}))

    def handle_endtag(self, tag):
        assert self.stack[-1].tag == tag, f"</{tag}> closes <{self.stack[-1].tag}>"
        self.stack.pop()

    def handle_data(self, data):
        if data.strip():  # whitespace between elements is layout, not content
            self.stack[-1].children.append(Node("#text", {}, text=data))


def parse(page: str) -> Node:
    b = _Builder()
    b.feed(page)
    b.close()
    assert b.stack == [b.root], f"unclosed elements: {[n.tag for n in b.stack[1:]]}"
    return b.root


def x_of(svg: Node, step: float) -> float:
    """Where the chart puts `step`, from its own axis attributes."""
    d0, d1 = map(float, svg.attrs["data-x-domain"].split())
    r0, r1 = map(float, svg.attrs["data-x-range"].split())
    return r0 + (step - d0) / (d1 - d0) * (r1 - r0)


def polyline_points(svg: Node, css: str = "run") -> list[tuple[float, float]]:
    curves = [g for g in svg.iter("g") if {"curve", css} <= g.classes()]
    assert len(curves) == 1, f"{len(curves)} {css} curves"
    return [tuple(map(float, p.split(","))) for line in curves[0].iter("polyline")
            for p in line.attrs["points"].split()]  # type: ignore[misc]


def markers(svg: Node, rule: str) -> list[Node]:
    return [g for g in svg.iter("g") if "marker" in g.classes() and g.attrs.get("data-rule") == rule]


def table_rows(table: Node, part: str = "tbody") -> list[list[str]]:
    """Each row of a table's body (or head) as the text of its cells."""
    (body,) = list(table.iter(part))
    return [[c.all_text() for c in tr.children if c.tag in ("td", "th")] for tr in body.iter("tr")]


def label_boxes(svg: Node) -> list[tuple[float, float, float, float]]:
    """Each marker label's box (left, top, right, bottom) from the SVG: `textLength` fixes
    its width in the browser, the font its height (10px: 8 above the baseline, 2.5 below).
    (html.parser lowercases attribute names.)"""
    out = []
    for text in (t for g in svg.iter("g") if "marker" in g.classes() for t in g.iter("text")):
        assert text.attrs["lengthadjust"] == "spacingAndGlyphs" and "text-anchor" not in text.attrs
        x, y, w = float(text.attrs["x"]), float(text.attrs["y"]), float(text.attrs["textlength"])
        out.append((x, y - 8.0, x + w, y + 2.5))
    return out


def overlapping(boxes: list[tuple[float, float, float, float]]) -> list[tuple[int, int]]:
    return [(i, j) for i, a in enumerate(boxes) for j, b in enumerate(boxes[i + 1:], i + 1)
            if a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]]


def charts(section: Node) -> dict[str, Node]:
    return {s.attrs["data-series"]: s for s in section.iter("svg")}


@contextmanager
def at_root() -> Iterator[None]:
    cwd = os.getcwd()
    os.chdir(ROOT)  # paths in pages are relative to the repository root, as in the golden file
    try:
        yield
    finally:
        os.chdir(cwd)


def doctor_page(*paths: Path, **kw) -> str:
    from trainproof_lsp.core.config import Config
    from trainproof_lsp.judge.compare import doctor_with_runs
    from trainproof_lsp.output.html import to_html

    with at_root():
        return to_html(*doctor_with_runs(list(paths), Config(), **kw))


def cli_page(tmp_path: Path, *argv: str) -> tuple[int, str]:
    from trainproof_lsp.cli import main

    out = tmp_path / "page.html"
    with at_root():
        code = main([*argv, "--html", str(out)])
    return code, out.read_text(encoding="utf-8")


# --- the must-show --------------------------------------------------------------

def test_diverging_run_page_marks_the_divergence_at_its_step_on_the_loss_curve(tmp_path, capsys):
    code, page = cli_page(tmp_path, "doctor", str(DIVERGES))
    assert code == 1  # --html changes no exit code
    capsys.readouterr()
    doc = parse(page)
    (section,) = doc.find_all("section", data_verdict="FAIL")
    svgs = charts(section)
    assert list(svgs) == ["loss", "lr", "grad_norm"]  # one chart per curve the log holds; no eval loss
    assert len(list(section.iter("svg"))) == 3
    loss = svgs["loss"]
    evidence = _finding_evidence("TP-DIVERGE")
    end = [m for m in markers(loss, "TP-DIVERGE") if m.attrs["data-step"] == str(evidence["end_step"])]
    best = [m for m in markers(loss, "TP-DIVERGE") if m.attrs["data-step"] == str(evidence["best_step"])]
    assert len(end) == 1 and len(best) == 1
    points = polyline_points(loss)
    for mark, step in ((end[0], evidence["end_step"]), (best[0], evidence["best_step"])):
        (line,) = list(mark.iter("line"))
        assert float(line.attrs["x1"]) == pytest.approx(x_of(loss, step), abs=0.01)
        (dot,) = list(mark.iter("circle"))
        cx, cy = float(dot.attrs["cx"]), float(dot.attrs["cy"])
        assert (cx, cy) in points, "the marker's dot is not on the drawn curve"
        (label,) = list(mark.iter("text"))
        assert label.all_text().startswith("TP-DIVERGE")
        assert "TP-DIVERGE" in next(mark.iter("title")).all_text()
    assert end[0].attrs["data-role"] == "end" and best[0].attrs["data-role"] == "best"
    assert "marker" in end[0].classes() and "fail" in end[0].classes()


def _finding_evidence(rule: str) -> dict:
    from trainproof_lsp.judge import engine
    from trainproof_lsp.output import render
    from trainproof_lsp.core.config import Config

    with at_root():
        out = json.loads(render.to_json(engine.doctor([DIVERGES], Config())))
    (f,) = [f for r in out["reports"] for f in r["findings"] if f["id"] == rule]
    return f["evidence"]


def test_page_makes_no_request_of_any_kind():
    page = doctor_page(DIVERGES)
    lowered = page.lower()
    for banned in ("http:", "https:", "//", "<script", "<link", "@import", "url(", "<img", "<iframe",
                   "src=", "href=", "<object", "<embed", "font-face"):
        assert banned not in lowered, banned
    meta = [m for m in parse(page).iter("meta") if m.attrs.get("http-equiv") == "Content-Security-Policy"]
    assert meta and "default-src 'none'" in meta[0].attrs["content"]


def test_every_chart_has_a_title_and_a_description_it_is_labelled_by():
    doc = parse(doctor_page(DIVERGES))
    svgs = list(doc.iter("svg"))
    assert svgs
    for svg in svgs:
        assert svg.attrs["role"] == "img"
        ids = svg.attrs["aria-labelledby"].split()
        assert [c.tag for c in svg.children[:2]] == ["title", "desc"]
        assert [c.attrs["id"] for c in svg.children[:2]] == ids
        assert svg.children[1].all_text().strip()
    desc = next(doc.find_all("svg", data_series="loss")[0].iter("desc")).all_text()
    assert "TP-DIVERGE end @120 (FAIL)" in desc


def test_rendering_is_byte_identical_and_matches_the_golden_page():
    first = doctor_page(DIVERGES)
    assert first == doctor_page(DIVERGES)
    assert first == GOLDEN.read_text(encoding="utf-8"), \
        "the page changed: review it, then `python tests/test_html.py --update`"


# --- axes, non-finite points, thinning ---------------------------------------------------

def test_series_spanning_orders_of_magnitude_get_a_log_axis():
    svgs = charts(parse(doctor_page(DIVERGES)))
    assert svgs["grad_norm"].attrs["data-y-scale"] == "log"  # 0.67 .. 92.8
    assert svgs["loss"].attrs["data-y-scale"] == "linear"  # 4.0 .. 109: within two decades
    assert svgs["lr"].attrs["data-y-scale"] == "linear"  # starts at 0: no log axis


def test_nan_points_are_marked_on_their_own_rail_and_never_joined_by_lines():
    from trainproof_lsp.core.config import Config
    from trainproof_lsp.judge.engine import doctor

    with at_root():
        (report,) = doctor([Path("fixtures/hf_runs/nan_loss")], Config()).reports
    svgs = charts(parse(doctor_page(Path("fixtures/hf_runs/nan_loss"))))
    loss = svgs["loss"]
    assert loss.attrs["data-y-scale"] == "log"  # a 6.6e5 spike over a loss of 4
    bad = [g for g in loss.iter("g") if "nonfinite" in g.classes()]
    assert bad and {g.attrs["data-value"] for g in bad} == {"NaN"}
    assert min(int(g.attrs["data-step"]) for g in bad) == 39
    points = polyline_points(loss)
    first_nan_x = x_of(loss, 39)
    assert all(x < first_nan_x - 0.01 for x, _ in points), "a line was drawn through a NaN"
    (nan_mark,) = markers(loss, "TP-NAN")
    assert nan_mark.attrs["data-step"] == "39"
    # the NaN finding's dot sits on the rail with the NaN crosses, not on the curve
    # (a cross is drawn from (x-4, y-4): "M<x-4> <y-4>L...")
    rail_y = {float(p.attrs["d"].split()[1].split("L")[0]) + 4 for g in bad for p in g.iter("path")}
    assert len({round(y, 2) for y in rail_y}) == 1
    (dot,) = list(nan_mark.iter("circle"))
    assert float(dot.attrs["cy"]) == pytest.approx(rail_y.pop(), abs=0.01)
    assert any(f.id == "TP-NAN" for f in report.findings)


def test_infinite_values_get_their_own_glyph(tmp_path):
    from trainproof_lsp.core.config import Config
    from trainproof_lsp.judge.compare import doctor_with_runs
    from trainproof_lsp.output.html import to_html

    rows = [{"step": i, "loss": 2.0 - i * 0.01} for i in range(1, 40)]
    rows[20]["loss"] = math.inf
    log = tmp_path / "metrics.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    svgs = charts(parse(to_html(*doctor_with_runs([log], Config()))))
    (inf,) = [g for g in svgs["loss"].iter("g") if "nonfinite" in g.classes()]
    assert inf.attrs == {"class": "nonfinite", "data-step": "21", "data-value": "Infinity"}
    # the curve breaks at the Inf: two polylines, neither reaching step 21
    curve = next(g for g in svgs["loss"].iter("g") if "curve" in g.classes())
    assert len(list(curve.iter("polyline"))) == 2


def test_a_long_run_is_thinned_per_pixel_column_but_keeps_its_spike(tmp_path):
    from trainproof_lsp.core.config import Config
    from trainproof_lsp.judge.compare import doctor_with_runs
    from trainproof_lsp.output.html import PLOT_LEFT, PLOT_RIGHT, to_html

    rows = [{"step": i, "loss": 3.0 - 1e-5 * i} for i in range(1, 50_001)]
    rows[31_337]["loss"] = 9.0
    log = tmp_path / "metrics.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    page = to_html(*doctor_with_runs([log], Config()))
    loss = charts(parse(page))["loss"]
    points = polyline_points(loss)
    assert len(points) <= 4 * (PLOT_RIGHT - PLOT_LEFT + 1)  # first/min/max/last per pixel column
    top = min(y for _, y in points)  # SVG y grows downward: the spike is the smallest y
    (spike,) = [x for x, y in points if y == top]
    assert spike == pytest.approx(x_of(loss, 31_338), abs=1.0)
    assert len(page) < 200_000


# --- comparisons ------------------------------------------------------------------------

def test_compare_page_overlays_each_run_on_the_baseline_and_marks_both_ends(tmp_path, capsys):
    code, page = cli_page(tmp_path, "compare", "fixtures/hf_runs/healthy", "fixtures/hf_runs/lr_zero",
                          "fixtures/hf_runs/healthy/checkpoint-100")
    capsys.readouterr()
    assert code == 1
    doc = parse(page)
    (lr_zero,) = doc.find_all("section", data_path="fixtures/hf_runs/lr_zero/trainer_state.json")
    loss = charts(lr_zero)["loss"]
    assert [g.attrs["class"] for g in loss.iter("g") if "curve" in g.classes()] == ["curve base", "curve run"]
    assert [r for r in loss.iter("rect") if "band" in r.classes()], "no common-span band"
    floor = {m.attrs["data-line"]: m for m in markers(loss, "TP-FLOOR-RATIO")}
    assert floor["run"].attrs["data-step"] == "4"
    assert floor["base"].attrs["data-step"] == "100"
    (dot,) = list(floor["base"].iter("circle"))
    assert (float(dot.attrs["cx"]), float(dot.attrs["cy"])) in polyline_points(loss, "base")
    # several runs against one baseline: an overview with all of them over it
    (overview,) = [s for s in doc.iter("section") if "overview" in s.classes()]
    curves = [g for g in charts(overview)["loss"].iter("g") if "curve" in g.classes()]
    assert len(curves) == 3 and "base" in curves[0].classes()
    assert [table_rows(t) for t in overview.iter("table") if "ranking" in t.classes()] == [[
        ["1", "PASS", "fixtures/hf_runs/healthy/checkpoint-100/trainer_state.json"
         "compared over steps 1-100 only: the baseline's loss goes on to step 200",
         "1.00x", "1.00x", "-67.4%", "-67.4%", "1.00x", "1.00x", "–"],
        ["2", "FAIL", "fixtures/hf_runs/lr_zero/trainer_state.json"
         "compared over steps 1-100 only: the baseline's loss goes on to step 200",
         "3.07x", "3.07x", "+0.1%", "-67.4%", "-", "-",
         "TP-AT-CHANCE TP-DEAD-RUN TP-END-RATIO TP-FLOOR-RATIO TP-IMPROVE-DEFICIT TP-ZERO-LR"]]]


def test_doctor_with_a_baseline_draws_the_run_and_its_comparison(tmp_path, capsys):
    code, page = cli_page(tmp_path, "doctor", "fixtures/hf_runs/lr_zero", "--baseline", "fixtures/hf_runs/healthy")
    capsys.readouterr()
    assert code == 1
    sections = parse(page).find_all("section", data_path="fixtures/hf_runs/lr_zero/trainer_state.json")
    assert len(sections) == 2  # its own report, then the comparison
    assert "against baseline" not in sections[0].all_text() and "against baseline" in sections[1].all_text()
    assert len([g for g in charts(sections[1])["loss"].iter("g") if "curve" in g.classes()]) == 2


def test_a_baseline_that_is_a_checkpoint_copy_of_the_run_is_marked_on_the_baseline(tmp_path):
    # The run folder lists its checkpoint-60/ copy among its sources; with that copy as the
    # baseline, what the baseline's own failures cite (TP-BAD-BASELINE) is the baseline's.
    from trainproof_lsp.judge.compare import compare_with_runs
    from trainproof_lsp.core.config import Config
    from trainproof_lsp.output.html import to_html

    state = json.loads((ROOT / DIVERGES / "trainer_state.json").read_text(encoding="utf-8"))
    run_dir = tmp_path / "run"
    (run_dir / "checkpoint-60").mkdir(parents=True)
    (run_dir / "trainer_state.json").write_text(json.dumps(state, indent=2), encoding="utf-8")
    prefix = {**state, "log_history": [e for e in state["log_history"] if e["step"] <= 60 and "loss" in e]}
    copy = run_dir / "checkpoint-60" / "trainer_state.json"
    copy.write_text(json.dumps(prefix, indent=2), encoding="utf-8")
    outcome, runs = compare_with_runs(copy, [run_dir], Config())
    (report,) = outcome.reports
    assert str(copy) in report.artefact.sources
    assert any(f.id == "TP-BAD-BASELINE" for f in report.findings)
    loss = charts(parse(to_html(outcome, runs)))["loss"]
    bad = markers(loss, "TP-BAD-BASELINE")
    assert bad and {m.attrs["data-line"] for m in bad} == {"base"}


def test_a_baseline_on_another_schedule_is_drawn_on_the_runs_schedule(tmp_path):
    from trainproof_lsp.judge.compare import compare_with_runs
    from trainproof_lsp.core.config import Config
    from trainproof_lsp.output.html import to_html

    def write(name: str, steps: range) -> Path:
        path = tmp_path / name
        n = len(steps)
        path.write_text("".join(json.dumps({"step": s, "loss": 4.0 - 2.0 * i / n}) + "\n"
                                for i, s in enumerate(steps)), encoding="utf-8")
        return path

    base = write("base.jsonl", range(1, 51))
    run = write("run.jsonl", range(100, 5001, 100))
    outcome, runs = compare_with_runs(base, [run], Config())
    (report,) = outcome.reports
    assert report.comparison["axis"] == "fraction"
    loss = charts(parse(to_html(outcome, runs)))["loss"]
    base_pts, run_pts = polyline_points(loss, "base"), polyline_points(loss, "run")
    assert base_pts[-1][0] == pytest.approx(run_pts[-1][0], abs=0.01)  # both end at 100% of their schedule
    assert "rescaled" in loss.all_text()


# --- what has no curves -------------------------------------------------------------------

def test_reports_without_a_run_are_shown_without_curves(tmp_path):
    bad = tmp_path / "trainer_state.json"
    bad.write_text('{"log_history": [', encoding="utf-8")
    page = doctor_page(bad)
    doc = parse(page)
    (section,) = doc.find_all("section", data_verdict="NOT-CHECKED")
    assert not list(section.iter("svg"))
    assert "invalid JSON" in section.all_text()


def test_a_configuration_error_is_a_page_too(tmp_path):
    from trainproof_lsp.core.model import Outcome
    from trainproof_lsp.output.html import to_html

    doc = parse(to_html(Outcome(reports=(), error="configuration: bad limit")))
    assert "configuration: bad limit" in doc.all_text()
    assert not list(doc.iter("svg"))


# --- the API the language server calls -------------------------------------------------------

def test_render_run_report_html_takes_paths_or_a_judged_outcome():
    from trainproof_lsp.core.config import Config
    from trainproof_lsp.readers.detect import Detected
    from trainproof_lsp.judge.engine import judge_run, read_run
    from trainproof_lsp.core.model import Outcome
    from trainproof_lsp.api import render_run_report_html

    with at_root():
        from_paths = render_run_report_html([DIVERGES / "trainer_state.json"], Config())
        path = DIVERGES / "trainer_state.json"
        run = read_run(path, Detected("metrics", "hf-trainer-state"))
        report = judge_run(run, Config())
        from_outcome = render_run_report_html(Outcome(reports=(report,)), runs={run.path: run})
    for page in (from_paths, from_outcome):
        svgs = charts(parse(page))
        assert list(svgs) == ["loss", "lr", "grad_norm"]
        assert markers(svgs["loss"], "TP-DIVERGE")
    # without its run, an outcome still renders: findings and checks, no curves
    bare = parse(render_run_report_html(Outcome(reports=(report,))))
    assert not list(bare.iter("svg")) and bare.find_all("tr", data_rule="TP-DIVERGE")


def test_render_run_report_html_reports_a_missing_path_as_not_checked(tmp_path):
    from trainproof_lsp.api import render_run_report_html

    page = render_run_report_html([tmp_path / "nowhere"])
    assert parse(page).find_all("section", data_verdict="NOT-CHECKED")


# --- marks from evidence, locations and related locations ------------------------------------

def test_finding_marks_name_evidence_steps_and_merge_a_step_cited_twice():
    from trainproof_lsp.core.model import Finding, Level, Location, Related, Span
    from trainproof_lsp.readers.trainer_state import read_trainer_state
    from trainproof_lsp.output.html import _StepIndex, finding_marks

    path = ROOT / DIVERGES / "trainer_state.json"
    run = read_trainer_state(path, path.read_bytes())
    loss = run.get("loss")
    assert loss is not None
    at = {s: run.location(r) for s, r in zip(loss.steps, loss.records)}
    f = Finding(id="TP-DIVERGE", level=Level.FAIL, message="m",
                evidence={"best_step": 3, "end_step": 120, "ratio": 2.0, "window": 4},
                location=at[120], related=(Related(location=at[3], message="best"),
                                           Related(location=at[39], message="other"),
                                           Related(location=Location(path="elsewhere.json", span=Span(0, 0, 0, 1)),
                                                   message="not this run")))
    marks = finding_marks(f, _StepIndex(run))
    assert [(m.step, m.role, m.label) for m in marks] == [
        (3, "best", "TP-DIVERGE best @3"), (39, "related", "TP-DIVERGE related @39"),
        (120, "end", "TP-DIVERGE end @120")]


def test_pair_series_names_only_comparison_rules():
    from trainproof_lsp.output.html import CHARTED, PAIR_SERIES
    from trainproof_lsp.rules import BY_ID

    for rule_id, series in PAIR_SERIES.items():
        assert BY_ID[rule_id].applies_to == "comparison", rule_id
        assert series in CHARTED


def test_html_option_is_offered_by_doctor_and_compare():
    from trainproof_lsp.cli import build_parser

    parser = build_parser()
    assert parser.parse_args(["doctor", "x", "--html", "p.html"]).html == "p.html"
    assert parser.parse_args(["compare", "b", "r", "--html", "p.html"]).html == "p.html"


def test_text_output_is_the_same_with_and_without_html(tmp_path, capsys):
    from trainproof_lsp.cli import main

    with at_root():
        main(["doctor", str(DIVERGES)])
        plain = capsys.readouterr().out
        main(["doctor", str(DIVERGES), "--html", str(tmp_path / "p.html")])
        with_html = capsys.readouterr().out
    assert plain == with_html
    assert re.search(r"TP-DIVERGE", plain)


# --- the page's order, the levels rules judged, axes, tables, labels ----------------------

def outline(section: Node) -> list[str]:
    """What a section shows, in page order: charts, and each table by its class."""
    out = []
    for n in section.iter():
        if n.tag == "div" and "charts" in n.classes():
            out.append("charts")
        elif n.tag == "table":
            out.append(n.attrs.get("class", ""))
    return out


def mixed_folder(tmp_path: Path) -> Path:
    """A training output folder as a user has one: the diverging run's log and config, a
    training set with a repeated row, and a tokenizer (the fixture without an EOS token)."""
    folder = tmp_path / "out"
    folder.mkdir()
    for name in ("trainer_state.json", "config.json"):
        (folder / name).write_bytes((ROOT / DIVERGES / name).read_bytes())
    for f in (ROOT / "fixtures/tokenizers/missing_eos").iterdir():
        (folder / f.name).write_bytes(f.read_bytes())
    rows = [{"text": f"example {i}"} for i in range(5)] + [{"text": "example 1"}]
    (folder / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return folder


def test_curves_come_before_tokenizer_and_dataset_tables(tmp_path):
    from trainproof_lsp.core.config import Config
    from trainproof_lsp.judge.compare import doctor_with_runs
    from trainproof_lsp.output.html import to_html

    folder = mixed_folder(tmp_path)
    outcome, runs = doctor_with_runs([folder], Config())
    judged = [r.artefact.path for r in outcome.reports]
    # the folder twice: its tokenizer, then its files judged against each other (the bundle)
    assert judged == [str(folder), str(folder), str(folder / "train.jsonl"), str(folder / "trainer_state.json")]
    assert [r.artefact.kind for r in outcome.reports] == ["tokenizer", "bundle", "dataset", "metrics"]
    doc = parse(to_html(outcome, runs))
    sections = [s for s in doc.iter("section") if "report" in s.classes()]
    assert [(s.attrs["id"], s.attrs["data-path"], s.attrs["data-verdict"]) for s in sections] == [
        ("r1", str(folder / "trainer_state.json"), "FAIL"),  # the run's curves first
        ("r2", str(folder), "FAIL"),  # the tokenizer
        ("r3", str(folder), "PASS"),  # the bundle: nothing disagrees across its files
        ("r4", str(folder / "train.jsonl"), "WARN"),  # the dataset
    ]
    assert [outline(s) for s in sections] == [["charts", "findings", "skipped"], ["findings", "skipped"],
                                             ["skipped"], ["findings", "skipped"]]
    assert list(charts(sections[0])) == ["loss", "lr", "grad_norm"]
    assert not any(list(section.iter("svg")) for section in sections[1:])


def noisy_diverging_run(tmp_path: Path) -> tuple[Path, list[int], list[float]]:
    """A loss that falls from 4 to 2 over 80 steps, climbs to 8 by step 120 and stays
    there, each point off its level by up to 45% either way: the raw points of the end
    overlap those of the best stretch, only the window medians tell them apart."""
    import random

    rng = random.Random(25)
    steps = list(range(1, 201))

    def level(s: int) -> float:
        return 4.0 - 2.0 * s / 80 if s <= 80 else min(8.0, 2.0 + 6.0 * (s - 80) / 40)

    values = [level(s) * (1 + rng.uniform(-0.45, 0.45)) for s in steps]
    log = tmp_path / "noisy.jsonl"
    log.write_text("".join(json.dumps({"step": s, "loss": v}) + "\n" for s, v in zip(steps, values)),
                   encoding="utf-8")
    return log, steps, values


def y_of(svg: Node, value: float) -> float:
    assert svg.attrs["data-y-scale"] == "linear"
    d0, d1 = map(float, svg.attrs["data-y-domain"].split())
    r0, r1 = map(float, svg.attrs["data-y-range"].split())
    return r0 + (value - d0) / (d1 - d0) * (r1 - r0)


def test_the_levels_a_rule_judged_are_drawn_over_a_noisy_run(tmp_path):
    from trainproof_lsp.core.config import Config
    from trainproof_lsp.judge.compare import doctor_with_runs
    from trainproof_lsp.output.html import to_html
    from trainproof_lsp.rules._stats import median

    log, steps, values = noisy_diverging_run(tmp_path)
    outcome, runs = doctor_with_runs([log], Config())
    (report,) = outcome.reports
    (diverge,) = [f for f in report.findings if f.id == "TP-DIVERGE"]
    assert diverge.level.value == "FAIL"
    ev = diverge.evidence
    w = ev["window"]
    assert w == 20 and ev["end_step"] == 200
    assert ev["end_level"] == median(values[-20:])
    # the noise: the end window's raw points spread over more than the end level's half
    end_points = values[-20:]
    assert max(end_points) - min(end_points) > 0.5 * ev["end_level"]

    loss = charts(parse(to_html(outcome, runs)))["loss"]
    levels = {(g.attrs["data-rules"], g.attrs["data-names"]): g for g in loss.iter("g") if "level" in g.classes()}
    end = next(g for (rules, names), g in levels.items() if "TP-DIVERGE" in rules.split()
               and "end level" in names.split("/")[rules.split().index("TP-DIVERGE")])
    assert "fail" in end.classes()
    assert float(end.attrs["data-value"]) == pytest.approx(ev["end_level"], rel=1e-11)
    assert end.attrs["data-steps"] == "181 200"  # the last 20 points
    halo, line = list(end.iter("line"))
    assert "halo" in halo.classes()
    assert float(line.attrs["x1"]) == pytest.approx(x_of(loss, 181), abs=0.01)
    assert float(line.attrs["x2"]) == pytest.approx(x_of(loss, 200), abs=0.01)
    assert float(line.attrs["y1"]) == float(line.attrs["y2"]) == pytest.approx(y_of(loss, ev["end_level"]), abs=0.01)
    best = next(g for (rules, names), g in levels.items() if rules.split()[0] == "TP-DIVERGE"
                and names.split("/")[0] == "best level")
    lo, hi = map(int, best.attrs["data-steps"].split())
    assert hi - lo == 19 and lo <= int(ev["best_step"]) <= hi  # type: ignore[arg-type]
    assert median(values[lo - 1:hi]) == ev["best_level"]
    assert float(best.attrs["data-value"]) == pytest.approx(ev["best_level"], rel=1e-11)
    # the legend under the chart says each level in words
    figure = next(f for f in parse(to_html(outcome, runs)).iter("figure") if f.attrs["data-series"] == "loss")
    (legend,) = [u for u in figure.iter("ul") if "levels" in u.classes()]
    texts = [li.all_text() for li in legend.iter("li")]
    assert any(t.startswith("TP-DIVERGE end level") or " and TP-DIVERGE end level" in t for t in texts)
    assert any(t.endswith(": median of steps 181-200 (20 points)") for t in texts)


def test_level_spans_place_each_rules_level_on_its_window():
    from trainproof_lsp.core.model import Finding, Level, Location, Series
    from trainproof_lsp.output.levels import level_spans

    values = [5.0, 4.0, 6.0, 3.0, 2.5, 2.0, 9.0, 9.5, 8.0, 10.0]
    s = Series("loss", "loss", range(10, 110, 10), values, range(10))

    def spans(rule: str, **ev: float) -> list[tuple[str, float, int, int]]:
        f = Finding(id=rule, level=Level.FAIL, message="m", location=Location(path="x"), evidence=ev)
        return [(x.name, x.value, x.first_step, x.last_step) for x in level_spans(f, s)]

    assert spans("TP-DIVERGE", end_level=9.5, best_level=2.5, best_step=60, window=3) == [
        ("end level", 9.5, 80, 100), ("best level", 2.5, 40, 60)]
    assert spans("TP-DEAD-RUN", start_level=5.0, end_level=9.5) == [  # w=3: 10 // 5 is 2, clamped to 3
        ("start level", 5.0, 10, 30), ("end level", 9.5, 80, 100)]
    assert spans("TP-LOSS-ABOVE-UNIFORM", level=9.25, step=70, last_step=100) == [("level", 9.25, 70, 100)]
    assert spans("TP-LOSS-SPIKE-UNRECOVERED", step=70, level_before=3.5, level_after=9.5, points_after=3) == [
        ("level before", 3.5, 10, 60), ("level after", 9.5, 80, 100)]
    # a level that is no median of the points where the evidence puts it is not drawn
    assert spans("TP-DIVERGE", end_level=7.0, best_level=2.5, best_step=60, window=3) == [
        ("best level", 2.5, 40, 60)]
    assert spans("TP-LOSS-ABOVE-UNIFORM", level=9.0, step=70, last_step=100) == []
    assert spans("TP-FLAT", mean=5.0) == []  # no level to draw


def test_comparison_levels_are_drawn_on_the_windows_the_comparison_measured():
    from trainproof_lsp.core.config import Config
    from trainproof_lsp.judge.compare import compare_with_runs
    from trainproof_lsp.output.html import to_html
    from trainproof_lsp.rules.compare import UNCOMPARABLE_RULE, align

    with at_root():
        outcome, runs = compare_with_runs(Path("fixtures/hf_runs/healthy"), [Path("fixtures/hf_runs/lr_zero")],
                                          Config())
    (report,) = outcome.reports
    assert report.baseline is not None
    run, base = runs[report.artefact.path], runs[report.baseline.path]
    pair = align(run, base, Config().limits_for(UNCOMPARABLE_RULE))

    def steps(side, w) -> str:
        return f"{side.loss.steps[w.lo]} {side.loss.steps[w.hi - 1]}"

    loss = charts(parse(to_html(outcome, runs)))["loss"]
    drawn = {(g.attrs["data-line"], g.attrs["data-names"]): g for g in loss.iter("g") if "level" in g.classes()}
    floor = next(f for f in report.findings if f.id == "TP-FLOOR-RATIO").evidence
    assert {k: (g.attrs["data-rules"], g.attrs["data-steps"]) for k, g in drawn.items() if k[0] == "base"} == {
        ("base", "baseline floor/baseline end level/baseline end level"):
            ("TP-FLOOR-RATIO TP-END-RATIO TP-IMPROVE-DEFICIT", steps(pair.base, pair.base_end)),
        ("base", "baseline start level"): ("TP-IMPROVE-DEFICIT", steps(pair.base, pair.base_start)),
    }
    assert steps(pair.base, pair.base_end) == "92 100" and steps(pair.base, pair.base_start) == "1 8"
    end = drawn[("run", "end level")]
    assert end.attrs["data-rules"] == "TP-END-RATIO" and end.attrs["data-steps"] == steps(pair.run, pair.run_end)
    assert float(end.attrs["data-value"]) == pytest.approx(pair.run_end_level, rel=1e-11)
    run_floor = drawn[("run", "floor")]
    lo, hi = map(int, run_floor.attrs["data-steps"].split())
    assert lo <= int(floor["run_floor_step"]) <= hi  # type: ignore[arg-type]
    assert float(run_floor.attrs["data-value"]) == pytest.approx(floor["run_floor"], rel=1e-11)
    # the baseline's level lies on the baseline's own x positions
    base_end = drawn[("base", "baseline floor/baseline end level/baseline end level")]
    line = [ln for ln in base_end.iter("line") if "halo" not in ln.classes()][0]
    assert float(line.attrs["x1"]) == pytest.approx(x_of(loss, 92), abs=0.01)
    assert float(line.attrs["x2"]) == pytest.approx(x_of(loss, 100), abs=0.01)


def test_overview_x_axis_spans_every_compared_run(tmp_path):
    from trainproof_lsp.core.config import Config
    from trainproof_lsp.judge.compare import compare_with_runs
    from trainproof_lsp.output.html import to_html

    def write(name: str, steps: range) -> Path:
        path = tmp_path / name
        path.write_text("".join(json.dumps({"step": s, "loss": 4.0 / (1 + 0.01 * s)}) + "\n" for s in steps),
                        encoding="utf-8")
        return path

    base = write("base.jsonl", range(10, 1001, 10))
    longer, shorter = write("longer.jsonl", range(10, 1201, 10)), write("shorter.jsonl", range(10, 801, 10))
    outcome, runs = compare_with_runs(base, [longer, shorter], Config())
    assert [r.comparison["axis"] for r in outcome.reports] == ["step", "step"]
    doc = parse(to_html(outcome, runs))
    (overview,) = [s for s in doc.iter("section") if "overview" in s.classes()]
    loss = charts(overview)["loss"]
    assert loss.attrs["data-x-domain"] == "10 1200"  # the baseline ends at 1000, a run at 1200
    assert [t.all_text() for t in loss.iter("text") if t.attrs.get("text-anchor") == "middle"][-1] == "step"
    # each run's last point is drawn at its own last step
    for g in (g for g in loss.iter("g") if "curve" in g.classes()):
        last = int(g.attrs["data-label"].rsplit("-", 1)[1].rstrip(")"))
        assert polyline_points(loss, g.attrs["class"].split()[1])[-1][0] == pytest.approx(x_of(loss, last), abs=0.01)
    assert sorted(g.attrs["data-label"].rsplit(" ", 1)[1] for g in loss.iter("g") if "curve" in g.classes()) == [
        "10-1000)", "10-1200)", "10-800)"]
    # each run's own chart spans it and the baseline
    for r in outcome.reports:
        (section,) = doc.find_all("section", data_path=r.artefact.path)
        last = 1200 if r.artefact.path == str(longer) else 1000
        assert charts(section)["loss"].attrs["data-x-domain"] == f"10 {last}"


def test_overview_on_the_fraction_axis_spans_each_runs_whole_schedule(tmp_path):
    from trainproof_lsp.core.config import Config
    from trainproof_lsp.judge.compare import compare_with_runs
    from trainproof_lsp.output.html import to_html

    def write(name: str, steps: range) -> Path:
        path = tmp_path / name
        n = len(steps)
        path.write_text("".join(json.dumps({"step": s, "loss": 4.0 - 2.0 * i / n}) + "\n"
                                for i, s in enumerate(steps)), encoding="utf-8")
        return path

    base = write("base.jsonl", range(1, 51))
    runs_ = [write("run_a.jsonl", range(100, 5001, 100)), write("run_b.jsonl", range(40, 2001, 40))]
    outcome, runs = compare_with_runs(base, runs_, Config())
    assert [r.comparison["axis"] for r in outcome.reports] == ["fraction", "fraction"]
    (overview,) = [s for s in parse(to_html(outcome, runs)).iter("section") if "overview" in s.classes()]
    loss = charts(overview)["loss"]
    assert loss.attrs["data-x-domain"] == "2 100"  # percent of each schedule: 1/50, 40/2000, 100/5000 .. 100%
    assert "% of each run's schedule" in [t.all_text() for t in loss.iter("text")]
    for g in (g for g in loss.iter("g") if "curve" in g.classes()):
        assert polyline_points(loss, g.attrs["class"].split()[1])[-1][0] == pytest.approx(x_of(loss, 100), abs=0.01)


def test_ranking_lists_a_run_that_could_not_be_compared_last_with_its_reason(tmp_path, capsys):
    short = tmp_path / "short.jsonl"
    short.write_text('{"step": 1, "loss": 3.0}\n{"step": 2, "loss": 2.0}\n', encoding="utf-8")
    code, page = cli_page(tmp_path, "compare", "fixtures/hf_runs/healthy", str(short), "fixtures/hf_runs/lr_zero",
                          "fixtures/hf_runs/healthy/checkpoint-100")
    capsys.readouterr()
    assert code == 1  # lr_zero FAILs
    (table,) = [t for t in parse(page).iter("table") if "ranking" in t.classes()]
    assert table_rows(table, "thead") == [["#", "verdict", "run", "end ratio", "floor ratio", "loss change",
                                           "baseline's loss change", "eval best ratio", "eval end ratio",
                                           "FAIL/WARN findings"]]
    rows = table_rows(table)
    assert [r[:2] for r in rows] == [["1", "PASS"], ["2", "FAIL"], ["–", "NOT-CHECKED"]]
    assert rows[2][2:] == [str(short), "cannot compare with baseline fixtures/hf_runs/healthy/trainer_state.json: "
                           "the run has 2 finite loss point(s); a comparison needs at least 6"]


def test_comparison_section_is_a_table_and_a_sentence(tmp_path, capsys):
    code, page = cli_page(tmp_path, "compare", "fixtures/hf_runs/healthy", "fixtures/hf_runs/lr_zero")
    capsys.readouterr()
    assert code == 1
    (section,) = parse(page).find_all("section", data_path="fixtures/hf_runs/lr_zero/trainer_state.json")
    (div,) = [d for d in section.iter("div") if "comparison" in d.classes()]
    (prose,) = list(div.iter("p"))
    assert prose.all_text() == ("The run was compared with the baseline over steps 1-100, the steps both logs "
                                "cover. Compared over steps 1-100 only: the baseline's loss goes on to step 200.")
    (table,) = list(div.iter("table"))
    assert table_rows(table, "thead") == [["", "run", "baseline", "run / baseline"]]
    assert table_rows(table) == [
        ["loss level at the start of the span", "4.171", "4.16", "1.00x"],
        ["loss level at the end of the span", "4.172", "1.358", "3.07x"],
        ["lowest loss level (floor)", "4.17", "1.358", "3.07x"],
        ["loss change over the span", "+0.1%", "-67.4%", "–"],
        ["last logged step", "100", "200", "–"],
        ["verdict judged alone", "FAIL", "PASS", "–"],
    ]
    assert "baseline_end_level" not in div.all_text() and "_" not in div.all_text()  # no key/value dump
    # the note keeps its capitals; a number no row names is still shown, by its words
    from trainproof_lsp.output.html import _comparison_html

    other = parse(_comparison_html({"axis": "fraction", "common_from": 0.02, "common_to": 1.0, "compared_segment": 3,
                                    "common_note": "the run's loss is NaN from step 710 on"}))
    assert next(other.iter("p")).all_text() == (
        "The run was compared with the baseline over 2%-100% of each run's schedule (their schedules differ). "
        "The run's loss is NaN from step 710 on.")
    assert table_rows(next(other.iter("table"))) == [["compared segment", "3"]]


def test_marker_labels_never_overlap_on_real_pages(tmp_path, capsys):
    pages = [doctor_page(DIVERGES), doctor_page(Path("fixtures/hf_runs/nan_loss")),
             cli_page(tmp_path, "compare", "fixtures/hf_runs/healthy", "fixtures/hf_runs/lr_zero",
                      "fixtures/hf_runs/lr_hot_diverges")[1]]
    capsys.readouterr()
    crowded = 0
    for page in pages:
        for svg in parse(page).iter("svg"):
            boxes = label_boxes(svg)
            assert overlapping(boxes) == [], svg.attrs["data-series"]
            width = float(svg.attrs["viewbox"].split()[2])
            assert all(0 <= b[0] and b[2] <= width and b[1] >= 0 for b in boxes)
            crowded += len(boxes) >= 5
    assert crowded >= 2  # the test met charts with many labels


def test_marker_labels_never_overlap_however_crowded():
    import random

    from trainproof_lsp.core.model import Level, Series
    from trainproof_lsp.output.html import _Line, _Mark, chart_svg

    rng = random.Random(6)
    rules = ["TP-DIVERGE", "TP-LOSS-SPIKE-UNRECOVERED", "TP-FLOOR-RATIO", "TP-DEAD-RUN", "TP-AT-CHANCE"]
    roles = ["", "best", "end", "related", "baseline floor", "first/last"]
    for trial in range(60):
        n = rng.choice([5, 50, 5000])
        s = Series("loss", "loss", range(1, n + 1), [rng.uniform(1, 5) for _ in range(n)], range(n))
        marks = [_Mark(rule=rng.choice(rules), level=Level.FAIL, step=rng.choice([1, n, rng.randint(1, n)]),
                       role=rng.choice(roles), on_baseline=False, message="m") for _ in range(rng.randint(1, 25))]
        svg = next(parse(chart_svg("c", "loss", [_Line(label="run", series=s, css="run")], marks)).iter("svg"))
        boxes = label_boxes(svg)
        assert len(boxes) == len(marks)
        assert overlapping(boxes) == [], trial
        assert all(0 <= b[0] and b[2] <= 560 and b[1] >= 0 for b in boxes), trial
        plot_top = float(svg.attrs["data-y-range"].split()[1])
        assert max(b[3] for b in boxes) <= plot_top  # labels sit above the plot


if __name__ == "__main__" and "--update" in sys.argv:
    sys.path.insert(0, str(ROOT))
    GOLDEN.write_text(doctor_page(DIVERGES), encoding="utf-8")
    print("wrote", GOLDEN)
