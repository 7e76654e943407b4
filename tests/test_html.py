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
    assert "ranking against baseline" in overview.all_text()


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


if __name__ == "__main__" and "--update" in sys.argv:
    sys.path.insert(0, str(ROOT))
    GOLDEN.write_text(doctor_page(DIVERGES), encoding="utf-8")
    print("wrote", GOLDEN)
