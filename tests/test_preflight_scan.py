"""The dataset scanner: the fast chunk path agrees with the reference per-line path on
every fact, faults in a multi-chunk file land on exactly their lines, and the duplicate
finders (numpy, sorted, dict) agree."""

from __future__ import annotations

import json
import random
import sys
from array import array
from operator import methodcaller

import pytest

import trainproof_lsp.readers.dataset as ds
from trainproof_lsp.core.config import Config
from trainproof_lsp.judge.preflight import judge_dataset


def _text(i: int) -> str:
    return json.dumps({"text": f"Sentence number {i} about training runs."})


def _chat(i: int, system: bool = False) -> str:
    msgs = [{"role": "system", "content": "Be brief."}] if system else []
    msgs += [{"role": "user", "content": f"Question {i}?"}, {"role": "assistant", "content": f"Answer {i}."}]
    return json.dumps({"messages": msgs})


# Faults by 0-based line: (line text, expected problem kind or duplicate marker).
def _faulty_file(n: int, seed: int = 7, block: int = 1, without: frozenset[str] = frozenset()
                 ) -> tuple[bytes, dict[int, str]]:
    """Text and chat rows alternating every `block` lines (1: the row loop's layout;
    hundreds: runs of one format, the column path's)."""
    rng = random.Random(seed)
    lines = [(_text(i) if (i // block) % 2 else _chat(i, system=i % 3 == 0)) for i in range(n)]
    faults: dict[int, str] = {}
    first_text = next(i for i in range(n) if (i // block) % 2)  # copied by the duplicate faults
    slots = rng.sample(range(max(10, first_text + 3), n), 60)
    kinds = ["malformed", "empty-text", "assistant-first", "no-assistant", "empty-assistant", "system-not-first",
             "unknown-role", "non-string", "last-not-assistant", "duplicate", "near", "missing-keys", "nan",
             "not-object", "extra-keys"]
    kinds = [k for k in kinds if k not in without]
    for k, line in enumerate(sorted(slots)):
        kind = kinds[k % len(kinds)]
        if kind == "malformed":
            lines[line] = '{"text": "broken'
        elif kind == "empty-text":
            lines[line] = json.dumps({"text": "   "})
        elif kind == "assistant-first":
            lines[line] = json.dumps({"messages": [{"role": "assistant", "content": "x"},
                                                   {"role": "user", "content": "y"},
                                                   {"role": "assistant", "content": f"z{line}"}]})
        elif kind == "no-assistant":
            lines[line] = json.dumps({"messages": [{"role": "user", "content": f"alone {line}"}]})
        elif kind == "empty-assistant":
            lines[line] = json.dumps({"messages": [{"role": "user", "content": f"q {line}"},
                                                   {"role": "assistant", "content": ""}]})
        elif kind == "system-not-first":
            lines[line] = json.dumps({"messages": [{"role": "user", "content": f"q {line}"},
                                                   {"role": "system", "content": "late"},
                                                   {"role": "assistant", "content": "a"}]})
        elif kind == "unknown-role":
            lines[line] = json.dumps({"messages": [{"role": "user", "content": f"q {line}"},
                                                   {"role": "bot", "content": "a"}]})
        elif kind == "non-string":
            lines[line] = json.dumps({"text": 12345})
        elif kind == "last-not-assistant":
            lines[line] = json.dumps({"messages": [{"role": "user", "content": f"q {line}"},
                                                   {"role": "assistant", "content": "a"},
                                                   {"role": "user", "content": "more?"}]})
        elif kind == "duplicate":
            lines[line] = lines[first_text]
        elif kind == "near":
            lines[line] = json.dumps({"text": json.loads(lines[first_text + 2])["text"].upper() + " " * (k + 1)})
        elif kind == "missing-keys":
            lines[line] = json.dumps({"prompt": f"no completion {line}"})
        elif kind == "nan":
            lines[line] = '{"text": NaN}'
        elif kind == "not-object":
            lines[line] = "[1, 2]"
        elif kind == "extra-keys":
            lines[line] = json.dumps({"text": f"t {line}", "completion": f"c {line}", "prompt": "p"})
        faults[line] = kind
    return ("\n".join(lines) + "\n").encode(), faults


_KIND = {"nan": "malformed", "not-object": "malformed", "near": "near", "duplicate": "duplicate"}


def _scan(data: bytes, *, reference: bool, monkeypatch=None) -> ds.DatasetScan:
    if reference:
        assert monkeypatch is not None
        monkeypatch.setattr(ds._Scanner, "fast", lambda self, base, chunk, lines=None: -1)
    return ds.scan_dataset("mem.jsonl", data)


def _summary(scan: ds.DatasetScan) -> dict:
    return {
        "problems": [(p.line, p.kind, p.start, p.end, p.evidence) for p in scan.problems],
        "dups": [(d.line, d.first) for d in scan.duplicates],
        "near": [(d.line, d.first) for d in scan.near_duplicates],
        "formats": scan.formats, "records": scan.records, "lines": scan.lines,
        "exact": scan.exact.tobytes(), "nearh": scan.near.tobytes(),
    }


@pytest.fixture
def big_file(monkeypatch):
    monkeypatch.setattr(ds, "CHUNK_BYTES", 1 << 16)  # many chunks from a small file
    return _faulty_file(6000)


def test_fast_path_agrees_with_reference_on_every_fact(big_file, monkeypatch):
    data, _ = big_file
    fast = _summary(_scan(data, reference=False))
    ref = _summary(_scan(data, reference=True, monkeypatch=monkeypatch))
    assert fast == ref


def test_column_path_sends_only_the_failing_rows_to_the_reference_path(monkeypatch):
    """Faults inside runs of one format: the run is hashed a column at a time and only
    the failing rows are re-read, with every fact as the reference path has it."""
    monkeypatch.setattr(ds, "CHUNK_BYTES", 1 << 16)
    # Rows with keys of other formats are left out: from the first such key on, chunks go
    # through the row loop, which covers every format.
    data, faults = _faulty_file(6000, block=300, without=frozenset({"missing-keys", "extra-keys"}))
    settled: list[int] = []
    orig = ds._Scanner._settle

    def spy(self, fmt, base, lo, n, bad, chunk):
        settled.extend(base + lo + i for i in bad)
        return orig(self, fmt, base, lo, n, bad, chunk)
    monkeypatch.setattr(ds._Scanner, "_settle", spy)
    fast = _summary(ds.scan_dataset("mem.jsonl", data))
    # Faults the typed decoder lets through (order of roles, whitespace, null or empty
    # text) are the ones a run's column checks must pick out, and only those.
    column_kinds = {"assistant-first", "no-assistant", "system-not-first", "last-not-assistant", "empty-text"}
    assert sorted(settled) == sorted(l for l, k in faults.items() if k in column_kinds)
    monkeypatch.setattr(ds._Scanner, "_settle", orig)
    assert fast == _summary(_scan(data, reference=True, monkeypatch=monkeypatch))


def test_fast_path_actually_runs(big_file, monkeypatch):
    data, _ = big_file
    calls = {"fast": 0}
    orig = ds._Scanner.fast

    def spy(self, base, chunk, lines=None):
        ok = orig(self, base, chunk, lines)
        calls["fast"] += ok is None
        return ok
    monkeypatch.setattr(ds._Scanner, "fast", spy)
    ds.scan_dataset("mem.jsonl", data)
    assert calls["fast"] >= 10


def test_every_injected_fault_is_on_its_line_and_nowhere_else(big_file):
    data, faults = big_file
    scan = ds.scan_dataset("mem.jsonl", data)
    got: dict[int, set[str]] = {}
    for p in scan.problems:
        got.setdefault(p.line, set()).add(p.kind)
    for d in scan.duplicates:
        got.setdefault(d.line, set()).add("duplicate")
    for d in scan.near_duplicates:
        got.setdefault(d.line, set()).add("near")
    want = {line: {_KIND.get(kind, kind)} for line, kind in faults.items()}
    assert got == want
    assert all(d.first == 1 for d in scan.duplicates) and all(d.first == 3 for d in scan.near_duplicates)


def test_report_lines_match_the_injected_faults(big_file):
    data, faults = big_file
    r = judge_dataset("mem.jsonl", Config(), data=data)
    lines = {f.location.span.start_line for f in r.findings if f.id != "TP-PRE-MIXED-FORMATS"}
    assert lines == set(faults)


def test_blank_lines_and_two_values_on_a_line_keep_line_numbers_right(monkeypatch):
    monkeypatch.setattr(ds, "CHUNK_BYTES", 1 << 12)
    lines = [_text(i) for i in range(400)]
    lines[100] = ""
    lines[250] = _text(1) + " " + _text(2)
    lines[300] = '{"text": "broken'
    scan = ds.scan_dataset("mem.jsonl", ("\n".join(lines) + "\n").encode())
    assert [(p.line, p.kind) for p in scan.problems] == [(250, "malformed"), (300, "malformed")]
    assert scan.blank_lines == 1 and scan.lines == 400 and scan.records == 397


def test_file_without_final_newline(monkeypatch):
    data = ("\n".join(_text(i) for i in range(50)) + "\n" + '{"text": ""}').encode()
    scan = ds.scan_dataset("mem.jsonl", data)
    assert [(p.line, p.kind) for p in scan.problems] == [(50, "empty-text")]
    assert scan.lines == 51


def test_keys_first_seen_late_are_learnt(monkeypatch):
    monkeypatch.setattr(ds, "CHUNK_BYTES", 1 << 12)
    lines = [_text(i) for i in range(500)]
    lines[450] = json.dumps({"text": "with id", "id": 450})
    lines[460] = json.dumps({"text": "x", "output": "y", "instruction": "z"})
    scan = ds.scan_dataset("mem.jsonl", ("\n".join(lines) + "\n").encode())
    assert [(p.line, p.kind) for p in scan.problems] == [(460, "extra-keys")]


def test_scan_lines_gives_per_line_facts_for_incremental_rechecks():
    facts = ds.scan_lines([(7, b'{"text": "a"}'), (8, b'{"text": ""}'), (9, b"{bad")])
    assert [f.line for f in facts] == [7, 8, 9]
    assert [f.format for f in facts] == ["text", "text", None]
    assert facts[0].exact and facts[0].near and not facts[1].exact
    assert [p.kind for p in facts[1].problems] == ["empty-text"]
    assert (facts[2].problems[0].kind, facts[2].problems[0].start) == ("malformed", 1)
    again = ds.scan_line(0, b'{"text": "a"}')
    assert again.exact == facts[0].exact  # hashes do not depend on the line number


@pytest.mark.parametrize("finder", ["dict", "sorted", "numpy"])
def test_duplicate_finders_agree(finder):
    rng = random.Random(3)
    exact = array("Q", [rng.choice([0, 5, 6, 7, *range(100, 400)]) for _ in range(3000)])
    near = array("Q", [(e // 2 if e else 0) for e in exact])
    want = ds._duplicates_dict(exact, near)
    if finder == "numpy":
        pytest.importorskip("numpy")
        got = ds._duplicates_numpy(exact, near)
    elif finder == "sorted":
        got = ds._duplicates_sorted(exact, near)
    else:
        got = want
    assert got == want
    assert want[0] and want[1]


def test_role_sequences_are_judged_once_per_shape():
    ds.role_issues.cache_clear()
    for _ in range(100):
        ds.role_issues(("system", "user", "assistant"))
    assert ds.role_issues.cache_info().misses == 1
    assert [k for k, _, _ in ds.role_issues(("assistant", "user"))] == ["assistant-first", "last-not-assistant"]
    assert [k for k, _, _ in ds.role_issues(("user", "asistant"))] == ["unknown-role"]


def test_newline_counters_agree(monkeypatch):
    """Lines are counted with numpy when it is loaded, with bytes.count otherwise."""
    pytest.importorskip("numpy")
    chunk = b'{"text": "a"}\n\n{"text": "b\\nc"}\r\n' * 50 + b'{"text": "no newline"}'
    with_numpy = ds._newline_counter(0)
    monkeypatch.delitem(sys.modules, "numpy")
    plain = ds._newline_counter(0)
    assert not isinstance(with_numpy, methodcaller) and isinstance(plain, methodcaller)
    assert with_numpy(chunk) == plain(chunk) == chunk.count(b"\n") == 150
