"""preflight --jobs N: files split at line boundaries and shards spread over worker
processes give the report one pass gives, byte for byte (text, JSON, SARIF).

Split sizes are forced small here so that a few hundred lines make many ranges, with
duplicates, broken lines and layout quirks right at the cuts."""

from __future__ import annotations

import dataclasses
import io
import json
import pickle
import random
import subprocess
import sys
from pathlib import Path

import pytest

from trainproof_lsp.core.caps import DEFAULT_CAPS
from trainproof_lsp.core.config import Config
from trainproof_lsp.judge import parallel
from trainproof_lsp.judge import preflight as pre
from trainproof_lsp.output import render

CONFIG = Config()


def _row(i: int) -> str:
    return json.dumps({"text": f"row number {i:06d} of the set"})


def _outputs(outcome) -> tuple[str, str, str, str]:
    return (render.to_text(outcome), render.to_text(outcome, verbose=True), render.to_json(outcome),
            render.to_sarif(outcome))


def _same_as_one_pass(paths, *, eval_path=None, config=CONFIG, part_bytes=400, first_min=1) -> dict:
    """Run both ways; assert identical text, JSON and SARIF; return the JSON."""
    one = pre.preflight(paths, config, eval_path=eval_path)
    many = parallel.preflight_jobs(paths, config, jobs=2, eval_path=eval_path, part_bytes=part_bytes,
                                   first_min=first_min)
    for a, b in zip(_outputs(one), _outputs(many)):
        assert a == b
    return json.loads(render.to_json(one))


def _findings(doc: dict, rule: str) -> list[dict]:
    return [f for r in doc["reports"] for f in r["findings"] if f["id"] == rule]


def _cuts(path: Path, part_bytes=400, first_min=1) -> list[int]:
    """Line numbers (0-based) that start a range."""
    data = path.read_bytes()
    return [data[:a].count(b"\n") for a, _ in parallel.plan_parts(str(path), len(data), jobs=2,
                                                                  part_bytes=part_bytes, first_min=first_min)]


def test_duplicates_straddling_the_cuts_are_found_as_in_one_pass(tmp_path):
    rows = [_row(i) for i in range(300)]
    path = tmp_path / "train.jsonl"
    path.write_text("\n".join(rows) + "\n")
    cuts = _cuts(path)
    assert len(cuts) > 10
    # Each row that starts a range repeats the row just before the cut; one near copy too.
    for c in cuts[1:]:
        rows[c] = rows[c - 1]
    rows[cuts[3] + 1] = rows[0].upper().replace('"TEXT"', '"text"')
    path.write_text("\n".join(rows) + "\n")
    assert _cuts(path) == cuts  # same lengths, same cuts
    doc = _same_as_one_pass([path])
    dups = _findings(doc, "TP-PRE-DUPLICATE-TEXT")
    assert [(d["evidence"]["line"], d["evidence"]["first_line"]) for d in dups] == [(c + 1, c) for c in cuts[1:]]
    near = _findings(doc, "TP-PRE-NEAR-DUPLICATE")
    assert [(d["evidence"]["line"], d["evidence"]["first_line"]) for d in near] == [(cuts[3] + 2, 1)]


def test_a_folder_of_shards_with_an_eval_file_gives_the_one_pass_report(tmp_path):
    shards = tmp_path / "shards"
    shards.mkdir()
    for s in range(3):
        (shards / f"part-{s}.jsonl").write_text("\n".join(_row(s * 100 + i) for i in range(100)) + "\n")
    # shard 2 repeats a row of its own across its cuts; eval holds a row of shard 1
    p2 = shards / "part-2.jsonl"
    lines = p2.read_text().splitlines()
    lines[90] = lines[5]
    p2.write_text("\n".join(lines) + "\n")
    ev = tmp_path / "eval.jsonl"
    ev.write_text(_row(999) + "\n" + _row(150) + "\n" + _row(151).upper().replace('"TEXT"', '"text"') + "\n")
    paths = parallel.expand_shards([shards])
    assert [p.name for p in paths] == ["part-0.jsonl", "part-1.jsonl", "part-2.jsonl"]
    doc = _same_as_one_pass(paths, eval_path=ev)
    overlap = _findings(doc, "TP-PRE-EVAL-OVERLAP")
    assert [(o["evidence"]["line"], o["evidence"]["train_line"], o["evidence"]["exact"]) for o in overlap] == \
        [(2, 51, True), (3, 52, False)]
    assert {o["location"]["path"] for o in overlap} == {str(ev)}
    dups = _findings(doc, "TP-PRE-DUPLICATE-TEXT")
    assert [(d["location"]["path"], d["evidence"]["line"], d["evidence"]["first_line"]) for d in dups] == \
        [(str(p2), 91, 6)]


def test_bom_crlf_and_a_last_line_without_newline(tmp_path):
    path = tmp_path / "crlf.jsonl"
    rows = [_row(i) for i in range(200)]
    rows[120] = rows[3]
    path.write_bytes(b"\xef\xbb\xbf" + "\r\n".join(rows).encode())
    assert len(_cuts(path)) > 5
    doc = _same_as_one_pass([path])
    layout = _findings(doc, "TP-PRE-FILE-LAYOUT")
    assert layout[0]["evidence"]["bom"] is True and layout[0]["evidence"]["crlf"] is True
    assert [(d["evidence"]["line"], d["evidence"]["first_line"]) for d in _findings(doc, "TP-PRE-DUPLICATE-TEXT")] \
        == [(121, 4)]


def test_a_json_array_file_is_not_split(tmp_path):
    path = tmp_path / "array.json"
    path.write_text("[\n" + ",\n".join([_row(i) for i in range(200)] + [_row(7)]) + "\n]\n")
    assert parallel.plan_parts(str(path), path.stat().st_size, jobs=2, part_bytes=400, first_min=1) == \
        [(0, path.stat().st_size)]
    doc = _same_as_one_pass([path])
    assert [(d["evidence"]["line"], d["evidence"]["first_line"]) for d in _findings(doc, "TP-PRE-DUPLICATE-TEXT")] \
        == [(202, 9)]


def test_malformed_lines_at_the_cuts(tmp_path):
    path = tmp_path / "broken.jsonl"
    rows = [_row(i) for i in range(300)]
    path.write_text("\n".join(rows) + "\n")
    cuts = _cuts(path)
    # A cut row that starts with `{` but is broken stays a cut; a row that does not start
    # with `{` (text, `[`, blanks) is never the first row of a range: the cut moves on.
    rows[cuts[2]] = '{"text": broken' + " " * (len(rows[0]) - 15)
    rows[cuts[4]] = "[1, 2, 3]" + " " * (len(rows[0]) - 9)
    rows[cuts[6]] = " " * len(rows[0])
    rows[cuts[8]] = "not json at all" + "x" * (len(rows[0]) - 15)
    path.write_text("\n".join(rows) + "\n")
    now = _cuts(path)
    assert cuts[2] in now and not {cuts[4], cuts[6], cuts[8]} & set(now)
    doc = _same_as_one_pass([path])
    bad = _findings(doc, "TP-PRE-MALFORMED-JSONL")
    assert [b["evidence"]["line"] for b in bad] == [cuts[2] + 1, cuts[4] + 1, cuts[8] + 1]


def test_no_range_starts_just_before_nul_bytes(tmp_path):
    path = tmp_path / "nul.jsonl"
    rows = [_row(i) for i in range(4000)]
    rows[3000] = '{"text": "a\x00b"}'
    path.write_text("\n".join(rows) + "\n")
    cuts = _cuts(path, part_bytes=4000)
    window = (1 << 16) // (len(rows[0]) + 1) + 1  # the lines a range start looks ahead for NUL
    assert len(cuts) > 20 and not [c for c in cuts if 3000 - window <= c <= 3000]
    doc = _same_as_one_pass([path], part_bytes=4000)
    assert [b["evidence"]["line"] for b in _findings(doc, "TP-PRE-MALFORMED-JSONL")] == [3001]


def test_a_row_over_the_cap_between_cuts(tmp_path):
    config = dataclasses.replace(CONFIG, caps=dataclasses.replace(DEFAULT_CAPS, max_row_mb=1))
    path = tmp_path / "big.jsonl"
    rows = [_row(i) for i in range(100)]
    rows[40] = json.dumps({"text": "x" * (1 << 20)})
    rows[70] = rows[10]
    path.write_text("\n".join(rows) + "\n")
    doc = _same_as_one_pass([path], config=config, part_bytes=2000)
    over = _findings(doc, "TP-PRE-ROW-NOT-CHECKED")
    assert [o["evidence"]["line"] for o in over] == [41]
    assert [(d["evidence"]["line"], d["evidence"]["first_line"]) for d in _findings(doc, "TP-PRE-DUPLICATE-TEXT")] \
        == [(71, 11)]


def test_a_worker_sends_back_hashes_and_problems_not_rows(tmp_path):
    path = tmp_path / "train.jsonl"
    path.write_text("\n".join(json.dumps({"text": f"SECRET-ROW-{i}"}) for i in range(50)) + "\n")
    size = path.stat().st_size
    scan = parallel.scan_part(str(path), 0, size // 2 + 7, 1 << 20, False)
    assert isinstance(scan, pre.DatasetScan) and scan.lines == 26  # a ragged end is a line of its own
    assert b"SECRET-ROW" not in pickle.dumps(scan)


def test_progress_is_plain_lines_off_a_terminal(monkeypatch):
    monkeypatch.setattr(parallel, "PROGRESS_AFTER_S", 0.0)
    out = io.StringIO()
    shown = parallel.Progress(2_000_000, stream=out)
    shown.advance(1_000_000)
    shown.close()
    assert out.getvalue().startswith("preflight: 50% (1/2 MB, ")
    assert "\r" not in out.getvalue()


def test_progress_is_a_bar_on_a_terminal(monkeypatch):
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr(parallel, "PROGRESS_AFTER_S", 0.0)
    out = Terminal()
    shown = parallel.Progress(4_000_000, stream=out)
    shown.advance(1_000_000)
    shown.advance(1_000_000)
    shown.close()
    assert out.getvalue() == ("\rpreflight [#####               ]  25.0% 1/4 MB"
                              "\rpreflight [##########          ]  50.0% 2/4 MB\n")


def test_cli_jobs_output_is_the_json_alone_and_bad_jobs_is_one_line(tmp_path):
    path = tmp_path / "train.jsonl"
    path.write_text("\n".join(_row(i) for i in range(50)) + "\n" + _row(3) + "\n")
    cmd = [sys.executable, "-m", "trainproof_lsp", "preflight", str(path), "--json"]
    one = subprocess.run(cmd + ["--jobs", "1"], capture_output=True, text=True, timeout=120)
    two = subprocess.run(cmd + ["--jobs", "2"], capture_output=True, text=True, timeout=120)
    assert one.returncode == two.returncode == 0
    assert one.stdout == two.stdout and json.loads(two.stdout)["reports"][0]["verdict"] == "WARN"
    bad = subprocess.run(cmd + ["--jobs", "0"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "--jobs must be at least 1" in bad.stdout
    assert "Traceback" not in bad.stderr


def test_unreadable_paths_are_not_checked_as_in_one_pass(tmp_path):
    good = tmp_path / "good.jsonl"
    good.write_text("\n".join(_row(i) for i in range(40)) + "\n")
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(b"\x00\x01" * 5000)
    empty_folder = tmp_path / "nothing"
    empty_folder.mkdir()
    paths = parallel.expand_shards([good, tmp_path / "missing.jsonl", binary, empty_folder,
                                    str(tmp_path / "none-*.jsonl")])
    assert paths[1:] == [tmp_path / "missing.jsonl", binary, empty_folder, str(tmp_path / "none-*.jsonl")]
    doc = _same_as_one_pass(paths)
    assert [r["verdict"] for r in doc["reports"]] == ["PASS", "NOT-CHECKED", "NOT-CHECKED", "NOT-CHECKED",
                                                      "NOT-CHECKED"]


def _across(doc: dict) -> list[tuple[str, int, str, int, int, bool]]:
    """TP-PRE-DUPLICATE-ACROSS-FILES as (file, line, earlier file, its line, its position, exact)."""
    out = []
    for f in _findings(doc, "TP-PRE-DUPLICATE-ACROSS-FILES"):
        [rel] = f["related"]
        ev = f["evidence"]
        assert rel["location"]["range"]["start"]["line"] == ev["first_line"] - 1
        assert f["location"]["range"]["start"]["line"] == ev["line"] - 1
        out.append((Path(f["location"]["path"]).name, ev["line"], Path(rel["location"]["path"]).name,
                    ev["first_line"], ev["first_file"], ev["exact"]))
    return out


def _shards_with_copies_across(tmp_path) -> list[Path]:
    shards = tmp_path / "shards"
    shards.mkdir()
    rows = {s: [_row(s * 100 + i) for i in range(100)] for s in range(3)}
    rows[1][10] = rows[0][5]                                       # shard 1 holds a row of shard 0
    rows[2][80] = rows[0][5]                                       # ...and so does shard 2: shard 0 is cited
    rows[2][95] = rows[0][5]                                       # shard 2's own repeat: DUPLICATE-TEXT only
    rows[1][40] = rows[0][70].upper().replace('"TEXT"', '"text"')  # a near copy across files
    rows[2][3] = rows[1][60]                                       # between the later shards
    for s in range(3):
        (shards / f"part-{s}.jsonl").write_text("\n".join(rows[s]) + "\n")
    return parallel.expand_shards([shards])


def test_rows_repeating_an_earlier_shard_are_found_as_in_one_pass(tmp_path):
    paths = _shards_with_copies_across(tmp_path)
    assert len(_cuts(paths[2])) > 5  # the copies sit in different ranges of the file
    doc = _same_as_one_pass(paths)
    assert _across(doc) == [("part-1.jsonl", 11, "part-0.jsonl", 6, 1, True),
                            ("part-1.jsonl", 41, "part-0.jsonl", 71, 1, False),
                            ("part-2.jsonl", 4, "part-1.jsonl", 61, 2, True),
                            ("part-2.jsonl", 81, "part-0.jsonl", 6, 1, True)]
    dups = _findings(doc, "TP-PRE-DUPLICATE-TEXT")
    assert [(Path(d["location"]["path"]).name, d["evidence"]["line"], d["evidence"]["first_line"])
            for d in dups] == [("part-2.jsonl", 96, 81)]
    [msg] = [f["message"] for f in _findings(doc, "TP-PRE-DUPLICATE-ACROSS-FILES") if f["evidence"]["line"] == 41]
    assert msg == f"line 41 repeats {paths[0]}:71 (an earlier file) up to letter case or whitespace"
    # the files in another order: the copies point the other way
    doc = _same_as_one_pass(paths[::-1])
    assert _across(doc)[:2] == [("part-1.jsonl", 11, "part-2.jsonl", 81, 1, True),
                                ("part-1.jsonl", 61, "part-2.jsonl", 4, 1, True)]


def test_the_hash_partitions_find_what_the_one_pass_search_finds(tmp_path):
    """judge/parallel.partition_duplicates (the cluster's reduce task) against the local
    search over whole hash arrays, on the same scans."""
    from trainproof_lsp.judge.cross_files import earlier_copies

    paths = _shards_with_copies_across(tmp_path)
    scans = [pre.scan_dataset(p) for p in paths]
    local = pre.repeats_across_files(scans, CONFIG)
    for partitions in (1, 3, 7):
        found = {}
        for which in ("exact", "near"):
            by_part = [[] for _ in range(partitions)]
            for i, s in enumerate(scans):
                for p, piece in enumerate(parallel.hash_pieces(getattr(s, which), file=i, first_line=0,
                                                               partitions=partitions)):
                    by_part[p].append(piece)
            found[which] = [a for pieces in by_part
                            for a in parallel.partition_duplicates(pieces, train_files=frozenset({0, 1, 2})).across]
        assert earlier_copies({i: str(p) for i, p in enumerate(paths)}, found["exact"], found["near"]) == local
    assert sorted((i, c.line) for i, cs in local.items() for c in cs) == [(1, 10), (1, 40), (2, 3), (2, 80)]


@pytest.mark.parametrize("seed", range(40))
def test_random_files_with_odd_lines_at_the_cuts_give_the_one_pass_report(tmp_path, seed):
    """Files with every kind of odd line (tests/test_dataset_reader.py's mix: blank lines,
    each format's faults, rows cut in two, two objects on a line, pretty-printed rows, LF
    or CRLF), cut into ranges of a few hundred bytes: text, JSON and SARIF as one pass."""
    from test_dataset_reader import _mixed_file

    rng = random.Random(seed)
    path = tmp_path / "train.jsonl"
    path.write_bytes(_mixed_file(rng))
    _same_as_one_pass([path], part_bytes=rng.choice([200, 500, 1500]))
