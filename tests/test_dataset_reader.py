"""The dataset reader's fast path, its broken-line handling and its incremental form,
checked against the reference path and the full scan."""

from __future__ import annotations

import io
import json
import random

import pytest

import trainproof_lsp.readers.dataset as ds
from trainproof_lsp.readers.dataset_session import DatasetFeed


def _row(fmt: str, i: int) -> dict:
    if fmt == "sharegpt":
        return {"conversations": [{"from": "human", "value": f"q {i}"}, {"from": "gpt", "value": f"a {i}"}]}
    if fmt == "alpaca":
        return {"instruction": f"do {i}", "input": "" if i % 2 else f"in {i}", "output": f"done {i}"}
    if fmt == "preference":
        return {"prompt": f"p {i}", "chosen": f"good {i}", "rejected": f"bad {i}"}
    if fmt == "prompt-completion":
        return {"prompt": f"p {i}", "completion": f"c {i}", "id": i}
    if fmt == "chat":
        return {"messages": [{"role": "user", "content": f"q {i}"}, {"role": "assistant", "content": f"a {i}"}]}
    return {"text": f"row {i}"}


# A fault of each kind the quick checks must send to the reference path, by format.
_FAULTS = {
    "sharegpt": [{"conversations": [{"from": "gpt", "value": "first"}, {"from": "human", "value": "q"}]},
                 {"conversations": [{"from": "human", "value": "q"}, {"from": "gpt", "value": "   "}]},
                 {"conversations": [{"from": "human", "value": "q"}, {"from": "robot", "value": "a"}]}],
    "alpaca": [{"instruction": "  ", "output": "x"}, {"instruction": "i", "input": 3, "output": "x"},
               {"instruction": "i"}, {"instruction": "i", "output": "o", "text": "also text"}],
    "preference": [{"prompt": "p", "chosen": "same", "rejected": "same"}, {"chosen": "c", "rejected": ""},
                   {"prompt": None, "chosen": "c", "rejected": "r"}, {"chosen": "only"}],
    "prompt-completion": [{"prompt": "p", "completion": " "}, {"prompt": "p"}, {"prompt": 1, "completion": "c"}],
    "chat": [{"messages": [{"role": "user", "content": "q"}]}, {"messages": None}],
    "text": [{"text": ""}, {"text": None}, {"id": 1}],
}


def _file(formats: list[str], n: int, seed: int, block: int) -> bytes:
    rng = random.Random(seed)
    lines = [json.dumps(_row(formats[(i // block) % len(formats)], i)) for i in range(n)]
    for line in rng.sample(range(n), n // 25):
        fmt = formats[(line // block) % len(formats)]
        pick = rng.random()
        if pick < 0.1:
            lines[line] = lines[line][:-3]  # cut short: not JSON
        elif pick < 0.15:  # blank lines in some files, two values on a line in others
            lines[line] = rng.choice(["", "  ", "\r", "123"] if seed % 2 else
                                     [lines[line] + lines[line], "123", lines[line] + " 7"])
        elif pick < 0.3:
            lines[line] = lines[max(0, line - rng.randint(1, 40))]  # an exact copy
        else:
            lines[line] = json.dumps(rng.choice(_FAULTS[fmt]))
    return ("\n".join(lines) + "\n").encode()


def _chunks_decoded(monkeypatch) -> list[int]:
    """The lengths of the pieces the fast path is given, in order, from now on."""
    seen: list[int] = []
    orig = ds._Scanner.fast

    def spy(self, base, chunk, lines=None):
        seen.append(len(chunk))
        return orig(self, base, chunk, lines)

    monkeypatch.setattr(ds._Scanner, "fast", spy)
    return seen


def _facts(scan: ds.DatasetScan) -> dict:
    # (a feed keeps one hash slot per editor line: the "" after a final newline too)
    return {"problems": [(p.line, p.kind, p.start, p.end, p.evidence, p.message) for p in scan.problems],
            "dups": scan.duplicates, "near": scan.near_duplicates, "formats": scan.formats,
            "records": scan.records, "lines": scan.lines, "blank": scan.blank_lines,
            "exact": scan.exact[:scan.lines].tobytes(), "nearh": scan.near[:scan.lines].tobytes(),
            "pairs": scan.conversational_pairs}


@pytest.mark.parametrize("formats,block", [
    (["sharegpt"], 1), (["alpaca"], 1), (["preference"], 1), (["prompt-completion"], 1),
    (["alpaca", "preference", "sharegpt", "text", "chat", "prompt-completion"], 1),
    (["alpaca", "preference", "sharegpt", "text", "chat", "prompt-completion"], 97),
])
def test_fast_path_states_every_fact_as_the_reference_path_does(formats, block, monkeypatch):
    monkeypatch.setattr(ds, "CHUNK_BYTES", 1 << 13)  # many chunks
    data = _file(formats, 3000, seed=len(formats) * 31 + block, block=block)
    fast = _facts(ds.scan_dataset("mem.jsonl", data))
    monkeypatch.setattr(ds._Scanner, "fast", lambda self, base, chunk, lines=None: -1)
    assert fast == _facts(ds.scan_dataset("mem.jsonl", data))
    assert fast["problems"], "the file has faults"


def test_a_broken_line_costs_its_own_check_and_the_lines_before_it_once_more(monkeypatch):
    """The typed decoder sees the chunk once, the lines before the broken one again, and
    the lines after it once: never the whole chunk twice, never the tail in pieces."""
    rows = [json.dumps(_row("chat", i)) for i in range(1500)]
    broken = 600
    rows[broken] = rows[broken][:-5]
    data = ("\n".join(rows) + "\n").encode()
    monkeypatch.setattr(ds, "CHUNK_BYTES", len(data) + 1)  # one chunk
    seen = _chunks_decoded(monkeypatch)
    scan = ds.scan_dataset("mem.jsonl", data)
    before = sum(len(r) + 1 for r in rows[:broken])
    after = len(data) - before - len(rows[broken]) - 1
    assert seen == [len(data), before, after]
    assert [(p.line, p.kind) for p in scan.problems] == [(broken, "malformed")]
    assert scan.records == 1499


@pytest.mark.parametrize("odd", ["", "   ", '{"text": "one"} {"text": "two"}', '{"text": "a"}[1]'])
def test_a_blank_line_or_two_values_on_a_line_are_the_only_lines_read_by_the_reference_path(odd, monkeypatch):
    """Blank lines leave the chunk to the stream decoder, which passes over them: its rows
    are placed around blank lines (one decode more). A line with two values is named by
    the array decoder's error. Only that line goes the reference way."""
    from trainproof_lsp.readers import dataset_fast

    rows = [json.dumps(_row("alpaca", i)) for i in range(1200)]
    odd_line = 777
    rows[odd_line] = odd
    data = ("\n".join(rows) + "\n").encode()
    monkeypatch.setattr(ds, "CHUNK_BYTES", len(data) + 1)  # one chunk
    decoded = _chunks_decoded(monkeypatch)
    referred: list[int] = []
    orig_line = dataset_fast.scan_line

    def spy_line(line, raw, *fields):
        referred.append(line)
        return orig_line(line, raw, *fields)
    monkeypatch.setattr(dataset_fast, "scan_line", spy_line)
    scan = ds.scan_dataset("mem.jsonl", data)
    assert referred == [odd_line]
    if odd.strip():
        assert [(p.line, p.kind) for p in scan.problems] == [(odd_line, "malformed")]
        assert sum(decoded) <= 3 * len(data)
    else:
        assert scan.problems == () and scan.blank_lines == 1
        assert decoded == [len(data)]
    monkeypatch.setattr(ds._Scanner, "fast", lambda self, base, chunk, lines=None: -1)
    assert _facts(scan) == _facts(ds.scan_dataset("mem.jsonl", data))


# Lines that leave the typed decoder as many rows as lines although they are not one
# object each: a blank line (or an object spread over two lines) beside a line holding
# two objects. Each case: {line: text} put into 20 text rows.
_COMPENSATING = {
    "blank line": {5: "", 12: "{11}{11}"},
    "spaces only": {5: "   ", 12: "{11} {11}"},
    "object over two lines": {5: '{"text":', 6: '"split"}', 12: "{11}\t{11}"},
    "object over two lines, braces at the ends": {5: '{"text": "a", "id": {"k": 1}', 6: '}', 12: "{11}{11}"},
    "two blank lines, three objects": {3: "", 4: "", 12: "{11} {11} {11}"},
    # (rows then match the lines that are not blank: the braces around lines tell)
    "a blank line, an object over two lines, two objects": {3: "", 5: '{"text":', 6: '"x"}', 12: "{11}{11}"},
    "two objects with a comma between": {12: "{11}, {11}"},
    "two objects with a comma between, a blank line": {5: "", 12: "{11},{11}"},
    # (the array's rows then run one ahead of the lines: its "row 9" is line 8)
    "two objects with a comma between, then a line that is not an object": {3: "{11},{11}", 8: "[1]"},
    "a line cut short, then one with NaN": {4: '{"text": "cut', 9: '{"text": NaN}'},
    # (a newline inside a string: the array's comma must not join the two lines' halves)
    "a string over two lines, two objects with a comma between": {4: '{"text": "a', 5: '"}', 12: "{11},{11}"},
}


@pytest.mark.parametrize("crlf", [False, True], ids=["lf", "crlf"])
@pytest.mark.parametrize("case", sorted(_COMPENSATING))
def test_lines_that_leave_as_many_rows_as_lines_keep_their_lines(case, crlf, monkeypatch):
    rows = [json.dumps({**_row("text", i), "id": i}) for i in range(20)]  # (an "id" may hold an object)
    for line, text in _COMPENSATING[case].items():
        rows[line] = text.replace("{11}", rows[11])
    data = (("\r\n" if crlf else "\n").join(rows) + "\n").encode()
    fast = ds.scan_dataset("mem.jsonl", data)
    monkeypatch.setattr(ds._Scanner, "fast", lambda self, base, chunk, lines=None: -1)
    reference = ds.scan_dataset("mem.jsonl", data)
    assert _facts(fast) == _facts(reference)
    assert {p.line for p in reference.problems} >= {k for k, t in _COMPENSATING[case].items() if t.strip()}


def _mixed_file(rng: random.Random) -> bytes:
    """Rows of one format mostly, with every kind of odd line among them: blank and
    spaces-only lines, faults of each format, two objects on a line (with and without a
    comma or blanks between), a row cut in two anywhere (inside a string too), a
    pretty-printed row, NaN, an array; LF or CRLF, a last newline or not."""
    fmt = rng.choice(list(_FAULTS))
    rows: list[str] = []
    for i in range(rng.randrange(5, 120)):
        f = fmt if rng.random() < 0.8 else rng.choice(list(_FAULTS))
        row = json.dumps(_row(f, i))
        r = rng.random()
        if r < 0.06:
            rows.append(rng.choice(["", "   "]))
        elif r < 0.09:
            rows.append(json.dumps(rng.choice(_FAULTS[f])))
        elif r < 0.11:
            rows.append(row + rng.choice(["", " ", ",", ", ", "\t"]) + row)
        elif r < 0.13:
            cut = rng.randrange(1, len(row))
            rows += [row[:cut], row[cut:]]
        elif r < 0.14:
            rows += json.dumps(_row(f, i), indent=1).split("\n")
        elif r < 0.15:
            rows.append(rng.choice(['{"text": NaN}', "[" + row + "]"]))
        else:
            rows.append(row)
    nl = rng.choice(["\n", "\r\n"])
    return (nl.join(rows) + (nl if rng.random() < 0.8 else "")).encode()


@pytest.mark.parametrize("seed", range(300))
def test_mixed_odd_lines_state_every_fact_as_the_reference_path_does(seed, monkeypatch):
    import trainproof_lsp.readers.dataset_scan as dataset_scan

    rng = random.Random(seed)
    data = _mixed_file(rng)
    block = rng.choice([97, 300, 1000, 1 << 16])
    fast = dataset_scan.scan_dataset("mem.jsonl", data, block_bytes=block)
    monkeypatch.setattr(ds._Scanner, "fast", lambda self, base, chunk, lines=None: -1)
    assert _facts(fast) == _facts(dataset_scan.scan_dataset("mem.jsonl", data, block_bytes=block))


@pytest.mark.parametrize("line", ['  {"text": "indented"}', '{"text": "trailing"}  ', '\t{"text": "tab"}\t'])
def test_blanks_around_a_line_s_braces_keep_the_fast_path(line, monkeypatch):
    """A line with spaces around its object is still one object: the chunk is decoded
    once, not halved down to the line."""
    rows = [json.dumps(_row("text", i)) for i in range(40)]
    rows[17] = line
    data = ("\n".join(rows) + "\n").encode()
    calls = _chunks_decoded(monkeypatch)
    scan = ds.scan_dataset("mem.jsonl", data)
    assert calls == [len(data)] and scan.problems == () and scan.records == 40


def _edit(rng: random.Random, lines: list[str]) -> tuple[int, int, list[str]]:
    """A random edit: lines [s, e] replaced by new ones."""
    s = rng.randrange(len(lines))
    e = min(len(lines) - 1, s + rng.choice([0, 0, 1, 3]))
    new = []
    for _ in range(rng.choice([0, 1, 1, 2, 4])):
        pick = rng.random()
        if pick < 0.3:
            new.append(lines[rng.randrange(len(lines))])  # a copy of another line
        elif pick < 0.5:
            new.append(json.dumps(rng.choice(_FAULTS[rng.choice(list(_FAULTS))])))
        elif pick < 0.6:
            new.append("")
        elif pick < 0.7:
            new.append('{"text": "cut')
        else:
            new.append(json.dumps(_row(rng.choice(list(_FAULTS)), rng.randrange(10_000))))
    return s, e, new


@pytest.mark.parametrize("seed", range(4))
def test_the_feed_after_random_edits_equals_a_full_scan_of_the_text(seed):
    rng = random.Random(seed)
    text = _file(["chat", "text", "alpaca"], 300, seed=seed, block=40).decode()
    scan, feed = DatasetFeed.start("buf.jsonl", text)
    assert feed is not None and _facts(scan) == _facts(ds.scan_dataset("buf.jsonl", text.encode()))
    lines = text.split("\n")
    for _ in range(60):
        s, e, new = _edit(rng, lines)
        old = lines[s:e + 1]
        lines[s:e + 1] = new
        if not lines:
            lines = [""]
        feed.replace(s, e, len(new), old, lines)
        if feed.needs_rescan:
            _, feed = DatasetFeed.start("buf.jsonl", "\n".join(lines))
            assert feed is not None
        assert _facts(feed.scan()) == _facts(ds.scan_dataset("buf.jsonl", "\n".join(lines).encode()))


def test_the_feed_asks_for_a_full_scan_when_an_edit_may_make_the_buffer_a_json_array():
    text = "\n".join(json.dumps(_row("text", i)) for i in range(5)) + "\n"
    _, feed = DatasetFeed.start("buf.json", text)
    assert feed is not None
    lines = text.split("\n")
    old = lines[0:1]
    lines[0:1] = ["[" + lines[0] + ","]
    feed.replace(0, 0, 1, old, lines)
    assert feed.needs_rescan


def test_a_json_array_buffer_has_no_feed():
    scan, feed = DatasetFeed.start("buf.json", json.dumps([_row("text", 1), _row("text", 2)]))
    assert feed is None and scan.layout == "json-array" and scan.records == 2


def _range_file(tmp_path, n: int = 400) -> tuple[object, bytes]:
    rows = [json.dumps(_row(fmt, i)) for i in range(n) for fmt in ("text", "chat")]
    rows[17] = rows[3]  # a duplicate inside the first range
    rows[500] = '{"text": "cut short'
    rows[640] = json.dumps({"text": "x" * 3000})  # over the 2 KiB row cap below
    data = ("\r\n".join(rows) + "\r\n").encode()
    path = tmp_path / "train.jsonl"
    path.write_bytes(data)
    return path, data


def test_a_byte_range_of_a_file_scans_as_its_bytes_in_memory_do(tmp_path):
    path, data = _range_file(tmp_path)
    starts = [0] + [i + 1 for i in range(len(data)) if data[i:i + 1] == b"\n"][96::97]
    for start, end in zip(starts, starts[1:] + [len(data)]):
        streamed = ds.scan_dataset(path, start=start, end=end, max_row_bytes=2048)
        held = ds.scan_dataset(path, data[start:end], max_row_bytes=2048)
        assert streamed == held
    first = ds.scan_dataset(path, start=0, end=starts[1], max_row_bytes=2048)
    assert [(d.line, d.first) for d in first.duplicates] == [(17, 3)]
    alone = ds.scan_dataset(path, start=0, end=starts[1], max_row_bytes=2048, duplicates=False)
    assert alone.duplicates == () and alone.exact == first.exact and alone.problems == first.problems


def test_a_byte_range_is_streamed_in_chunks_never_read_whole(tmp_path, monkeypatch):
    import trainproof_lsp.readers.dataset_sources as sources

    path, data = _range_file(tmp_path, 4000)  # ~300 KB: more than the head read first
    reads: list[int] = []

    class Counted(io.FileIO):
        def read(self, n=-1):
            block = super().read(n)
            reads.append(len(block))
            return block

    monkeypatch.setattr(sources, "open_regular", lambda p, buffering=-1: Counted(p, "rb"))
    start = data.index(b"\n", 1000) + 1
    scan = ds.dataset_scan.scan_dataset(path, start=start, end=len(data), block_bytes=4096)
    assert scan.size == len(data) - start and scan.lines == data[start:].count(b"\n")
    # The head (the layout is judged from it) and then 4 KiB at a time, up to the range's end.
    assert sum(reads) == len(data) - start and max(reads[1:]) == 4096
