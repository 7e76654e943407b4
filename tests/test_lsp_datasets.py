"""The server's incremental dataset re-check agrees with a full preflight of the same
text, edit after edit (datasets.DatasetSession keeps the reader's facts up to date)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from trainproof_lsp.core.config import Config
from trainproof_lsp.server import datasets
from trainproof_lsp.server.documents import LineDocument


ROWS = [
    {"text": "Hello world."},
    {"text": "hello world."},  # a near duplicate of the first
    {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]},
    {"prompt": "2+2", "completion": "4"},
    {"text": ""},
    {"messages": [{"role": "assistant", "content": "first"}]},
]
FRAGMENTS = ["{broken", "", "   ", '{"text": "Hello world."}', '{"text": "HELLO WORLD."}',
             json.dumps(ROWS[2]), json.dumps(ROWS[3]), '{"text": 5}', "\ufeff{}", "[1, 2]"]


def full_report(path: Path, text: str):
    from trainproof_lsp.judge.preflight import judge_dataset

    return judge_dataset(path, Config(), data=text.encode("utf-8", "replace"))


def comparable(report):
    return (report.verdict, [(f.id, f.level, f.message, f.location.span, dict(f.evidence),
                              tuple((r.location.span, r.message) for r in f.related)) for f in report.findings])


def random_edit(rng: random.Random, doc: LineDocument):
    n = len(doc.lines)
    sl = rng.randrange(n)
    el = min(n - 1, sl + rng.choice([0, 0, 0, 1, 2]))
    sc = rng.randrange(len(doc.lines[sl]) + 1)
    ec = rng.randrange(len(doc.lines[el]) + 1) if el > sl else rng.randrange(sc, len(doc.lines[el]) + 1)
    pieces = rng.choice([[rng.choice(FRAGMENTS)], [rng.choice(FRAGMENTS), rng.choice(FRAGMENTS)], [""], ["x"]])
    text = rng.choice(["", "\n"]).join(pieces)
    if rng.random() < 0.3:
        text = "\n" + text
    if rng.random() < 0.3:
        text = text + "\n"
    if rng.random() < 0.5:  # whole lines, the common editor case
        sc, ec = 0, len(doc.lines[el])
    return doc.apply((sl, sc), (el, ec), text, "utf-16")


@pytest.mark.parametrize("seed", range(6))
def test_incremental_report_equals_a_full_rescan_after_random_edits(tmp_path: Path, seed: int):
    rng = random.Random(seed)
    path = tmp_path / "train.jsonl"
    rows = [json.dumps(rng.choice(ROWS)) for _ in range(60)] + ["{not json"]
    text = "\n".join(rows) + "\n"
    doc = LineDocument.from_text(path.as_uri(), 1, "jsonl", text)
    session, report = datasets.open_session(doc.path, Config(), doc.text, None)
    assert session is not None
    assert comparable(report) == comparable(full_report(doc.path, doc.text))
    for step in range(40):
        edit = random_edit(rng, doc)
        session.apply(edit, doc.lines)
        if session.needs_rescan:
            session, _ = datasets.open_session(doc.path, Config(), None, list(doc.lines))
            if session is None:
                return
        assert comparable(session.report()) == comparable(full_report(doc.path, doc.text)), \
            f"seed {seed} step {step}: {edit}"
