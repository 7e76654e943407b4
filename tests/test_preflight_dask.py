"""preflight --dask ADDRESS: the scan on a Dask cluster (two worker processes here), the
duplicates found by hash partition, and the same report as a local run."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from trainproof_lsp import cli
from trainproof_lsp.core.config import Config
from trainproof_lsp.judge import parallel
from trainproof_lsp.judge import preflight as pre
from trainproof_lsp.judge.dask_preflight import MISSING_DASK, preflight_dask
from trainproof_lsp.output import render


def _row(i: int) -> str:
    return json.dumps({"text": f"row number {i:06d} of the set"})


def _findings(doc: dict, rule: str) -> list[tuple[str, int, int]]:
    return [(f["location"]["path"].rsplit("/", 1)[-1], f["evidence"]["line"],
             f["evidence"].get("first_line", f["evidence"].get("train_line")))
            for r in doc["reports"] for f in r["findings"] if f["id"] == rule]


def _three_shards(tmp_path):
    shards = tmp_path / "shards"
    shards.mkdir()
    rows = {s: [_row(s * 1000 + i) for i in range(120)] for s in range(3)}
    rows[0][100] = rows[0][2]                                      # within shard 0, across its ranges
    rows[1][60] = rows[1][59].upper().replace('"TEXT"', '"text"')  # a near copy in shard 1
    rows[2][7] = rows[0][5]                                        # shard 2 holds a row of shard 0
    rows[2][110] = rows[2][7]                                      # ...and repeats it
    rows[2][50] = '{"text": broken'
    rows[1][10] = rows[0][5]                                       # shard 1 holds the same row of shard 0
    rows[1][30] = rows[0][40].upper().replace('"TEXT"', '"text"')  # a near copy across shards
    rows[2][20] = rows[1][90]                                      # shard 2 holds a row of shard 1
    for s in range(3):
        (shards / f"part-{s}.jsonl").write_text("\n".join(rows[s]) + "\n")
    ev = tmp_path / "eval.jsonl"
    ev.write_text("\n".join([_row(5), _row(2010), _row(1011).upper().replace('"TEXT"', '"text"'), _row(99999)])
                  + "\n")
    return parallel.expand_shards([shards]), ev


def test_three_shards_on_a_local_cluster_give_the_local_report(tmp_path, cluster):
    paths, ev_path = _three_shards(tmp_path)
    config = Config()
    local = pre.preflight(paths, config, eval_path=ev_path)
    remote = preflight_dask(paths, config, address=cluster.scheduler_address, eval_path=ev_path,
                            part_bytes=600, first_min=1, partitions=3)
    assert render.to_json(remote) == render.to_json(local)
    assert render.to_text(remote, verbose=True) == render.to_text(local, verbose=True)
    assert render.to_sarif(remote) == render.to_sarif(local)
    doc = json.loads(render.to_json(local))
    assert _findings(doc, "TP-PRE-DUPLICATE-TEXT") == [("part-0.jsonl", 101, 3), ("part-2.jsonl", 111, 8)]
    assert _findings(doc, "TP-PRE-NEAR-DUPLICATE") == [("part-1.jsonl", 61, 60)]
    # eval line 1 is in shard 0 (line 6) and shard 2 (line 8): the first training file wins
    assert _findings(doc, "TP-PRE-EVAL-OVERLAP") == [("eval.jsonl", 1, 6), ("eval.jsonl", 2, 11),
                                                    ("eval.jsonl", 3, 12)]
    assert [f[1] for f in _findings(doc, "TP-PRE-MALFORMED-JSONL")] == [51]
    # rows repeating an earlier shard: on the later row, naming the first copy
    across = [(f["location"]["path"].rsplit("/", 1)[-1], f["location"]["range"]["start"]["line"], f["evidence"],
               rel["location"]["path"].rsplit("/", 1)[-1], rel["location"]["range"]["start"]["line"])
              for r in doc["reports"] for f in r["findings"] if f["id"] == "TP-PRE-DUPLICATE-ACROSS-FILES"
              for rel in f["related"]]
    ev = {"across_files_in_file": 2}
    assert across == [
        ("part-1.jsonl", 10, {"line": 11, "first_line": 6, "first_file": 1, "exact": True, **ev}, "part-0.jsonl", 5),
        ("part-1.jsonl", 30, {"line": 31, "first_line": 41, "first_file": 1, "exact": False, **ev}, "part-0.jsonl", 40),
        ("part-2.jsonl", 7, {"line": 8, "first_line": 6, "first_file": 1, "exact": True, **ev}, "part-0.jsonl", 5),
        ("part-2.jsonl", 20, {"line": 21, "first_line": 91, "first_file": 2, "exact": True, **ev}, "part-1.jsonl", 90)]
    jobs = parallel.preflight_jobs(paths, config, jobs=2, eval_path=ev_path, part_bytes=600, first_min=1)
    assert render.to_json(jobs) == render.to_json(remote)


def test_cli_dask_prints_the_local_json(tmp_path, cluster):
    paths, ev = _three_shards(tmp_path)
    base = [sys.executable, "-m", "trainproof_lsp", "preflight", str(tmp_path / "shards"), "--eval", str(ev), "--json"]
    local = subprocess.run(base + ["--jobs", "1"], capture_output=True, text=True, timeout=300)
    remote = subprocess.run(base + ["--dask", cluster.scheduler_address], capture_output=True, text=True, timeout=300)
    assert remote.returncode == local.returncode == 1  # the malformed row FAILs
    assert remote.stdout == local.stdout


def test_fsspec_urls_and_a_url_glob_read_the_same_shards(tmp_path, cluster):
    paths, ev = _three_shards(tmp_path)
    config = Config()
    urls = parallel.expand_shards([f"file://{tmp_path}/shards/part-*.jsonl"])
    assert urls == [f"file://{p}" for p in paths]
    remote = preflight_dask(urls, config, address=cluster.scheduler_address, eval_path=f"file://{ev}",
                            part_bytes=600, first_min=1)
    local = pre.preflight(paths, config, eval_path=ev)
    assert render.to_json(remote).replace("file://", "") == render.to_json(local)


def test_unreadable_shards_on_the_cluster_are_reported_as_locally(tmp_path, cluster):
    good = tmp_path / "good.jsonl"
    good.write_text("\n".join(_row(i) for i in range(30)) + "\n")
    (tmp_path / "empty").mkdir()
    paths = [good, tmp_path / "missing.jsonl", tmp_path / "empty"]
    remote = preflight_dask(paths, Config(), address=cluster.scheduler_address, part_bytes=300, first_min=1)
    local = pre.preflight(paths, Config())
    assert render.to_json(remote) == render.to_json(local)
    assert [r.verdict.value for r in remote.reports] == ["PASS", "NOT-CHECKED", "NOT-CHECKED"]


def test_fifos_and_lfs_pointers_on_the_cluster_are_reported_as_locally(tmp_path, cluster):
    import os

    good = tmp_path / "good.jsonl"
    good.write_text("\n".join(_row(i) for i in range(30)) + "\n")
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)  # never opened: an open would wait for a writer forever
    pointer = tmp_path / "lfs.jsonl"
    pointer.write_text("version https://git-lfs.github.com/spec/v1\noid sha256:" + "ab" * 32 + "\nsize 1234567\n")
    paths = [good, fifo, pointer]
    remote = preflight_dask(paths, Config(), address=cluster.scheduler_address, part_bytes=300, first_min=1)
    local = pre.preflight(paths, Config())
    assert render.to_json(remote) == render.to_json(local)
    assert [(r.verdict.value, r.artefact.kind) for r in remote.reports] == [
        ("PASS", "dataset"), ("NOT-CHECKED", "dataset"), ("NOT-CHECKED", "lfs-pointer")]
    assert remote.reports[2].reason == (f"{pointer}: Git LFS pointer to a 1,234,567-byte file, not downloaded: "
                                        "run `git lfs pull`")


def test_dask_without_the_extra_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    path = tmp_path / "train.jsonl"
    path.write_text(_row(1) + "\n")
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed -> ImportError
    assert cli.main(["preflight", str(path), "--dask", "tcp://127.0.0.1:1"]) == 2
    out = capsys.readouterr()
    assert f"error: {MISSING_DASK}" in out.out and "Traceback" not in out.err


def test_an_unreachable_scheduler_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    pytest.importorskip("distributed")
    from trainproof_lsp.judge import dask_preflight

    path = tmp_path / "train.jsonl"
    path.write_text(_row(1) + "\n")
    monkeypatch.setattr(dask_preflight, "CONNECT_TIMEOUT_S", 1)
    assert cli.main(["preflight", str(path), "--dask", "tcp://127.0.0.1:9"]) == 2  # (port 9: discard, closed)
    out = capsys.readouterr()
    assert "error: --dask tcp://127.0.0.1:9: cannot reach the scheduler (" in out.out
    assert "Traceback" not in out.err
