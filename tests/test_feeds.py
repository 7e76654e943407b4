"""The metric text log readers' incremental form (readers/common.py `Feed`): a file fed in
pieces of any size -- cut inside a line, between the CR and LF of a CRLF, between the
bytes of a UTF-8 character -- gives exactly the records, line numbers and errors of the
whole-file read, which is the same object fed the whole file."""

from __future__ import annotations

import io
import json
import random
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from trainproof_lsp.core.config import Config
from trainproof_lsp.core.model import LOSS, ReadError, Span
from trainproof_lsp.guardian.watch import Watch, WatchOptions
from trainproof_lsp.judge.engine import judge_file
from trainproof_lsp.output.render import report_json
from trainproof_lsp.readers.common import Feed, feed_all
from trainproof_lsp.readers.coqui import CoquiFeed, read_coqui_log
from trainproof_lsp.readers.metrics import CsvFeed, JsonlFeed, read_metrics_csv, read_metrics_jsonl
from trainproof_lsp.readers.mlflow import MetricFileFeed, read_mlflow_run

# JSONL with a BOM, CRLF line ends, a blank line, a non-ASCII key and value, a line that
# is not JSON, a JSON value that is not an object, and a last line without a newline.
JSONL = ('\ufeff{"step": 1, "loss": 2.5}\r\n'
         '\r\n'
         '{"step": 2, "loss": 2.25, "note": "café ✓"}\r\n'
         'not json\r\n'
         '[1, 2]\n'
         '{"step": 3, "loss": 2.0, "réseau": 1}').encode("utf-8")

# CSV with a BOM, CRLF, a quoted field holding a newline (one record, two lines), a short
# row, a blank line, non-ASCII text and a last line without a newline.
CSV = ('\ufeffstep,loss,comment\r\n'
       '1,2.5,"first\r\nrow"\r\n'
       '2,2.25,café ✓\r\n'
       '\r\n'
       '3,2.0\r\n'
       '4,1.75,"x, ""y"""').encode("utf-8")

# A Coqui log: colour codes, CRLF, a train block, an eval block, a second epoch.
COQUI = ('\x1b[1m > EPOCH: 0/2\x1b[0m\r\n'
         '   --> TIME: 2026-02-11 01:08:34 -- STEP: 0/9 -- GLOBAL_STEP: 10\r\n'
         '     | > loss: 0.5  (0.5)\r\n'
         '     | > current_lr: 1e-05\r\n'
         '     | > unknown_x: 3.0 ünïcode\r\n'
         '  --> EVAL PERFORMANCE\r\n'
         '     | > avg_loss: 0.75 (+0)\r\n'
         ' > EPOCH: 1/2\r\n'
         '   --> TIME: 2026-02-11 01:09:34 -- STEP: 1/9 -- GLOBAL_STEP: 20\r\n'
         '     | > loss: 0.25  (0.3)').encode("utf-8")

# An MLflow metric file: `<timestamp ms> <value> <step>` a line, a bad line, CRLF.
MLFLOW = b"1700000000000 0.5 1\r\n1700000000100 x 2\r\n\r\n1700000000200 0.25 3"

FEEDS: dict[str, tuple[Callable[[], Feed[Any]], bytes]] = {
    "jsonl": (lambda: JsonlFeed("m.jsonl"), JSONL),
    "csv": (lambda: CsvFeed("m.csv"), CSV),
    "tsv": (lambda: CsvFeed("m.tsv", "\t"), CSV.replace(b",", b"\t")),
    "coqui": (CoquiFeed, COQUI),
    "mlflow": (lambda: MetricFileFeed("loss"), MLFLOW),
}


def fed_whole(feed: Feed[Any], data: bytes) -> list[Any]:
    return [record for batch in feed_all(feed, data) for record in batch]


def fed_in_pieces(feed: Feed[Any], data: bytes, cuts: Sequence[int]) -> list[Any]:
    out: list[Any] = []
    last = 0
    for cut in [*sorted(set(cuts)), len(data)]:
        out.extend(feed.feed(data[last:cut]))
        last = cut
    out.extend(feed.finish())
    return out


def hard_cuts(data: bytes) -> list[int]:
    """Every place a cut is hardest: between CR and LF, inside a UTF-8 character
    (between a lead byte and its continuation bytes), inside the BOM."""
    cuts = [i + 1 for i in range(len(data) - 1) if data[i:i + 2] == b"\r\n"]
    cuts += [i for i in range(1, len(data)) if 0x80 <= data[i] < 0xC0]
    return cuts


@pytest.mark.parametrize("fmt", sorted(FEEDS))
def test_a_file_fed_in_random_pieces_gives_the_whole_read_records(fmt):
    make, data = FEEDS[fmt]
    whole = fed_whole(make(), data)
    assert whole  # the fixture has records to compare
    assert fed_in_pieces(make(), data, hard_cuts(data)) == whole
    assert fed_in_pieces(make(), data, range(1, len(data))) == whole  # a byte at a time
    rng = random.Random(fmt)
    for _ in range(200):
        cuts = rng.sample(range(1, len(data)), rng.randint(1, min(12, len(data) - 1)))
        assert fed_in_pieces(make(), data, cuts) == whole, cuts


def test_jsonl_records_and_line_numbers():
    feed = JsonlFeed("m.jsonl")
    rows = fed_in_pieces(feed, JSONL, hard_cuts(JSONL))
    assert [r.span() for r in rows] == [Span(0, 0, 0, 24), Span(2, 0, 2, 43), Span(5, 0, 5, 37)]
    assert [r.values["step"] for r in rows] == [1, 2, 3]
    assert rows[1].values["note"] == "café ✓" and rows[2].values["réseau"] == 1
    assert (feed.bad, feed.first_bad) == (2, (3, "invalid JSON: Expecting value"))
    assert feed.bad_lines_note() == (-1, "2 line(s) are not JSON objects and were not used, first at line 4")
    run = read_metrics_jsonl("m.jsonl", JSONL)
    assert run.record_spans.start_lines == (0, 2, 5) and run.record_spans.end_chars == (24, 43, 37)
    assert run.series[LOSS].values == (2.5, 2.25, 2.0)
    assert run.notes == ((-1, "2 line(s) are not JSON objects and were not used, first at line 4"),)


def test_csv_records_and_line_numbers():
    feed = CsvFeed("m.csv")
    rows = fed_in_pieces(feed, CSV, hard_cuts(CSV))
    assert feed.header == ["step", "loss", "comment"]
    # The quoted field's record spans lines 1-2; the blank line 4 is no record.
    assert [r.span() for r in rows] == [Span(1, 0, 2, 4), Span(3, 0, 3, 13), Span(5, 0, 5, 5),
                                      Span(6, 0, 6, 17)]
    assert [r.values for r in rows] == [
        {"step": "1", "loss": "2.5", "comment": "first\r\nrow"},
        {"step": "2", "loss": "2.25", "comment": "café ✓"},
        {"step": "3", "loss": "2.0"},
        {"step": "4", "loss": "1.75", "comment": 'x, "y"'}]
    assert [r.note for r in rows] == [None, None, "line 6: 2 cells, header has 3", None]
    run = read_metrics_csv("m.csv", CSV)
    assert run.record_spans.start_lines == (1, 3, 5, 6)
    assert run.record_spans.end_lines == (2, 3, 5, 6)
    assert run.series[LOSS].steps == (1, 2, 3, 4)
    assert run.notes == ((2, "line 6: 2 cells, header has 3"),)


def test_a_quoted_field_is_one_record_only_once_its_closing_line_is_fed():
    feed = CsvFeed("m.csv")
    assert list(feed.feed(b'step,loss\n1,"2.5\n')) == []  # the quote is still open
    assert [(r.span(), r.values) for r in feed.feed(b'"\n2,')] == [(Span(1, 0, 2, 1), {"step": "1", "loss": "2.5"})]
    assert [(r.span(), r.values) for r in feed.feed(b"3\n")] == [(Span(3, 0, 3, 3), {"step": "2", "loss": "3"})]
    assert list(feed.finish()) == []


def test_coqui_blocks_and_line_numbers():
    blocks = fed_in_pieces(CoquiFeed(), COQUI, hard_cuts(COQUI))
    assert [b.span() for b in blocks] == [Span(1, 0, 4, 31), Span(5, 0, 6, 28), Span(8, 0, 9, 26)]
    assert blocks[0].points == (("epoch", "EPOCH", 10, 0.0), ("loss", "loss", 10, 0.5), ("lr", "current_lr", 10, 1e-05))
    assert blocks[1].points == (("eval_loss", "avg_loss", 10, 0.75),)
    assert blocks[2].points == (("epoch", "EPOCH", 20, 1.0), ("loss", "loss", 20, 0.25))
    run = read_coqui_log("trainer_0_log.txt", COQUI)
    assert run.record_spans.start_lines == (1, 5, 8) and run.record_spans.end_lines == (4, 6, 9)
    assert run.series[LOSS].steps == (10, 20)


def test_mlflow_lines_and_an_undecodable_byte_is_named_as_the_whole_read_names_it(tmp_path):
    lines = fed_in_pieces(MetricFileFeed("loss"), MLFLOW, hard_cuts(MLFLOW))
    assert [(p.line, p.width, p.value, p.step) for p in lines] == [
        (0, 19, 0.5, 1), (1, 17, None, 2), (3, 20, 0.25, 3)]
    run = tmp_path / "run"
    (run / "metrics").mkdir(parents=True)
    (run / "meta.yaml").write_text("name: x\n")
    data = b"1 0.5 1\n" * 3 + b"1 0.\xe9 2\n"
    (run / "metrics" / "loss").write_bytes(data)
    with pytest.raises(ReadError) as whole:
        read_mlflow_run(run)
    assert str(whole.value).endswith("cannot read ('utf-8' codec can't decode byte 0xe9 in position 28: "
                                     "invalid continuation byte)")
    for cut in range(1, len(data)):
        feed = MetricFileFeed(str(run / "metrics" / "loss"))
        with pytest.raises(ReadError) as pieces:
            feed.feed(data[:cut])
            feed.feed(data[cut:])
            feed.finish()
        assert str(pieces.value) == str(whole.value), cut


@pytest.mark.parametrize("bom", [b"", b"\xef\xbb\xbf"])
def test_a_csv_that_is_not_utf8_fails_at_the_same_byte_however_it_is_cut(bom):
    data = bom + "step,loss\n1,2.5\n2,caf\u00e9\n".encode() + b"3,\xff\n"
    with pytest.raises(ReadError) as whole:
        read_metrics_csv("m.csv", data)
    # As Python's whole-file decode counts it: from the end of the BOM.
    assert str(whole.value) == "m.csv: not UTF-8 text (byte 26)"
    for cut in range(1, len(data)):
        with pytest.raises(ReadError) as pieces:
            fed_in_pieces(CsvFeed("m.csv"), data, [cut])
        assert str(pieces.value) == str(whole.value), cut


def _watched_in_pieces(log, data: bytes, rng: random.Random):
    """`watch` polled after each of 80 appends of `data` to `log`: half of the cuts where
    a reader is most easily wrong (inside a CRLF or a UTF-8 character), half at random."""
    cuts = sorted(rng.sample(hard_cuts(data), 40) + rng.sample(range(1, len(data)), 40))
    log.write_bytes(b"")
    w = Watch(log, Config(), WatchOptions(interval=0.0), out=io.StringIO(), err=io.StringIO())
    last = 0
    for cut in [*cuts, len(data)]:
        with log.open("ab") as fh:
            fh.write(data[last:cut])
        last = cut
        w.poll_once()
    return w.logs[str(log)]


def test_watch_fed_a_growing_csv_in_odd_pieces_says_what_the_whole_read_says(tmp_path):
    """Appends cut inside CRLFs, UTF-8 characters and quoted fields: watch's verdict is
    the CLI's over the same bytes."""
    log = tmp_path / "metrics.csv"
    rows = [f'{s},{2.0 / (1 + s / 50):.6f},"caf\u00e9\r\n{s}"\r\n' for s in range(1, 300)]
    data = ("step,loss,comment\r\n" + "".join(rows)).encode("utf-8")
    watched = _watched_in_pieces(log, data, random.Random(7))
    assert watched.tailer.live.records == 299
    assert watched.report is not None
    assert report_json(watched.report) == report_json(judge_file(log, Config()))


def test_watch_fed_a_growing_jsonl_in_odd_pieces_says_what_the_whole_read_says(tmp_path):
    log = tmp_path / "metrics.jsonl"
    lines = [json.dumps({"step": s, "loss": 2.0 / (1 + s / 50), "ünit": "café"}, ensure_ascii=False) + "\r\n"
             for s in range(1, 300)]
    lines[40] = "not json\r\n"
    data = "".join(lines).encode("utf-8")
    watched = _watched_in_pieces(log, data, random.Random(11))
    assert watched.tailer.live.records == 298
    assert watched.report is not None
    assert report_json(watched.report) == report_json(judge_file(log, Config()))


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "coqui"])
def test_a_batch_indexes_like_the_list_of_its_records(fmt):
    make, data = FEEDS[fmt]
    feed = make()
    batch = feed.feed(data)
    records = list(batch)
    assert len(records) == len(batch) >= 2
    assert [batch[i] for i in range(-len(batch), 0)] == records
    assert list(batch[1:]) == records[1:]
    with pytest.raises(IndexError):
        batch[len(batch)]


def test_watch_says_what_doctor_says_of_an_unreadable_csv_until_it_is_rewritten(tmp_path):
    log = tmp_path / "metrics.csv"
    good = "step,loss\n" + "".join(f"{s},{2.0 / (1 + s / 50):.6f}\n" for s in range(1, 40))
    log.write_bytes(good.encode() + b"40,\xff\n")
    w = Watch(log, Config(), WatchOptions(interval=0.0), out=io.StringIO(), err=io.StringIO())
    w.poll_once()
    whole = judge_file(log, Config())
    assert whole.verdict.value == "NOT-CHECKED"
    report = w.logs[str(log)].report
    assert report is not None and report_json(report) == report_json(whole)
    with log.open("ab") as fh:  # more rows do not make the log readable
        fh.write(b"41,1.0\n")
    w.poll_once()
    report = w.logs[str(log)].report
    assert report is not None and report.verdict.value == "NOT-CHECKED"
    log.write_text(good, encoding="utf-8")  # rewritten from the start: read afresh
    w.poll_once()
    report = w.logs[str(log)].report
    assert report is not None and report_json(report) == report_json(judge_file(log, Config()))
    assert report.verdict.value != "NOT-CHECKED"
