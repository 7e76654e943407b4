"""The shape of a log: appended runs split and judged one by one, a step logged twice,
every loss read under the names people give it (and a setting for the rest), eval losses
judged, and a run that turns NaN compared against a healthy baseline.

Every log is written here (small generators); positions are found in the file text.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from conftest import falling, ids, judge, line_with, none_of, only, ran, write_jsonl
from trainproof_lsp.judge import compare
from trainproof_lsp.output import render
from trainproof_lsp.cli import main
from trainproof_lsp.core.config import Config, ConfigError
from trainproof_lsp.judge.settings import load_file
from trainproof_lsp.judge.engine import _judge_one
from trainproof_lsp.core.model import EVAL_LOSS, LOSS, Level, Verdict
from trainproof_lsp.readers.metrics import map_columns, read_metrics_csv
from trainproof_lsp.readers.trainer_state import read_trainer_state
from trainproof_lsp.output.html import to_html

NAN = math.nan


# --- appended runs -----------------------------------------------------------------------

def appended_csv(folder: Path, lengths: tuple[int, ...] = (12, 10, 14), nan_in: int | None = None) -> Path:
    """A Keras CSVLogger(append=True) file: the script ran len(lengths) times, each run
    logging epochs 0..n-1; run `nan_in` (1-based) turns NaN from its 5th epoch."""
    starts = ((2.0, 0.8), (2.2, 0.9), (1.9, 0.7), (2.1, 0.75))
    lines = ["epoch,loss,val_loss,learning_rate"]
    for k, (n, (a, b)) in enumerate(zip(lengths, starts), 1):
        for e, v in enumerate(falling(n, a, b)):
            loss = "nan" if nan_in == k and e >= 4 else f"{v}"
            lines.append(f"{e},{loss},{round(v * 1.1, 6)},0.001")
    path = folder / "training_log.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_three_appended_runs_are_judged_one_by_one_with_their_lines_named(tmp_path):
    path = appended_csv(tmp_path)
    report = judge(path)
    assert report.verdict is Verdict.PASS
    got = [(g.index, g.first_line, g.last_line, g.first_step, g.last_step, g.points, g.verdict)
           for g in report.segments]
    # Header on line 0; run 1 on lines 1-12, run 2 on 13-22, run 3 on 23-36 (0-based).
    assert got == [(1, 1, 12, 0, 11, 12, Verdict.PASS), (2, 13, 22, 0, 9, 10, Verdict.PASS),
                   (3, 23, 36, 0, 13, 14, Verdict.PASS)]
    # Each run's trend checks ran on that run alone (10+ points each).
    for g in report.segments:
        assert {"TP-DIVERGE", "TP-DEAD-RUN", "TP-LOSS-SPIKE"} <= {c.group for c in g.checks if c.ran}
    assert ran(report, "TP-DIVERGE") and ran(report, "TP-DEAD-RUN")
    # Only the seams are reported (INFO), each at the first line of the run it starts.
    assert ids(report) == ["TP-APPENDED-RUNS", "TP-APPENDED-RUNS"]
    second, third = report.findings
    assert second.level is Level.INFO
    assert second.location.span.start_line == 13 and second.related[0].location.span.start_line == 12
    assert second.evidence == {"segment": 2, "segments": 3, "first_step": 0, "last_step": 9, "previous_step": 11,
                               "points": 10}
    assert second.message == ("run 2 of 3 in this log starts here (lines 14-23, steps 0-9, 10 loss points): "
                              "the step goes back from 11 to 0; judged on its own")
    assert third.location.span.start_line == 23 and third.evidence["previous_step"] == 9
    # Read as one curve, the seams would look like a spike and a rewind.
    as_one = _judge_one(read_metrics_csv(path), Config())
    assert {"TP-LOSS-SPIKE", "TP-STEP-ORDER"} <= set(ids(as_one))


def test_no_finding_spans_a_seam_and_each_names_its_run(tmp_path):
    path = appended_csv(tmp_path, nan_in=2)
    report = judge(path)
    assert report.verdict is Verdict.FAIL
    assert [g.verdict for g in report.segments] == [Verdict.PASS, Verdict.FAIL, Verdict.PASS]
    nan = only(report, "TP-NAN")
    # Run 2's fifth epoch (step 4) is file line 13 + 4 = 17; 6 of its 10 points are NaN.
    assert nan.location.span.start_line == 17
    assert nan.evidence == {"first_step": 4, "count": 6, "points": 10, "segment": 2}
    assert nan.message == ("loss is nan at step 4; 6 of 10 logged losses are not finite (limit 0) "
                           "[run 2 of 3 in this log: lines 14-23, steps 0-9]")
    assert report.segments[1].findings == ("TP-NAN", "TP-APPENDED-RUNS")
    for f in report.findings:  # every finding's line lies inside its own run
        g = report.segments[f.evidence["segment"] - 1]
        assert g.first_line <= f.location.span.start_line <= g.last_line


def test_appended_runs_in_json_and_text(tmp_path):
    path = appended_csv(tmp_path)
    doc = json.loads(render.to_json(compare.engine.doctor([path], Config())))
    segments = doc["reports"][0]["segments"]
    assert [(s["index"], s["first_line"], s["last_line"], s["verdict"]) for s in segments] == [
        (1, 1, 12, "PASS"), (2, 13, 22, "PASS"), (3, 23, 36, "PASS")]
    assert "TP-DIVERGE" in segments[0]["checks"]["ran"]
    text = render.to_text(compare.engine.doctor([path], Config()))
    assert "   run 2 of 3: lines 14-23, steps 0-9, 10 points: PASS" in text.splitlines()


def test_a_step_logged_twice_is_one_run(tmp_path):
    # A resume that logs the step it resumed at once more (what 8 epochs of a JSONL
    # logger reopened after a crash look like): one run, no seam, no step-order warning.
    steps = [50 * (i + 1) for i in range(40)]
    steps.insert(25, steps[24])
    losses = falling(len(steps), 7.0, 2.2)
    path = write_jsonl(tmp_path, [{"step": s, "loss": v, "lr": 1e-4} for s, v in zip(steps, losses)])
    report = judge(path)
    assert report.segments == ()
    assert ran(report, "TP-STEP-ORDER")
    none_of(report, "TP-STEP-ORDER")
    assert report.verdict is Verdict.PASS


def test_a_column_with_every_step_written_twice_still_warns(tmp_path):
    steps = [s for i in range(20) for s in (10 * (i + 1),) * 2]
    path = write_jsonl(tmp_path, [{"step": s, "loss": v} for s, v in zip(steps, falling(40))])
    f = only(judge(path), "TP-STEP-ORDER")
    assert f.evidence == {"step": 10, "repeats": 20, "points": 40}
    assert f.location.span.start_line == 1


# --- names people give their losses ----------------------------------------------------------

@pytest.mark.parametrize("train, val", [
    ("loss", "val_loss"), ("train_loss", "ValLoss"), ("TrainLoss", "Validation Loss"),
    ("Train Loss", "eval/loss"), ("train-loss", "Val Loss"), ("Loss/train", "Loss/valid"),
    ("training_loss", "EvalLoss"), ("Training Loss", "test_loss"),
])
def test_csv_and_jsonl_columns_are_matched_as_people_write_them(tmp_path, train, val):
    losses = falling(20)
    rows = [{"Step": 10 * (i + 1), train: v, **({val: round(2.5 - 0.05 * i, 4)} if i % 4 == 3 else {})}
            for i, v in enumerate(losses)]
    jsonl = write_jsonl(tmp_path, rows)
    csv = tmp_path / "metrics.csv"
    csv.write_text(f'Step,"{train}","{val}"\n' + "".join(
        f"{r['Step']},{r[train]},{r.get(val, '')}\n" for r in rows), encoding="utf-8")
    for path in (jsonl, csv):
        report = judge(path)
        assert report.verdict is Verdict.PASS, [(f.id, f.message) for f in report.findings]
        assert ran(report, "TP-DIVERGE") and ran(report, "TP-NAN-EVAL") and ran(report, "TP-OVERFIT")
    chosen, step = map_columns(["Step", train, val])
    assert (chosen, step) == ({LOSS: train, EVAL_LOSS: val}, "Step")


def test_a_loss_named_by_shape_is_read_only_when_one_column_has_that_shape():
    assert map_columns(["iter", "train_nll_loss", "val_nll_loss"])[0] == {LOSS: "train_nll_loss",
                                                                          EVAL_LOSS: "val_nll_loss"}
    # Two candidates: no guess between them (each is read as a named part of a loss, never
    # as the loss itself).
    assert map_columns(["iter", "train_kl_loss", "train_rec_loss"])[0] == {
        "loss_part:train_kl_loss": "train_kl_loss", "loss_part:train_rec_loss": "train_rec_loss"}


def test_an_unmappable_log_names_its_columns_and_the_setting(tmp_path):
    rows = [{"it": 10 * (i + 1), "MyObjective": v, "acc": 0.5} for i, v in enumerate(falling(20))]
    path = write_jsonl(tmp_path, rows)
    report = judge(path)
    assert report.verdict is Verdict.NOT_CHECKED
    assert ids(report) == ["TP-NOT-CHECKED"]
    assert report.reason == (f"{path}: no loss column to judge (columns seen: MyObjective, acc, it); map one with "
                             '`[tool.trainproof] columns = {loss = "NAME"}` (or eval_loss = ...) or '
                             "`--column loss=NAME`")
    # The setting, from a config file...
    (tmp_path / "pyproject.toml").write_text('[tool.trainproof]\ncolumns = {loss = "MyObjective", step = "it"}\n',
                                             encoding="utf-8")
    config = load_file(tmp_path / "pyproject.toml")
    assert config.columns == {"loss": "MyObjective", "step": "it"}
    mapped = judge(path, config)
    assert mapped.verdict is Verdict.PASS and ran(mapped, "TP-DIVERGE")
    # ...and from the command line (exit 0: judged and healthy; 2 without the mapping).
    assert main(["epoch", str(path)]) == 0  # the pyproject.toml beside it maps it
    (tmp_path / "pyproject.toml").unlink()
    assert main(["epoch", str(path)]) == 2
    assert main(["epoch", str(path), "--column", "loss=MyObjective", "--column", "step=it"]) == 0


def test_a_bad_columns_setting_is_a_configuration_error(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.trainproof]\ncolumns = {losss = "X"}\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="unknown series 'losss'"):
        load_file(tmp_path / "pyproject.toml")
    assert main(["epoch", str(tmp_path / "x.jsonl"), "--column", "loss"]) == 2


def test_trainer_state_reads_an_eval_set_named_by_the_user(tmp_path):
    history = []
    for i, v in enumerate(falling(20)):
        history.append({"step": 10 * (i + 1), "loss": v, "learning_rate": 1e-4})
        if i % 5 == 4:
            history.append({"step": 10 * (i + 1), "eval_validation_loss": NAN if i == 19 else 2.0 - 0.1 * i})
    history.append({"step": 200, "train_loss": 1.5, "train_runtime": 10.0})
    path = tmp_path / "trainer_state.json"
    path.write_text(json.dumps({"log_history": history, "max_steps": 200}, indent=2), encoding="utf-8")
    run = read_trainer_state(path)
    assert run.series[EVAL_LOSS].source_name == "eval_validation_loss"
    assert len(run.series[LOSS]) == 20  # the summary's train_loss is not a point
    report = judge(path)
    f = only(report, "TP-NAN-EVAL")
    assert f.evidence == {"first_step": 200, "count": 1, "points": 4}
    span = f.location.span
    entry = "\n".join(path.read_text().splitlines()[span.start_line:span.end_line + 1])
    assert '"eval_validation_loss": NaN' in entry and '"step": 200' in entry


def test_a_trainer_state_with_only_its_summary_is_not_judged(tmp_path):
    path = tmp_path / "trainer_state.json"
    path.write_text(json.dumps({"log_history": [{"step": 500, "train_loss": 2.3, "train_runtime": 99.0}]},
                               indent=2), encoding="utf-8")
    report = judge(path)
    assert report.verdict is Verdict.NOT_CHECKED
    assert "keys seen: train_loss, train_runtime" in report.reason and "columns = {loss" in report.reason


# --- eval losses judged ------------------------------------------------------------------------

def test_a_nan_validation_loss_fails_a_run_whose_train_loss_is_healthy(tmp_path):
    path = tmp_path / "metrics.csv"
    losses = falling(30)
    path.write_text("epoch,loss,val_loss\n" + "".join(
        f"{i},{v},{'nan' if i >= 25 else round(v * 1.2, 6)}\n" for i, v in enumerate(losses)), encoding="utf-8")
    report = judge(path)
    assert report.verdict is Verdict.FAIL
    assert ids(report) == ["TP-NAN-EVAL"]
    f = report.findings[0]
    assert f.location.span.start_line == line_with(path, f"25,{losses[25]},nan") == 26
    assert f.evidence == {"first_step": 25, "count": 5, "points": 30}


def test_a_log_with_only_validation_losses_is_judged_on_them(tmp_path):
    healthy = write_jsonl(tmp_path, [{"epoch": i, "val_loss": v} for i, v in enumerate(falling(15))])
    report = judge(healthy)
    assert report.verdict is Verdict.PASS
    for rule in ("TP-DIVERGE", "TP-DEAD-RUN", "TP-FLAT", "TP-NAN-EVAL"):
        assert ran(report, rule), rule
    assert any(c.group == "TP-NAN" and not c.ran and "TP-NAN-EVAL judges" in c.reason for c in report.checks)
    # Diverging validation loss: found, and the finding says it judged the eval series.
    values = [3.0 - 0.2 * i for i in range(8)] + [1.6 + 0.5 * i for i in range(8)]
    (tmp_path / "d").mkdir()
    bad = write_jsonl(tmp_path / "d", [{"epoch": i, "ValLoss": round(v, 4)} for i, v in enumerate(values)])
    report = judge(bad)
    assert report.verdict is Verdict.FAIL
    f = only(report, "TP-DIVERGE")
    assert f.message.startswith("eval loss (ValLoss; the log has no train loss): ")
    assert f.evidence["series"] == EVAL_LOSS
    assert f.location.span.start_line == 15


# --- compare never hides a dead run -------------------------------------------------------------

def _curve(steps: list[int]) -> list[float]:
    return [round((1.0 + 2.0 * math.exp(-s / 150)) * (1 + 0.02 * ((s * 7) % 5 - 2)), 6) for s in steps]


def _nan_tail_pair(tmp_path: Path) -> tuple[Path, Path]:
    steps = list(range(10, 1001, 10))
    (tmp_path / "healthy").mkdir()
    base = write_jsonl(tmp_path / "healthy", [{"step": s, "loss": v} for s, v in zip(steps, _curve(steps))])
    (tmp_path / "dies").mkdir()
    run = write_jsonl(tmp_path / "dies", [{"step": s, "loss": v if s <= 700 else NAN}
                                          for s, v in zip(steps, _curve(steps))])
    return base, run


def test_a_run_that_turns_nan_fails_against_a_healthy_baseline(tmp_path, capsys):
    base, run = _nan_tail_pair(tmp_path)
    outcome = compare.compare(base, [run], Config())
    (r,) = outcome.reports
    assert r.verdict is Verdict.FAIL
    nan = only(r, "TP-NAN")
    assert nan.evidence == {"first_step": 710, "count": 30, "points": 100}
    assert nan.location.span.start_line == 70
    c = r.comparison
    assert (c["common_from"], c["common_to"], c["run_last_step"], c["baseline_last_step"]) == (10, 700, 1000, 1000)
    assert c["run_verdict"] == "FAIL" and c["end_ratio"] == 1.0
    note = ("compared over steps 10-700 only: the run's loss goes on to step 1000 but is not finite from step "
            "710 on; the baseline's loss goes on to step 1000")
    assert c["common_note"] == note
    text = render.to_text(outcome)
    assert f"   {note}" in text.splitlines()
    ranking = text.splitlines()[-2:]
    assert ranking[0].split()[:3] == ["1", "FAIL", "1.00x"] and ranking[0].endswith("TP-NAN")
    assert ranking[1].strip() == f"^ {note}"
    html = to_html(outcome, {})
    assert note.replace("'", "&#x27;") in html
    assert main(["compare", str(base), str(run)]) == 1
    assert main(["compare", str(base), str(base)]) == 0


def test_a_healthy_run_of_the_same_length_has_no_common_span_note(tmp_path):
    base, _ = _nan_tail_pair(tmp_path)
    (tmp_path / "twin").mkdir()
    steps = list(range(10, 1001, 10))
    twin = write_jsonl(tmp_path / "twin", [{"step": s, "loss": v} for s, v in zip(steps, _curve(steps))])
    (r,) = compare.compare(base, [twin], Config()).reports
    assert r.verdict is Verdict.PASS and r.comparison["common_note"] is None


def test_watch_reads_columns_through_the_same_setting(tmp_path):
    import io

    from trainproof_lsp.judge.engine import judge_file
    from trainproof_lsp.guardian.watch import Watch, WatchOptions
    from trainproof_lsp.output.render import report_json

    rows = [{"it": 10 * (i + 1), "MyObjective": v} for i, v in enumerate(falling(30))]
    log = write_jsonl(tmp_path, rows)
    config = Config(columns={"loss": "MyObjective", "step": "it"})
    out = io.StringIO()
    w = Watch(log, config, WatchOptions(), out=out, err=out)
    w.poll_once()
    report = w.logs[str(log)].report
    assert report.verdict is Verdict.PASS and ran(report, "TP-DIVERGE")
    assert report_json(report) == report_json(judge_file(log, config))


def test_the_html_page_lists_each_appended_run(tmp_path):
    path = appended_csv(tmp_path, nan_in=2)
    outcome = compare.engine.doctor([path], Config())
    html = to_html(outcome, {})
    assert "3 runs appended in this log, each judged on its own" in html
    assert '<tr data-segment="2"><td>2</td><td class="mono">14-23</td><td class="mono">0-9</td><td>10</td>' in html


def test_a_log_of_appended_runs_compares_its_latest_run(tmp_path):
    path = appended_csv(tmp_path, nan_in=1)
    (tmp_path / "base").mkdir()
    base = write_jsonl(tmp_path / "base", [{"step": e, "loss": v} for e, v in enumerate(falling(14, 1.9, 0.7))])
    (r,) = compare.compare(base, [path], Config()).reports
    c = r.comparison
    assert c["compared_segment"] == 3
    assert (c["axis"], c["common_from"], c["common_to"]) == ("step", 0, 13)
    assert c["end_ratio"] == 1.0  # run 3 is the baseline's curve
    assert c["common_note"] == "this log holds 3 appended runs: the latest, run 3 (from line 24), is compared"
    # Run 1's NaN (a FAIL of the log judged alone) is kept.
    assert r.verdict is Verdict.FAIL and only(r, "TP-NAN").evidence["segment"] == 1


def test_an_mlflow_run_without_a_loss_metric_names_its_metrics_and_the_setting(tmp_path):
    run = tmp_path / "mlruns" / "0" / "abc"
    (run / "metrics").mkdir(parents=True)
    (run / "meta.yaml").write_text("run_id: abc\n", encoding="utf-8")
    (run / "metrics" / "objective").write_text("".join(f"1700000000000 {v} {10 * (i + 1)}\n"
                                                       for i, v in enumerate(falling(20))), encoding="utf-8")
    (run / "metrics" / "lr").write_text("1700000000000 0.001 10\n", encoding="utf-8")
    (report,) = compare.engine.doctor([run], Config()).reports
    assert report.verdict is Verdict.NOT_CHECKED
    assert report.reason == (f"{run}: no loss metric to judge (metrics seen: lr, objective); map one with "
                             '`[tool.trainproof] columns = {loss = "NAME"}` (or eval_loss = ...) or '
                             "`--column loss=NAME`")
    (mapped,) = compare.engine.doctor([run], Config(columns={"loss": "objective"})).reports
    assert mapped.verdict is Verdict.PASS and ran(mapped, "TP-DIVERGE")


def test_the_editor_setting_takes_series_equals_column_strings():
    from trainproof_lsp.core.config import with_columns
    from trainproof_lsp.server.settings import parse_settings

    settings, problems = parse_settings({"trainproof": {"columns": ["loss=MyObjective", "step = it"]}})
    assert problems == [] and settings.columns == ("loss=MyObjective", "step = it")
    config = with_columns(Config(columns={"eval_loss": "Dev"}), settings.columns, "trainproof.columns")
    assert config.columns == {"eval_loss": "Dev", "loss": "MyObjective", "step": "it"}
    with pytest.raises(ConfigError, match="trainproof.columns: 'loss' is not SERIES=COLUMN"):
        with_columns(Config(), ["loss"], "trainproof.columns")


def test_a_plain_loss_tag_under_validation_is_the_eval_loss(tmp_path):
    tbx = pytest.importorskip("tensorboardX")
    logdir = tmp_path / "logs"
    for split, curve in (("train", lambda e: 2.0 / (e + 1)), ("validation", lambda e: NAN if e == 9 else 1.5 - 0.05 * e)):
        w = tbx.SummaryWriter(str(logdir / split))
        for epoch in range(12):
            w.add_scalar("Loss", curve(epoch), epoch, walltime=1000.0 + epoch)
        w.close()
    (report,) = compare.engine.doctor([logdir], Config()).reports
    # Train and validation stay two series: the NaN validation loss fails the run, the
    # train loss is not mixed with it.
    assert [f.id for f in report.findings if f.level is not Level.INFO] == ["TP-NAN-EVAL"]
    f = only(report, "TP-NAN-EVAL")
    assert f.evidence == {"first_step": 9, "count": 1, "points": 12}
    assert f.location.path.startswith(str(logdir / "validation"))


def test_a_long_format_log_reads_the_eval_rows_as_the_eval_loss(tmp_path):
    import io

    from trainproof_lsp.judge.engine import judge_file
    from trainproof_lsp.guardian.watch import Watch, WatchOptions
    from trainproof_lsp.output.render import report_json

    path = tmp_path / "history.csv"
    lines = ["epoch,Phase,loss,acc"]
    for e, v in enumerate(falling(15)):
        lines.append(f"{e},train,{v},0.5")
        lines.append(f"{e},val,{'nan' if e >= 12 else round(v * 1.1, 6)},0.5")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    report = judge(path)
    none_of(report, "TP-STEP-ORDER")  # train and val rows are two series, not repeated steps
    f = only(report, "TP-NAN-EVAL")
    assert f.level is Level.FAIL and report.verdict is Verdict.FAIL
    assert f.evidence == {"first_step": 12, "count": 3, "points": 15}
    assert f.location.span.start_line == line_with(path, "12,val,nan") == 26
    assert f.message.startswith("eval loss (loss (Phase val)) is nan at step 12")
    out = io.StringIO()
    w = Watch(path, Config(), WatchOptions(), out=out, err=out)
    w.poll_once()
    assert report_json(w.logs[str(path)].report) == report_json(judge_file(path, Config()))
