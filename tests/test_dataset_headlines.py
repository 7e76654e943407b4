"""Dataset-wide problems get one headline finding per file: the share of rows that repeat an
earlier row (TP-PRE-DUPLICATE-SHARE WARN / TP-PRE-MOSTLY-DUPLICATES FAIL) and the share of
eval rows found in the training data (TP-PRE-EVAL-OVERLAP-SHARE WARN /
TP-PRE-EVAL-CONTAMINATED FAIL) — on each side of each limit, the same with --jobs 2 and on
a Dask cluster, and in `doctor` on a folder whose eval file pairs with a train file by name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainproof_lsp.cli import main
from trainproof_lsp.core.config import Config
from trainproof_lsp.core.model import Level, Verdict
from trainproof_lsp.judge import engine, parallel
from trainproof_lsp.judge import preflight as pre
from trainproof_lsp.judge.dataset_pairs import pair_datasets, split_of
from trainproof_lsp.output import render
from trainproof_lsp.rules.dataset import share_text

SHARE, MOSTLY = "TP-PRE-DUPLICATE-SHARE", "TP-PRE-MOSTLY-DUPLICATES"
EVAL_SHARE, CONTAMINATED = "TP-PRE-EVAL-OVERLAP-SHARE", "TP-PRE-EVAL-CONTAMINATED"
HEADLINES = (SHARE, MOSTLY, EVAL_SHARE, CONTAMINATED)
SKIP = ("judged on an eval file only, against its training files (preflight --eval EVAL, or doctor on a folder "
        "where an eval/valid/test file pairs with a train file by name)")


def _row(i: int, what: str = "row") -> str:
    return json.dumps({"text": f"{what} number {i:05d} of the set"})


def _write(path: Path, rows: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(rows) + "\n")
    return path


def _with_repeats(rows: int, repeats: int) -> list[str]:
    """`rows` rows of which the last `repeats` repeat the first ones (row k repeats row
    k - (rows - repeats))."""
    distinct = rows - repeats
    return [_row(i % distinct) for i in range(rows)]


def _headlines(report) -> list[tuple[str, str, int, dict]]:
    return [(f.id, f.level.value, f.location.span.start_line, dict(f.evidence))
            for f in report.findings if f.id in HEADLINES]


# --- the share of repeated rows ------------------------------------------------------------

@pytest.mark.parametrize("rows,repeats,expected", [
    (100, 9, None),           # 9%: below TP-PRE-DUPLICATE-SHARE's 10%
    (100, 10, (SHARE, "WARN")),   # 10%: at it
    (100, 49, (SHARE, "WARN")),   # 49%: below TP-PRE-MOSTLY-DUPLICATES' half
    (100, 50, (MOSTLY, "FAIL")),  # half: the file written twice; the WARN stands down
    (19, 10, None),           # 53% of 19 rows: fewer than min_rows (20)
    (20, 10, (MOSTLY, "FAIL")),   # half of 20 rows
])
def test_the_duplicate_share_on_each_side_of_each_limit(tmp_path, rows, repeats, expected):
    r = pre.judge_dataset(_write(tmp_path / "d.jsonl", _with_repeats(rows, repeats)), Config())
    first = rows - repeats  # 0-based line of the first repeat; it repeats line 0
    got = _headlines(r)
    if expected is None:
        assert got == []
        assert r.verdict is Verdict.WARN  # the per-row findings stay
    else:
        assert got == [(*expected, first, {"line": first + 1, "first_line": 1, "count": repeats, "total": rows,
                                           "share": repeats / rows, "exact": repeats, "near": 0,
                                           "distinct": rows - repeats})]
        assert r.verdict.value == expected[1]
    assert [f.location.span.start_line for f in r.findings if f.id == "TP-PRE-DUPLICATE-TEXT"] == \
        list(range(first, rows))


def test_the_issue_case_reads_as_one_line_with_the_numbers(tmp_path):
    """947 of 1,095 rows repeated: one FAIL, worded with the share, the count and the limit."""
    r = pre.judge_dataset(_write(tmp_path / "d.jsonl", _with_repeats(1095, 947)), Config())
    [head] = [f for f in r.findings if f.id in HEADLINES]
    assert head.id == MOSTLY and head.level is Level.FAIL and r.verdict is Verdict.FAIL
    assert head.message == ("86% of rows repeat an earlier row of this file: 947 of 1,095, the first at line 149; "
                            "148 distinct rows; limit 50%")
    assert head.location.span.start_line == 148
    assert [(x.location.span.start_line, x.message) for x in head.related] == [(0, "the row it repeats")]
    assert head.limits == {"min_share": 0.5, "min_rows": 20}
    assert len([f for f in r.findings if f.id == "TP-PRE-DUPLICATE-TEXT"]) == 947


def test_near_repeats_count_and_are_named_apart(tmp_path):
    rows = [_row(i) for i in range(20)]
    rows[10] = rows[1]                                                   # exact
    rows[12] = rows[2].upper().replace('"TEXT"', '"text"')               # up to case
    r = pre.judge_dataset(_write(tmp_path / "d.jsonl", rows), Config())
    [(rule, level, line, ev)] = _headlines(r)
    assert (rule, level, line) == (SHARE, "WARN", 10)
    assert ev == {"line": 11, "first_line": 2, "count": 2, "total": 20, "share": 0.1, "exact": 1, "near": 1,
                  "distinct": 18}
    [head] = [f for f in r.findings if f.id == SHARE]
    assert head.message == ("10% of rows repeat an earlier row of this file: 2 of 20 (1 of them up to letter case or "
                            "whitespace), the first at line 11; 18 distinct rows; limit 10%")


def test_the_limits_are_configurable_and_a_disabled_fail_leaves_the_warn(tmp_path):
    path = _write(tmp_path / "d.jsonl", _with_repeats(100, 60))
    raised = Config(limits={MOSTLY: {"min_share": 0.7}})
    assert [h[:2] for h in _headlines(pre.judge_dataset(path, raised))] == [(SHARE, "WARN")]
    off = Config(ignore=frozenset({MOSTLY}))
    r = pre.judge_dataset(path, off)
    assert [h[:2] for h in _headlines(r)] == [(SHARE, "WARN")] and r.verdict is Verdict.WARN
    lowered = Config(limits={SHARE: {"min_share": 0.7}, MOSTLY: {"min_share": 0.9}})
    assert _headlines(pre.judge_dataset(path, lowered)) == []


def test_a_share_never_prints_as_its_limit_or_as_all_when_it_is_not():
    assert share_text(0.5, 0.5) == ("50%", "50%")
    assert share_text(0.503, 0.5) == ("50.3%", "50%")
    assert share_text(0.5004, 0.5) == ("50.04%", "50%")
    assert share_text(999 / 1000, 0.5) == ("99.9%", "50%")
    assert share_text(1.0, 0.5) == ("100%", "50%")
    assert share_text(0.86484, 0.5) == ("86%", "50%")
    assert share_text(0.3, 0.125) == ("30%", "12.5%")


# --- the share of eval rows in the training data --------------------------------------------

def _eval_case(tmp_path: Path, eval_rows: int, in_train: int) -> tuple[Path, Path]:
    train = _write(tmp_path / "train.jsonl", [_row(i) for i in range(400)])
    ev = [_row(i, "held-out") for i in range(eval_rows)]
    for k in range(in_train):
        ev[k] = _row(7 * k)  # eval line k is train line 7k
    return train, _write(tmp_path / "eval.jsonl", ev)


@pytest.mark.parametrize("eval_rows,in_train,expected", [
    (21, 1, None),                    # 4.8%: below TP-PRE-EVAL-OVERLAP-SHARE's 5%
    (20, 1, (EVAL_SHARE, "WARN")),    # 5%: at it
    (100, 49, (EVAL_SHARE, "WARN")),  # 49%: below TP-PRE-EVAL-CONTAMINATED's half
    (100, 50, (CONTAMINATED, "FAIL")),
    (10, 10, (CONTAMINATED, "FAIL")),  # the whole eval file
])
def test_the_eval_share_on_each_side_of_each_limit(tmp_path, eval_rows, in_train, expected):
    train, ev = _eval_case(tmp_path, eval_rows, in_train)
    out = pre.preflight([train], Config(), eval_path=ev)
    t, e = out.reports
    assert _headlines(t) == [] and t.verdict is Verdict.PASS
    overlap = [f.location.span.start_line for f in e.findings if f.id == "TP-PRE-EVAL-OVERLAP"]
    assert len(overlap) == in_train
    got = _headlines(e)
    if expected is None:
        assert got == [] and e.verdict is Verdict.WARN
        return
    [f] = [f for f in e.findings if f.id in HEADLINES]
    first = overlap[0]
    train_line = next(r.location.span.start_line for x in e.findings if x.id == "TP-PRE-EVAL-OVERLAP"
                      and x.location.span.start_line == first for r in x.related)
    assert got == [(*expected, first, {"line": first + 1, "train_line": train_line + 1, "count": in_train,
                                       "total": eval_rows, "share": in_train / eval_rows, "exact": in_train,
                                       "near": 0})]
    assert [(r.location.path, r.location.span.start_line) for r in f.related] == [(str(train), train_line)]
    assert e.verdict.value == expected[1]


def test_ten_of_ten_eval_rows_in_train_fail_with_one_headline(tmp_path, capsys):
    train, ev = _eval_case(tmp_path, 10, 10)
    assert main(["preflight", str(train), "--eval", str(ev)]) == 1
    out = capsys.readouterr().out.splitlines()
    heads = [line for line in out if any(h in line for h in HEADLINES)]
    assert heads == [f"{ev}:1:1: FAIL {CONTAMINATED} 10 of 10 eval rows (100%) are in the training data, the first "
                     f"at line 1 ({train}:1); limit 50%"]
    assert len([line for line in out if "WARN TP-PRE-EVAL-OVERLAP " in line]) == 10


def test_without_training_files_the_eval_shares_are_skipped_with_the_reason(tmp_path):
    r = pre.judge_dataset(_write(tmp_path / "eval.jsonl", [_row(1)] * 30), Config())
    skipped = {c.group: c.reason for c in r.checks if not c.ran}
    assert {k: skipped[k] for k in ("TP-PRE-EVAL-OVERLAP", EVAL_SHARE, CONTAMINATED)} == \
        {"TP-PRE-EVAL-OVERLAP": SKIP, EVAL_SHARE: SKIP, CONTAMINATED: SKIP}
    assert [h[:3] for h in _headlines(r)] == [(MOSTLY, "FAIL", 1)]


# --- the same with --jobs 2 and on a cluster ----------------------------------------------

def _shards(tmp_path: Path) -> tuple[list[Path], Path]:
    """Three shards: one mostly repeats (FAIL), one a fifth (WARN), one clean; an eval file
    half in the training data, its copies in two shards."""
    a = _with_repeats(120, 70)                                   # 58%
    b = [_row(1000 + i) for i in range(100)]
    for k in range(20):
        b[50 + k] = b[k] if k % 2 else b[k].upper().replace('"TEXT"', '"text"')  # 20%: 10 exact, 10 near
    c = [_row(2000 + i) for i in range(90)]
    paths = [_write(tmp_path / "shards" / f"part-{s}.jsonl", rows) for s, rows in enumerate((a, b, c))]
    ev = [_row(5000 + i, "held-out") for i in range(40)]
    for k in range(20):
        ev[2 * k] = c[k * 4] if k % 2 else a[k]
    return paths, _write(tmp_path / "eval.jsonl", ev)


def _expected_headlines(doc: dict) -> None:
    got = [(Path(f["location"]["path"]).name, f["id"], f["location"]["range"]["start"]["line"], f["evidence"]["count"],
            f["evidence"]["total"]) for r in doc["reports"] for f in r["findings"] if f["id"] in HEADLINES]
    assert got == [("part-0.jsonl", MOSTLY, 50, 70, 120), ("part-1.jsonl", SHARE, 50, 20, 100),
                   ("eval.jsonl", CONTAMINATED, 0, 20, 40)]


def test_jobs_2_gives_the_headlines_of_one_pass(tmp_path):
    paths, ev = _shards(tmp_path)
    one = pre.preflight(paths, Config(), eval_path=ev)
    many = parallel.preflight_jobs(paths, Config(), jobs=2, eval_path=ev, part_bytes=500, first_min=1)
    for a, b in ((render.to_json(one), render.to_json(many)), (render.to_text(one), render.to_text(many)),
                 (render.to_sarif(one), render.to_sarif(many))):
        assert a == b
    _expected_headlines(json.loads(render.to_json(one)))


def test_a_dask_cluster_gives_the_headlines_of_one_pass(tmp_path, cluster):
    from trainproof_lsp.judge.dask_preflight import preflight_dask

    paths, ev = _shards(tmp_path)
    local = pre.preflight(paths, Config(), eval_path=ev)
    remote = preflight_dask(paths, Config(), address=cluster.scheduler_address, eval_path=ev, part_bytes=500,
                            first_min=1, partitions=3)
    assert render.to_json(remote) == render.to_json(local)
    assert render.to_text(remote, verbose=True) == render.to_text(local, verbose=True)
    _expected_headlines(json.loads(render.to_json(remote)))


# --- doctor: eval files paired with train files by name -------------------------------------

@pytest.mark.parametrize("name,split", [
    ("train", ("train", ("*",))), ("valid", ("eval", ("*",))), ("validation", ("eval", ("*",))),
    ("dev", ("eval", ("*",))), ("eval_data", ("eval", ("*", "data"))), ("train_data", ("train", ("*", "data"))),
    ("train-00001-of-00002", ("train", ("*", "#", "of", "#"))), ("test-00000-of-00001", ("eval", ("*", "#", "of", "#"))),
    ("train_eval", None), ("contest", None), ("data", None), ("Training.Set", ("train", ("*", "set"))),
])
def test_split_words_in_names(name, split):
    assert split_of(name) == split


def test_pairs_by_name_in_one_folder_and_by_folder(tmp_path):
    t = tmp_path
    files = [t / "train.jsonl", t / "valid.jsonl", t / "test.jsonl",                      # two evals, one train
             t / "train_data.jsonl", t / "eval_data.jsonl",                                # words around the split
             t / "hf" / "train-00000-of-00002.jsonl", t / "hf" / "train-00001-of-00002.jsonl",
             t / "hf" / "test-00000-of-00001.jsonl",                                       # shards of each split
             t / "data" / "train" / "a.jsonl", t / "data" / "train" / "b.jsonl",
             t / "data" / "test" / "x.jsonl", t / "data" / "test" / "y.jsonl",            # split folders
             t / "lone" / "eval.jsonl", t / "lone" / "other.jsonl",                        # no train: unpaired
             t / "mixed" / "train_eval.jsonl", t / "mixed" / "train.jsonl"]                # names no split: unpaired
    assert pair_datasets(files, [t]) == {
        t / "valid.jsonl": (t / "train.jsonl",),
        t / "test.jsonl": (t / "train.jsonl",),
        t / "eval_data.jsonl": (t / "train_data.jsonl",),
        t / "hf" / "test-00000-of-00001.jsonl": (t / "hf" / "train-00000-of-00002.jsonl",
                                                 t / "hf" / "train-00001-of-00002.jsonl"),
        t / "data" / "test" / "x.jsonl": (t / "data" / "train" / "a.jsonl", t / "data" / "train" / "b.jsonl"),
        t / "data" / "test" / "y.jsonl": (t / "data" / "train" / "a.jsonl", t / "data" / "train" / "b.jsonl"),
    }


def test_folders_above_the_one_given_name_no_split(tmp_path):
    project = tmp_path / "test" / "project"
    files = [project / "data.jsonl", project / "train" / "a.jsonl"]
    assert pair_datasets(files, [project]) == {}
    # given as files, only their own folder counts
    assert pair_datasets(files, []) == {}


def test_the_deepest_folder_given_that_holds_a_file_is_its_root(tmp_path):
    t = tmp_path
    files = [t / "data" / "train" / "a.jsonl", t / "data" / "valid" / "a.jsonl"]
    assert pair_datasets(files, [t]) == {files[1]: (files[0],)}
    # a folder given that does not hold the files is not their root
    assert pair_datasets(files, [t, t / "other"]) == {files[1]: (files[0],)}
    # data/train given as well: "train" is the root of a.jsonl there, not a folder below it
    assert pair_datasets(files, [t, t / "data" / "train"]) == {}
    assert pair_datasets(files, [t / "data" / "train", t]) == {}


def test_files_in_split_folders_pair_within_their_parent_and_their_own_split_word():
    t = Path("/w")
    train, valid = t / "data" / "train", t / "data" / "valid"
    files = [train / "a.jsonl", valid / "b.jsonl",
             valid / "eval_c.jsonl",            # names the split of its folder: counted
             valid / "train_d.jsonl",           # names the other split: left out
             t / "more" / "train" / "e.jsonl", t / "more" / "test" / "f.jsonl"]  # another parent: its own pair
    assert pair_datasets(files, [t]) == {
        valid / "b.jsonl": (train / "a.jsonl",),
        valid / "eval_c.jsonl": (train / "a.jsonl",),
        t / "more" / "test" / "f.jsonl": (t / "more" / "train" / "e.jsonl",),
    }


def _doctor(capsys, *args: str) -> tuple[int, dict]:
    code = main(["doctor", "--json", *args])
    return code, json.loads(capsys.readouterr().out)


def _by_file(doc: dict) -> dict[str, tuple[str, list[str], list[str]]]:
    """file name -> (verdict, headline and overlap ids, checks that ran among the eval ones)."""
    eval_checks = {"TP-PRE-EVAL-OVERLAP", EVAL_SHARE, CONTAMINATED}
    return {str(Path(r["artefact"]["path"]).relative_to(Path(r["artefact"]["path"]).parents[1])):
            (r["verdict"], sorted({f["id"] for f in r["findings"] if f["id"] in eval_checks | set(HEADLINES)}),
             sorted(c for c in r["checks"]["ran"] if c in eval_checks)) for r in doc["reports"]}


def test_doctor_judges_a_paired_eval_file_against_its_train_file(tmp_path, capsys):
    run = tmp_path / "run"
    _write(run / "train.jsonl", [_row(i) for i in range(50)])
    _write(run / "valid.jsonl", [_row(i) for i in range(10)])               # 10 of 10 in train
    code, doc = _doctor(capsys, str(run))
    assert code == 1
    assert _by_file(doc) == {
        "run/train.jsonl": ("PASS", [], []),
        "run/valid.jsonl": ("FAIL", [CONTAMINATED, "TP-PRE-EVAL-OVERLAP"],
                            [CONTAMINATED, "TP-PRE-EVAL-OVERLAP", EVAL_SHARE])}
    [f] = [f for r in doc["reports"] for f in r["findings"] if f["id"] == CONTAMINATED]
    assert f["evidence"] == {"line": 1, "train_line": 1, "count": 10, "total": 10, "share": 1.0, "exact": 10,
                             "near": 0}
    assert f["related"][0]["location"]["path"] == str(run / "train.jsonl")
    # the same files given by name pair the same way
    code, doc = _doctor(capsys, str(run / "valid.jsonl"), str(run / "train.jsonl"))
    assert code == 1 and _by_file(doc)["run/valid.jsonl"][0] == "FAIL"


def test_doctor_pairs_split_folders_and_every_shard(tmp_path, capsys):
    data = tmp_path / "data"
    _write(data / "train" / "part-0.jsonl", [_row(i) for i in range(40)])
    _write(data / "train" / "part-1.jsonl", [_row(100 + i) for i in range(40)])
    _write(data / "test" / "part-0.jsonl", [_row(3), _row(103)] + [_row(i, "held-out") for i in range(18)])
    code, doc = _doctor(capsys, str(data))
    assert code == 0  # 2 of 20 in train: a WARN headline
    by = _by_file(doc)
    assert by["test/part-0.jsonl"] == ("WARN", ["TP-PRE-EVAL-OVERLAP", EVAL_SHARE],
                                       [CONTAMINATED, "TP-PRE-EVAL-OVERLAP", EVAL_SHARE])
    overlap = [(f["evidence"]["line"], Path(f["related"][0]["location"]["path"]).parent.name,
                Path(f["related"][0]["location"]["path"]).name, f["evidence"]["train_line"])
               for r in doc["reports"] for f in r["findings"] if f["id"] == "TP-PRE-EVAL-OVERLAP"]
    assert overlap == [(1, "train", "part-0.jsonl", 4), (2, "train", "part-1.jsonl", 4)]
    assert by["train/part-0.jsonl"] == by["train/part-1.jsonl"] == ("PASS", [], [])


def test_doctor_leaves_an_unpaired_eval_file_alone_and_says_why(tmp_path, capsys):
    run = tmp_path / "run"
    _write(run / "eval.jsonl", [_row(i) for i in range(10)])
    _write(run / "data.jsonl", [_row(i) for i in range(10)])   # the same rows, but not named train
    code, doc = _doctor(capsys, str(run))
    assert code == 0
    assert _by_file(doc) == {"run/data.jsonl": ("PASS", [], []), "run/eval.jsonl": ("PASS", [], [])}
    [ev] = [r for r in doc["reports"] if r["artefact"]["path"].endswith("eval.jsonl")]
    assert {s["id"]: s["reason"] for s in ev["checks"]["skipped"] if "EVAL" in s["id"]} == \
        {"TP-PRE-EVAL-OVERLAP": SKIP, EVAL_SHARE: SKIP, CONTAMINATED: SKIP}


def test_doctor_judges_two_eval_files_against_one_train_file_reading_each_once(tmp_path, monkeypatch):
    run = tmp_path / "run"
    _write(run / "train.jsonl", [_row(i) for i in range(60)])
    _write(run / "valid.jsonl", [_row(i) for i in range(3)] + [_row(i, "held-out") for i in range(17)])  # 15%
    _write(run / "test.jsonl", [_row(i, "held-out") for i in range(20)])                                # none
    _write(run / "notes.jsonl", _with_repeats(40, 30))                                                  # alone
    scanned: list[str] = []
    real = pre._scan

    def counting(path, data=None, config=None):
        scanned.append(Path(path).name)
        return real(path, data, config)

    monkeypatch.setattr(pre, "_scan", counting)
    out = engine.doctor([run], Config())
    assert sorted(scanned) == ["notes.jsonl", "test.jsonl", "train.jsonl", "valid.jsonl"]
    got = {Path(r.artefact.path).name: (r.verdict.value, [h[:3] for h in _headlines(r)]) for r in out.reports}
    assert got == {"notes.jsonl": ("FAIL", [(MOSTLY, "FAIL", 10)]), "test.jsonl": ("PASS", []),
                   "train.jsonl": ("PASS", []), "valid.jsonl": ("WARN", [(EVAL_SHARE, "WARN", 0)])}
    [test_report] = [r for r in out.reports if r.artefact.path.endswith("test.jsonl")]
    assert ("TP-PRE-EVAL-OVERLAP", True) in [(c.group, c.ran) for c in test_report.checks]
