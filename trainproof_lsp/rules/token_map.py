"""Rules over the trained-tokens map: what the run learns from each dataset row.

Every check reads the `TokenMap` of one dataset file (readers/token_map.py builds it with the
run's tokenizer, chat template, masking and max length); none opens a file or loads a
tokenizer. Rows that train on nothing are TP-PRE-NO-TRAINABLE-TOKENS (rules/tokens.py),
judged from the map when there is one. The registry entries are MAP_RULES; preflight lists
them as skipped, with the reason, whenever no map was built.
"""

from __future__ import annotations

from array import array
from typing import Any, Iterator, Sequence

from ..core.model import Hit, Level, Location, Span
from ..readers.token_map import (DOUBLE_BOS, EOS_PRESENT, EOS_TRAINED, NOT_MAPPED, PAIR_IDENTICAL, PAIR_IDENTICAL_BEFORE,
                                 SPANS_UNKNOWN, TEMPLATE_MISSING, TokenMap)
from .base import Family, NoLimits, Rule, Skip

# The map of one dataset file; the rules need nothing besides it.
MAP: Family[TokenMap, object] = Family("dataset")

# Lines a file-wide finding names in its evidence and message: enough to find the rows,
# few enough to read (the share says how many there are).
SHOWN_LINES = 10
# Bars of the length histogram (the report's and the editor's): a glance, not a plot.
HISTOGRAM_BINS = 16


def _at(m: TokenMap, line: int) -> Location:
    return Location(path=m.path, span=Span(line, 0, line, 0))


def _share(n: int, m: TokenMap) -> float:
    return round(n / m.rows, 6) if m.rows else 0.0


def _pct(x: float) -> str:
    return f"{100 * x:.3g}%"


def _lines(lines: Sequence[int]) -> str:
    shown = ", ".join(str(i + 1) for i in lines[:SHOWN_LINES])
    return shown + (f" and {len(lines) - SHOWN_LINES} more" if len(lines) > SHOWN_LINES else "")


def _sampled(m: TokenMap) -> str:
    return f" (a sample: every {m.stride}th row)" if m.stride > 1 else ""


def _flagged(m: TokenMap, flag: int, without: int = 0) -> list[int]:
    return [i for i, f in enumerate(m.flags) if f & flag and not f & without and m.trained[i] != NOT_MAPPED]


# --- responses cut short ---------------------------------------------------------------------

CUT_DOC = """Truncation cuts the trained part of some rows short.

What it flags: rows of which the run trains on fewer tokens after truncation to the max
length than before — the end of the response (and its EOS) is cut with the default
`keep_start` truncation; the row still trains on something. One finding for the file at
the first such row, with the share of mapped rows and their lines.
Why it matters: the model learns answers that stop mid-sentence and never sees the EOS of
those rows; a large share means the max length is too small for the data (the length
histogram in TP-MAP-LENGTHS shows by how much).
What it does not mean: a broken row. Rows cut to nothing are TP-PRE-NO-TRAINABLE-TOKENS.
Packing (nothing is cut) is read from the run's config when given.
"""


def check_cut(m: TokenMap, limits: NoLimits, ctx: object) -> Iterator[Hit]:
    if m.masking.max_len is None:
        raise Skip("no max length")
    cut = [i for i, (a, b) in enumerate(zip(m.trained, m.before)) if a != NOT_MAPPED and 0 < a < b]
    if not cut:
        return
    lost = sum(m.before[i] - m.trained[i] for i in cut)
    yield Hit(message=f"{len(cut)} of {m.rows} mapped rows ({_pct(_share(len(cut), m))}){_sampled(m)} lose "
                      f"trained tokens to truncation at max length {m.masking.max_len} ({m.masking.truncation}); "
                      f"{lost} trained token(s) cut in all; lines {_lines(cut)}",
              evidence={"rows": len(cut), "share": _share(len(cut), m), "mapped_rows": m.rows,
                        "trained_tokens_cut": lost, "max_len": m.masking.max_len, "first_line": cut[0] + 1},
              location=_at(m, cut[0]))


CUT = Rule(id="TP-MAP-RESPONSE-CUT", name="response-cut", level=Level.WARN, doc=CUT_DOC, check=check_cut, family=MAP)

# --- EOS never trained -----------------------------------------------------------------------

EOS_DOC = """No row trains on the EOS token: the model never learns to stop.

What it flags: a mapped file whose rows hold the EOS token and carry loss, but not one of
them has a trained EOS token (rows without any EOS are the template's fault:
TP-TOK-TEMPLATE-NO-EOS). The usual causes, each named in the message when it applies: the pad token is the
EOS and the collator masks every label equal to the pad id (transformers'
DataCollatorForLanguageModeling, older TRL's completion-only collator); a chat template
whose {% generation %} block (or the turn it trains on) ends before the EOS; every row cut
before its EOS by truncation.
Why it matters: generation runs to the length limit at inference, repeating itself; the
loss looks healthy throughout training.
What it does not mean: anything when the run sets its own EOS (TRL's `eos_token`) or pads
with a separate token — pass the run's config with `--train-config` so the map uses it.
"""


def check_eos(m: TokenMap, limits: NoLimits, ctx: object) -> Iterator[Hit]:
    if m.eos_token is None:
        raise Skip("the tokenizer names no eos_token")
    trained = [i for i, t in enumerate(m.trained) if t != NOT_MAPPED and t > 0]
    if not any(m.flags[i] & EOS_PRESENT for i in trained):
        # No row holds an EOS at all: the template's fault (TP-TOK-TEMPLATE-NO-EOS), not the masking's.
        raise Skip("no mapped row holds the EOS token")
    if any(m.flags[i] & EOS_TRAINED for i in trained):
        return
    masked = m.pad_is_eos and (m.masking.pad_masked or m.masking.response_template is not None)
    why = (f"the pad token is the EOS ({m.eos_token!r}) and the collator masks every label equal to the pad id"
           if masked else f"no trained span of any row reaches the EOS {m.eos_token!r} (the trained block or "
                          "turn ends before it, or truncation cuts it)")
    yield Hit(message=f"none of the {len(trained)} rows that train on something{_sampled(m)} trains on the EOS "
                      f"token: {why}",
              evidence={"rows_trained": len(trained), "pad_is_eos": m.pad_is_eos, "pad_masked_by_id": masked},
              location=_at(m, trained[0]))


EOS = Rule(id="TP-MAP-EOS-NEVER-TRAINED", name="eos-never-trained", level=Level.FAIL, doc=EOS_DOC, check=check_eos,
           family=MAP)

# --- response template not found --------------------------------------------------------------

TEMPLATE_DOC = """The response template of a completion-only collator is not found in a row.

What it flags: a row in whose tokens (after truncation) the response template's tokens do
not occur. The collator tokenises the template alone; inside the row the same text often
tokenises differently (a space or newline before it merges into another token), or
truncation cut it off. One finding per row, with the share of mapped rows.
Why it matters: the collator ("Could not find response key ... This instance will be
ignored in loss calculation") masks every label of the row: it trains on nothing. When
every row misses it, the loss is 0 or NaN from the first step.
What it does not mean: a broken row; give the template as token ids taken from a
tokenised row (or with the context that precedes it) and the map finds it.
"""


def check_template(m: TokenMap, limits: NoLimits, ctx: object) -> Iterator[Hit]:
    if m.masking.response_template is None:
        raise Skip("no response template (completion-only collator)")
    missing = _flagged(m, TEMPLATE_MISSING)
    for line in missing:
        yield Hit(message=f"line {line + 1}: the response template {m.masking.response_template!r} tokenised alone "
                          f"is not in the row's {m.kept[line]} tokens; the collator masks the whole row "
                          f"({len(missing)} of {m.rows} rows, {_pct(_share(len(missing), m))})",
                  evidence={"line": line + 1, "tokens": m.kept[line], "rows_in_file": len(missing),
                            "share": _share(len(missing), m)},
                  location=_at(m, line))


TEMPLATE = Rule(id="TP-MAP-RESPONSE-TEMPLATE-MISSING", name="response-template-missing", level=Level.FAIL,
                doc=TEMPLATE_DOC, check=check_template, family=MAP)

# --- preference pairs identical after truncation ------------------------------------------------

PAIR_DOC = """A preference pair's chosen and rejected are the same tokens after truncation.

What it flags: a preference row whose prompt + chosen and prompt + rejected differ as
written but become the same token sequence once cut to the max length (the answers
differ only after the cut). One finding per row, with the share of pairs.
Why it matters: DPO/ORPO's loss pushes chosen up and rejected down; on identical
sequences the two log-probabilities are equal, the pair's gradient only adds noise and
its margin is stuck at 0 (reports found 7% of a public preference slice like this).
What it does not mean: pairs that are identical as written — those are the dataset
rules' (chosen equals rejected) — or pairs cut to their prompt alone, which train on
nothing (TP-PRE-NO-TRAINABLE-TOKENS).
"""


def check_pairs(m: TokenMap, limits: NoLimits, ctx: object) -> Iterator[Hit]:
    if not m.pairs:
        raise Skip("no preference pairs")
    # A pair cut to its prompt alone trains on nothing: TP-PRE-NO-TRAINABLE-TOKENS's (one fault, one finding).
    same = [i for i in _flagged(m, PAIR_IDENTICAL, without=PAIR_IDENTICAL_BEFORE) if m.trained[i] > 0]
    share = round(len(same) / m.pairs, 6)
    for line in same:
        yield Hit(message=f"line {line + 1}: chosen and rejected are the same {m.kept[line]} tokens after truncation "
                          f"to {m.masking.max_len} ({m.masking.truncation}); they differ only after the cut "
                          f"({len(same)} of {m.pairs} pairs, {_pct(share)})",
                  evidence={"line": line + 1, "tokens": m.kept[line], "chosen_tokens": m.tokens[line],
                            "rejected_tokens": m.second[line], "rows_in_file": len(same), "share": share},
                  location=_at(m, line))


PAIRS = Rule(id="TP-MAP-PAIR-IDENTICAL", name="pair-identical-after-truncation", level=Level.FAIL, doc=PAIR_DOC,
             check=check_pairs, family=MAP)

# --- double BOS ------------------------------------------------------------------------------

BOS_DOC = """The run's encoding of a row starts with the BOS token twice.

What it flags: rows whose token ids, encoded as the trainer encodes them, begin with two
BOS tokens — typically text already rendered with a chat template that writes the BOS
(`{{ bos_token }}`) and then encoded with special tokens added (tokenizer(text), TRL's
path for a `text` column). One finding for the file, with the share and the lines.
Why it matters: the model is trained on a sequence start it never sees at inference
(apply_chat_template adds none); quality drops a little on every row, silently.
What it does not mean: anything when the rows are conversations the trainer renders
itself (apply_chat_template(tokenize=True) adds no special tokens).
"""


def check_bos(m: TokenMap, limits: NoLimits, ctx: object) -> Iterator[Hit]:
    double = _flagged(m, DOUBLE_BOS)
    if not double:
        return
    yield Hit(message=f"{len(double)} of {m.rows} mapped rows ({_pct(_share(len(double), m))}){_sampled(m)} start "
                      f"with the BOS token twice as the run encodes them; lines {_lines(double)}",
              evidence={"rows": len(double), "share": _share(len(double), m), "first_line": double[0] + 1},
              location=_at(m, double[0]))


BOS = Rule(id="TP-MAP-DOUBLE-BOS", name="double-bos", level=Level.WARN, doc=BOS_DOC, check=check_bos, family=MAP)

# --- the lengths -------------------------------------------------------------------------------

LENGTHS_DOC = """The token map's summary: lengths, their histogram, the masking it used.

What it flags: nothing wrong — it says how many rows were mapped (all, or the
`--sample`), the loss mode, max length and truncation side and where each came from (the
script or config, the command line, or the trainer's default), the token lengths'
p50/p95/p99 and maximum, the share of rows over the max length, and the trained tokens in
all. The histogram (evidence `histogram`: bin edges; counts) is drawn by the HTML report
and the editor's lens.
Why it matters: a max length below p95 cuts many rows; one far above p99 wastes memory;
a masking read from the wrong place makes every other map finding wrong, so the report
names its source.
What it does not mean: a problem — it is INFO and never changes a verdict.
"""


def percentile(sorted_values: Sequence[int], q: float) -> int:
    """The nearest-rank percentile (q in 0..100) of sorted values."""
    if not sorted_values:
        return 0
    # The rank ceil(n * q / 100) is at most n for q <= 100: only q = 0 needs a floor.
    k = max(0, -(-len(sorted_values) * q // 100) - 1)
    return sorted_values[int(k)]


def histogram(lengths: Sequence[int], max_len: int | None, bins: int = HISTOGRAM_BINS) -> tuple[list[int], list[int]]:
    """(edges, counts): `bins` equal bins from 0 to past the longest row (and the max
    length), on whole-token edges."""
    top = max([*lengths, max_len or 0, 1])
    width = max(1, -(-top // bins))
    edges = [i * width for i in range(bins + 1)]
    counts = [0] * bins
    for n in lengths:
        counts[min(bins - 1, n // width)] += 1
    return edges, counts


def histogram_text(edges: Sequence[int], counts: Sequence[int]) -> str:
    """The histogram as evidence: "edges;counts", comma-separated (read by output/html.py)."""
    return ",".join(map(str, edges)) + ";" + ",".join(map(str, counts))


def parse_histogram(text: str) -> tuple[list[int], list[int]] | None:
    try:
        a, b = text.split(";")
        edges, counts = [int(x) for x in a.split(",")], [int(x) for x in b.split(",")]
    except ValueError:
        return None
    return (edges, counts) if len(edges) == len(counts) + 1 else None


def length_stats(m: TokenMap) -> dict[str, Any]:
    lengths = array("i", sorted(max(a, b) for a, b in zip(m.tokens, m.second) if a != NOT_MAPPED))
    over = sum(1 for n in lengths if m.masking.max_len is not None and n > m.masking.max_len)
    edges, counts = histogram(lengths, m.masking.max_len)
    trained = sum(t for t in m.trained if t > 0)
    return {"rows": len(lengths), "p50": percentile(lengths, 50), "p95": percentile(lengths, 95),
            "p99": percentile(lengths, 99), "max": lengths[-1] if lengths else 0, "over_max_len": over,
            "share_over_max_len": round(over / len(lengths), 6) if lengths else 0.0,
            "trained_tokens": trained, "histogram": histogram_text(edges, counts)}


def check_lengths(m: TokenMap, limits: NoLimits, ctx: object) -> Iterator[Hit]:
    if not m.rows:
        raise Skip("no row could be mapped")
    s = length_stats(m)
    ml = m.masking.max_len
    sample = f"a sample of {m.rows} of {m.records} rows (--sample {m.sample}, every {m.stride}th row)" \
        if m.stride > 1 else f"{m.rows} rows"
    sources = "; ".join(f"{k} from {w}" for k, w in m.masking.sources)
    over = f"{s['over_max_len']} ({_pct(s['share_over_max_len'])}) over max length {ml} ({m.masking.truncation})" \
        if ml is not None else "no max length"
    unknown = sum(1 for f in m.flags if f & SPANS_UNKNOWN)
    yield Hit(message=f"token map of {sample}: loss {m.loss}; tokens p50 {s['p50']}, p95 {s['p95']}, p99 {s['p99']}, "
                      f"max {s['max']}; {over}; {s['trained_tokens']} trained tokens"
                      + (f"; {unknown} row(s) whose generation blocks could not be told from their text" if unknown
                         else "")
                      + (f" [{sources}]" if sources else ""),
              evidence={**s, "max_len": ml, "sample": m.sample, "stride": m.stride, "records": m.records},
              location=Location(path=m.path, span=Span(0, 0, 0, 0)))


LENGTHS = Rule(id="TP-MAP-LENGTHS", name="token-map-lengths", level=Level.INFO, doc=LENGTHS_DOC,
               check=check_lengths, family=MAP)

MAP_RULES: tuple[Rule[TokenMap, object], ...] = (CUT, EOS, TEMPLATE, PAIRS, BOS, LENGTHS)
RULES = MAP_RULES
