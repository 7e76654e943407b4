"""Dataset rules: one per kind of broken line, plus duplicates, overlap and file-level facts.

Every check reads a `DatasetScan` (readers/dataset.py) — never the file. Line rules are
thin: the reader already located each problem (line, columns) and named its numbers; the
rule decides the level and the words. The registry entries are the tuple DATASET_RULES.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

from ..core.model import Hit, Level, Location, Related, Span
from ..readers import dataset as ds
from .base import Family, NoLimits, Rule, Skip


@dataclass(frozen=True, kw_only=True)
class EarlierCopy:
    """A row of this file that repeats a row of an earlier training file (judge/cross_files.py)."""

    line: int        # 0-based, in this file
    path: str        # the earlier file, as given
    file: int        # its position among the files given (0-based)
    first_line: int  # 0-based: the first row in that file with the same content
    exact: bool      # False: equal up to ASCII letter case and outer whitespace


@dataclass(frozen=True, kw_only=True)
class DatasetContext:
    """What a dataset rule may know besides its own file: for the eval file, the scans
    of the training files it must not overlap."""

    train: tuple[ds.DatasetScan, ...] = ()
    # Lines (0-based) whose rows the run's chat template refused to render: those are
    # TP-PRE-CHAT-TEMPLATE-ERROR's (FAIL), so the alternation WARN stands down on them.
    template_rejected: frozenset[int] = frozenset()
    # Rows repeating a row of an earlier training file of the same preflight, by line.
    earlier_copies: tuple[EarlierCopy, ...] = ()

    # The eval rows found in `train`, by the eval scan's id (the scan kept beside them, so
    # the id stays its own): found once for the three rules that read them.
    _overlaps: dict[int, tuple[ds.DatasetScan, tuple["Overlap", ...]]] = field(
        default_factory=dict, compare=False, repr=False)

    def overlaps(self, scan: ds.DatasetScan) -> tuple["Overlap", ...]:
        """The eval rows of `scan` found in `train` (TP-PRE-EVAL-OVERLAP and its two
        file-level headlines read them; the search walks every training hash, which costs
        about as much as the rest of the judgement, so it runs once)."""
        if id(scan) not in self._overlaps:
            self._overlaps[id(scan)] = (scan, find_overlaps(scan, self.train))
        return self._overlaps[id(scan)][1]


# Every rule here judges one dataset file's scan (readers/dataset.py).
DATASET: Family[ds.DatasetScan, DatasetContext] = Family("dataset")


def _location(scan: ds.DatasetScan, p: ds.LineProblem) -> Location:
    return Location(path=scan.path, span=p.span)


def _line_location(scan: ds.DatasetScan, line: int) -> Location:
    return Location(path=scan.path, span=Span(line, 0, line, 0))


def _line_check(kinds: tuple[str, ...]) -> Callable[[ds.DatasetScan, NoLimits, Any], Iterator[Hit]]:
    def check(scan: ds.DatasetScan, limits: NoLimits, ctx: Any) -> Iterator[Hit]:
        for p in scan.problems:
            if p.kind in kinds:
                yield Hit(message=f"line {p.line + 1}: {p.message}",
                          evidence={"line": p.line + 1, **dict(p.evidence)},
                          location=_location(scan, p))
    return check


def _rule(rule_id: str, name: str, level: Level, doc: str, kinds: tuple[str, ...], origin: str = "new") -> Rule[ds.DatasetScan, DatasetContext]:
    return Rule(id=rule_id, name=name, level=level, doc=doc, check=_line_check(kinds),
                family=DATASET, origin=origin)


MALFORMED = _rule("TP-PRE-MALFORMED-JSONL", "malformed-jsonl", Level.FAIL, """A line is not a JSON record.

What it flags: a line that is not valid JSON (the column of the first bad character is
given; `NaN` and `Infinity` are not JSON), is not UTF-8, holds two values, or is valid
JSON but not an object (`123`, `null`, `[1, 2]`).
Why it matters: loaders either stop at the line (the run never starts, after you paid
for the GPU) or skip it silently (the data you meant to train on is not there).
What it does not mean: that the rest of the file is bad — every other line is still
checked, and each bad line is reported on its own.
""", (ds.MALFORMED,), origin="trainproof")

EMPTY_TEXT = _rule("TP-PRE-EMPTY-TEXT", "empty-text", Level.FAIL, """The training text of a row is empty.

What it flags: a `text`, `completion`, `instruction`/`output` or `chosen`/`rejected` value
that is `""`, whitespace only or `null`.
Why it matters: the row trains the model to produce nothing (or contributes only
padding); in preference data it makes one side of the pair meaningless.
What it does not mean: an empty `input` in alpaca rows (that field is optional and often
empty) or an empty `prompt` (unconditioned completions are legitimate); those are never
flagged.
""", (ds.EMPTY_TEXT,), origin="trainproof")

MISSING_KEYS = _rule("TP-PRE-MISSING-KEYS", "missing-keys", Level.FAIL, """A row lacks a key its format needs.

What it flags: a row with no training field at all (none of `text`, `messages`,
`conversations`, `prompt`/`completion`, `instruction`/`output`, `chosen`/`rejected`), or a
row of a format without one of its required keys (a `prompt` without `completion`, a
`chosen` without `rejected`, alpaca without `output`).
Why it matters: the loader raises a KeyError mid-epoch, or the collator drops the row
and nobody notices.
When every row of the file lacks its training field in the same way (a dataset in its own
shape, `question`/`answer`), that is one finding on the first row with the count, not one
a line: map the keys with `--field text=KEY` (or `fields` in `[tool.trainproof]`, the
editor's `trainproof.fields`).
What it does not mean: that optional keys are required: `input` (alpaca), `prompt`
(preference pairs) and extra metadata keys such as `id` or `source` are fine.
""", (ds.MISSING_KEYS,))


def _missing_keys(scan: ds.DatasetScan, limits: NoLimits, ctx: Any) -> Iterator[Hit]:
    """Per line, unless every row lacks a training field the same way: then one hit for
    the file, with the count (a schema the file holds throughout, not a broken line)."""
    missing = [p for p in scan.problems if p.kind == ds.MISSING_KEYS]
    # The words before the row's own keys (a message without keys is whole: split leaves it).
    shapes = {p.message.split("(keys:")[0] for p in missing}
    if scan.records >= 2 and len(missing) == scan.records and len(shapes) == 1:
        first = missing[0]
        yield Hit(message=f"every one of the {len(missing)} rows, from line {first.line + 1}: {first.message}",
                  evidence={"rows": len(missing), "records": scan.records, "line": first.line + 1, **dict(first.evidence)},
                  location=_location(scan, first))
        return
    yield from _line_check((ds.MISSING_KEYS,))(scan, limits, ctx)


MISSING_KEYS = dataclasses.replace(MISSING_KEYS, check=_missing_keys)

EXTRA_KEYS = _rule("TP-PRE-EXTRA-KEYS", "extra-keys", Level.WARN, """A row holds the keys of two formats.

What it flags: a row whose keys belong to more than one dataset format, e.g. `messages`
and `text`, or `prompt`/`completion` next to `chosen`/`rejected`.
Why it matters: trainers pick one format by their own precedence and silently ignore
the other field, which is rarely the one you meant to train on.
What it does not mean: metadata keys (`id`, `source`, `score`, ...) — only keys that name
a training field of another format count.
""", (ds.EXTRA_KEYS,))

NON_STRING = _rule("TP-PRE-NON-STRING", "non-string-field", Level.FAIL, """A text field or message is not a string.

What it flags: a training field (`text`, `prompt`, `completion`, `output`, `chosen`, ...)
holding a number, boolean or object; a `messages`/`conversations` value that is not a
list of message objects; a message `content` that is a number or object.
Why it matters: tokenizers raise on non-string input (the run dies at the first batch
that holds the row), or a `str()` of the value is trained on.
What it does not mean: `null` (that is TP-PRE-EMPTY-TEXT) or content given as a list of
parts (that is TP-PRE-CONTENT-PARTS).
""", (ds.NON_STRING, ds.BAD_MESSAGES))

CONTENT_PARTS = _rule("TP-PRE-CONTENT-PARTS", "content-parts", Level.WARN, """Message content is a list of parts.

What it flags: a message whose `content` is a list (the multimodal form
`[{"type": "text", "text": ...}, {"type": "image"}]`).
Why it matters: a multimodal processor handles it; a text-only tokenizer and most chat
templates for text models raise or render the Python list into the prompt.
What it does not mean: an error when you train a vision-language model with its
processor — then this is expected (disable the rule in your settings).
""", (ds.CONTENT_PARTS,))

UNKNOWN_ROLE = _rule("TP-PRE-UNKNOWN-ROLE", "unknown-role", Level.FAIL, """A message has a role chat templates do not know.

What it flags: a `role` outside system/user/assistant/tool/function/developer/ipython
(for ShareGPT `from`: outside system/human/gpt and the usual tool names), or a message
without a string role.
Why it matters: chat templates raise on unknown roles, or render them in a way the model
never sees at inference; a misspelt `asistant` also means that turn is not trained.
What it does not mean: that your template cannot accept custom roles — if it does on
purpose, disable the rule.
""", (ds.UNKNOWN_ROLE,))

ASSISTANT_FIRST = _rule("TP-PRE-ASSISTANT-FIRST", "assistant-first", Level.WARN, """A conversation opens with the assistant.

What it flags: the first turn after any system message is an assistant turn.
Why it matters: templates that require user/assistant alternation (Llama 2, Mistral,
Gemma) raise on it; the others train the model to speak first, unprompted — usually a
sign of swapped roles in the conversion script.
What it does not mean: a system message first (that is normal); only the first
non-system turn is judged.
""", (ds.ASSISTANT_FIRST,))

NO_ASSISTANT = _rule("TP-PRE-NO-ASSISTANT", "no-assistant-turn", Level.FAIL, """A conversation has no assistant turn.

What it flags: a `messages`/`conversations` list with no assistant (ShareGPT `gpt`) turn,
or an empty list.
Why it matters: with assistant-only loss (the TRL/Axolotl default for chat data) every
label of the row is masked: the row costs compute and teaches nothing.
What it does not mean: anything about other rows; each is judged on its own.
""", (ds.NO_ASSISTANT,))

EMPTY_ASSISTANT = _rule("TP-PRE-EMPTY-ASSISTANT", "empty-assistant", Level.FAIL, """An assistant turn is empty.

What it flags: an assistant message whose content is `""`, whitespace only, `null` or
missing (an assistant turn that carries `tool_calls` instead of content is fine).
Why it matters: the model is trained to answer with nothing — the classic cause of a
fine-tune that replies with an empty string.
What it does not mean: empty user or system turns; those are TP-PRE-EMPTY-TURN.
""", (ds.EMPTY_ASSISTANT,))

EMPTY_TURN = _rule("TP-PRE-EMPTY-TURN", "empty-turn", Level.WARN, """A user, system or tool turn is empty.

What it flags: a non-assistant message whose content is `""`, whitespace only, `null` or
missing.
Why it matters: the assistant's next answer is trained as a reply to nothing; usually a
conversion bug (a field name that did not match).
What it does not mean: a broken row for training — the row still trains; it is a WARN.
""", (ds.EMPTY_TURN,))

SYSTEM_NOT_FIRST = _rule("TP-PRE-SYSTEM-NOT-FIRST", "system-not-first", Level.WARN, """A system message appears mid-conversation.

What it flags: a system turn that is not the first turn.
Why it matters: many chat templates only render a leading system message; a later one
raises, is dropped, or is rendered as plain text the model never sees at inference.
What it does not mean: an error for templates that support it; it is a WARN.
""", (ds.SYSTEM_NOT_FIRST,))

LAST_NOT_ASSISTANT = _rule("TP-PRE-LAST-NOT-ASSISTANT", "last-not-assistant", Level.WARN, """A conversation ends with a non-assistant turn.

What it flags: a conversation that has an assistant turn but whose last turn is a user,
system or tool turn.
Why it matters: the trailing turn trains nothing (its labels are masked) and its tokens
still cost compute; often the answer was cut off when the data was exported.
What it does not mean: a conversation without any assistant turn — that is
TP-PRE-NO-ASSISTANT.
""", (ds.LAST_NOT_ASSISTANT,))

NOT_ALTERNATING_DOC = """User and assistant turns do not alternate.

What it flags: a conversation with two user turns (or two assistant turns) in a row,
tool and system turns aside (ShareGPT `human`/`gpt` count as user/assistant); the finding
names the first such pair.
Why it matters: many chat templates (Llama 2, Mistral, Gemma and others) raise
"Conversation roles must alternate" on such a row and the run stops there; the others
render two answers with no question between them, usually a merge or export bug. With
`preflight --tokenizer DIR` the row is rendered with that folder's chat template (in a
sandbox): a row the template refuses is TP-PRE-CHAT-TEMPLATE-ERROR, a FAIL, instead.
What it does not mean: a broken row for templates that accept it; without a tokenizer it
is a WARN.
"""


def check_not_alternating(scan: ds.DatasetScan, limits: NoLimits, ctx: Any) -> Iterator[Hit]:
    rejected: frozenset[int] = getattr(ctx, "template_rejected", frozenset())
    for p in scan.problems:
        if p.kind == ds.NOT_ALTERNATING and p.line not in rejected:
            yield Hit(message=f"line {p.line + 1}: {p.message}", evidence={"line": p.line + 1, **dict(p.evidence)},
                      location=_location(scan, p))


NOT_ALTERNATING = Rule(id="TP-PRE-TURNS-NOT-ALTERNATING", name="turns-not-alternating", level=Level.WARN,
                       doc=NOT_ALTERNATING_DOC, check=check_not_alternating, family=DATASET)

CHOSEN_EQUALS_REJECTED = _rule("TP-PRE-CHOSEN-EQUALS-REJECTED", "chosen-equals-rejected", Level.FAIL,
                               """A preference pair has identical chosen and rejected answers.

What it flags: a row whose `chosen` and `rejected` values are equal (strings, or message
lists with the same roles and contents).
Why it matters: DPO-style losses see no margin to learn from; the row only adds noise
to the reward estimate and wastes its compute.
What it does not mean: near-identical answers that differ in a word — those are real
(if weak) preferences.
""", (ds.CHOSEN_EQUALS_REJECTED,))


# --- duplicates, overlap, file level -------------------------------------------------------

DUPLICATE_DOC = """A row repeats an earlier row exactly.

What it flags: a row whose training content (the text, the conversation, the pair) is
identical to an earlier row's; the finding sits on the repeat and points at the first
occurrence. Metadata keys (`id`, `source`) do not count.
Why it matters: duplicates are trained on more than once per epoch — the model
memorises them and the effective dataset is smaller than it looks.
What it does not mean: rows that differ only in letter case or surrounding whitespace
(those are TP-PRE-NEAR-DUPLICATE) or rows that share a prompt but not the answer.
"""


def _repeats(scan: ds.DatasetScan, found: tuple[ds.Duplicate, ...], how: str, count_key: str) -> Iterator[Hit]:
    for d in found:
        yield Hit(message=f"line {d.line + 1} repeats line {d.first + 1} {how}",
                  evidence={"line": d.line + 1, "first_line": d.first + 1, count_key: len(found)},
                  location=_line_location(scan, d.line),
                  related=(Related(location=_line_location(scan, d.first), message="first occurrence"),))


def check_duplicates(scan: ds.DatasetScan, limits: NoLimits, ctx: Any) -> Iterator[Hit]:
    return _repeats(scan, scan.duplicates, "exactly", "duplicates_in_file")


DUPLICATE = Rule(id="TP-PRE-DUPLICATE-TEXT", name="duplicate-text", level=Level.WARN, doc=DUPLICATE_DOC,
                 check=check_duplicates, family=DATASET, origin="trainproof")

NEAR_DUPLICATE_DOC = """A row repeats an earlier row up to letter case or whitespace.

What it flags: a row equal to an earlier row once ASCII letter case is ignored (and, for
single-text rows, leading and trailing whitespace), but not an exact copy of it.
Why it matters: the same example trained twice under a trivial disguise — usually two
sources of one dataset merged, or a cleaning pass run twice.
What it does not mean: paraphrases; only case and outer whitespace are ignored.
"""


def check_near_duplicates(scan: ds.DatasetScan, limits: NoLimits, ctx: Any) -> Iterator[Hit]:
    return _repeats(scan, scan.near_duplicates, "up to letter case or whitespace", "near_duplicates_in_file")


NEAR_DUPLICATE = Rule(id="TP-PRE-NEAR-DUPLICATE", name="near-duplicate", level=Level.WARN,
                      doc=NEAR_DUPLICATE_DOC, check=check_near_duplicates, family=DATASET)

ACROSS_FILES_DOC = """A row repeats a row of an earlier training file.

What it flags: when several training files (shards) are checked together, a row whose
training content equals a row of a file given before it (in the order given; a folder or
glob in name order), exactly or up to letter case and outer whitespace; the finding sits
on the later row and points at the first copy (earlier file and line). Only a file's first
row with that content is flagged: its later copies within the file are
TP-PRE-DUPLICATE-TEXT already. The `--eval` file is judged by TP-PRE-EVAL-OVERLAP instead.
Why it matters: shards are trained on as one dataset — a row copied into two shards is
trained on twice per epoch, like a duplicate within one file; usually the same source
exported twice or overlapping shard ranges.
What it does not mean: anything when one file is checked on its own (there is no earlier
file; `doctor` and the editor judge each file alone), or paraphrases.
"""


def check_across_files(scan: ds.DatasetScan, limits: NoLimits, ctx: Any) -> Iterator[Hit]:
    copies: tuple[EarlierCopy, ...] = getattr(ctx, "earlier_copies", ())
    for c in copies:
        how = "exactly" if c.exact else "up to letter case or whitespace"
        yield Hit(message=f"line {c.line + 1} repeats {c.path}:{c.first_line + 1} (an earlier file) {how}",
                  evidence={"line": c.line + 1, "first_line": c.first_line + 1, "first_file": c.file + 1,
                            "exact": c.exact, "across_files_in_file": len(copies)},
                  location=_line_location(scan, c.line),
                  related=(Related(location=Location(path=c.path, span=Span(c.first_line, 0, c.first_line, 0)),
                                   message="first occurrence, in an earlier file"),))


ACROSS_FILES = Rule(id="TP-PRE-DUPLICATE-ACROSS-FILES", name="duplicate-across-files", level=Level.WARN,
                    doc=ACROSS_FILES_DOC, check=check_across_files, family=DATASET)

OVERLAP_DOC = """An eval row also appears in the training data.

What it flags: a row of the `--eval` file whose content equals (or equals up to letter
case and outer whitespace) a row of a training file; the finding sits on the eval line
and points at the training line.
Why it matters: the eval loss then measures memorisation, not generalisation — it looks
better the more the model overfits, and early stopping picks the wrong checkpoint.
What it does not mean: anything when no `--eval` file is given (the check is listed as
skipped); shared prompts with different answers are not overlap.
"""


OVERLAP_SKIP = ("judged on an eval file only, against its training files (preflight --eval EVAL, or doctor on "
                "a folder where an eval/valid/test file pairs with a train file by name)")


@dataclass(frozen=True, kw_only=True)
class Overlap:
    """An eval row that is also a row of a training file."""

    line: int        # 0-based, in the eval file
    path: str        # the training file that holds it first (the first file given wins)
    train_line: int  # 0-based, in that file
    exact: bool      # False: equal up to ASCII letter case and outer whitespace


def find_overlaps(scan: ds.DatasetScan, train: Sequence[ds.DatasetScan]) -> tuple[Overlap, ...]:
    """Every row of `scan` whose content a training file holds, in line order; an exact
    copy is reported as such even when a near one comes earlier."""
    want_exact = {h for h in scan.exact if h}
    want_near = {h for h in scan.near if h}
    exact_at = _first_in_train(train, "exact", want_exact)
    near_at = _first_in_train(train, "near", want_near)
    found = []
    # A line without a usable record hashes to 0, and 0 is never wanted above, so never a key.
    for line, (e, n) in enumerate(zip(scan.exact, scan.near)):
        hit = exact_at.get(e)
        exact = hit is not None
        if hit is None:
            hit = near_at.get(n)
        if hit is not None:
            found.append(Overlap(line=line, path=hit[0], train_line=hit[1], exact=exact))
    return tuple(found)


def _overlaps(scan: ds.DatasetScan, ctx: Any) -> tuple[Overlap, ...]:
    train = getattr(ctx, "train", ())
    if not train:
        raise Skip(OVERLAP_SKIP)
    return ctx.overlaps(scan) if isinstance(ctx, DatasetContext) else find_overlaps(scan, train)


def _in_train(o: Overlap, message: str) -> Related:
    return Related(location=Location(path=o.path, span=Span(o.train_line, 0, o.train_line, 0)), message=message)


def check_overlap(scan: ds.DatasetScan, limits: NoLimits, ctx: Any) -> Iterator[Hit]:
    for o in _overlaps(scan, ctx):
        how = "exactly" if o.exact else "up to letter case or whitespace"
        yield Hit(message=f"eval line {o.line + 1} appears in the training data {how} ({o.path}:{o.train_line + 1})",
                  evidence={"line": o.line + 1, "train_line": o.train_line + 1, "exact": o.exact},
                  location=_line_location(scan, o.line),
                  related=(_in_train(o, "the same row in the training data"),))


def _first_in_train(train: Sequence[ds.DatasetScan], which: str, wanted: set[int]) -> dict[int, tuple[str, int]]:
    """hash -> (training file, first line) for the wanted hashes; the first file wins."""
    found: dict[int, tuple[str, int]] = {}
    for t in train:
        for line, h in enumerate(getattr(t, which)):
            if h in wanted and h not in found:
                found[h] = (t.path, line)
    return found


OVERLAP = Rule(id="TP-PRE-EVAL-OVERLAP", name="eval-overlap", level=Level.WARN, doc=OVERLAP_DOC,
               check=check_overlap, family=DATASET)


# --- dataset-wide shares: one headline per file ---------------------------------------------
# The per-row findings above say where each repeat is; these say how much of the file it
# is, once, so that "86% of rows repeat an earlier row" is not lost among "...and 927 more".
# One idea at two severities is two rules: the WARN stands down in the report where its
# FAIL fires (STANDS_DOWN), so each limit is set once, beside its rule.


def share_text(share: float, limit: float) -> tuple[str, str]:
    """A share and its limit as percentages, with as many decimals as it takes for a
    share that is not the limit not to print as the limit, nor as 100% when it is not all."""
    lim = next((f"{limit:.{d}%}" for d in range(4) if float(f"{limit * 100:.{d}f}") == round(limit * 100, 6)),
               f"{limit:.4%}")
    if share == limit:  # at the limit: written as the limit is (12.5%, never "12%" beside "limit 12.5%")
        return lim, lim
    for d in range(4):
        shown = float(f"{share * 100:.{d}f}")
        if shown != float(lim[:-1]) and (share == 1 or shown != 100):
            return f"{share:.{d}%}", lim
    return f"{share:.4%}", lim


@dataclass(frozen=True, kw_only=True)
class Repeats:
    """A file's rows that repeat an earlier row of it, counted."""

    rows: int
    exact: int
    near: int
    first: ds.Duplicate  # the repeat on the lowest line

    @property
    def count(self) -> int:
        return self.exact + self.near

    @property
    def share(self) -> float:
        return self.count / self.rows


def repeats(scan: ds.DatasetScan) -> Repeats | None:
    """The exact and near repeats of one file against its rows; None without any (or rows)."""
    found = (*scan.duplicates, *scan.near_duplicates)
    if not found or scan.records <= 0:
        return None
    return Repeats(rows=scan.records, exact=len(scan.duplicates), near=len(scan.near_duplicates),
                   first=min(found, key=lambda d: d.line))


def _near_part(near: int) -> str:
    return f" ({near:,} of them up to letter case or whitespace)" if near else ""


def _repeats_hit(scan: ds.DatasetScan, r: Repeats, limit: float) -> Hit:
    share, lim = share_text(r.share, limit)
    return Hit(message=f"{share} of rows repeat an earlier row of this file: {r.count:,} of {r.rows:,}"
                       f"{_near_part(r.near)}, the first at line {r.first.line + 1}; {r.rows - r.count:,} "
                       f"distinct rows; limit {lim}",
               evidence={"line": r.first.line + 1, "first_line": r.first.first + 1, "count": r.count,
                         "total": r.rows, "share": r.share, "exact": r.exact, "near": r.near,
                         "distinct": r.rows - r.count},
               location=_line_location(scan, r.first.line),
               related=(Related(location=_line_location(scan, r.first.first), message="the row it repeats"),))


@dataclass(frozen=True, kw_only=True)
class DuplicateShareLimits:
    # From a tenth of the rows on, repeats are no longer a few stray copies: every epoch
    # spends a tenth of its steps re-training rows it has seen, and the file holds at most
    # 90% of the examples it seems to. Below that the per-row findings say enough.
    min_share: float = 0.1
    # In a file of fewer rows one repeat moves the share by 5 points or more: the share
    # says more about the file's size than its data (a hand-made sample), and the per-row
    # findings say it all.
    min_rows: int = 20


DUPLICATE_SHARE_DOC = """A large share of a file's rows repeat an earlier row.

What it flags: a file of at least `min_rows` rows (20) where at least `min_share` of them
(10%) repeat an earlier row of the same file, exactly (TP-PRE-DUPLICATE-TEXT) or up to letter case and outer
whitespace (TP-PRE-NEAR-DUPLICATE); one finding per file, on the first repeat, with the
count, the rows and the share. From TP-PRE-MOSTLY-DUPLICATES' share on, that FAIL is
reported instead.
Why it matters: the per-row findings are capped in the output ("...and N more"), so the
size of the problem is easy to miss; a tenth of every epoch re-trains rows already seen
and the dataset is smaller than it looks.
What it does not mean: repeats across files (TP-PRE-DUPLICATE-ACROSS-FILES) or between
the eval and training files (TP-PRE-EVAL-OVERLAP-SHARE); those are counted apart.
"""


def check_duplicate_share(scan: ds.DatasetScan, limits: DuplicateShareLimits, ctx: Any) -> Iterator[Hit]:
    r = repeats(scan)
    if r is not None and r.rows >= limits.min_rows and r.share >= limits.min_share:
        yield _repeats_hit(scan, r, limits.min_share)


DUPLICATE_SHARE = Rule(id="TP-PRE-DUPLICATE-SHARE", name="duplicate-share", level=Level.WARN,
                       doc=DUPLICATE_SHARE_DOC, limits=DuplicateShareLimits, check=check_duplicate_share,
                       family=DATASET)


@dataclass(frozen=True, kw_only=True)
class MostlyDuplicatesLimits:
    # Half or more: on average every distinct row is there at least twice. A file written
    # out twice is exactly half, an export loop or a join that multiplied rows more; no
    # curated dataset looks like that, and most of each epoch re-trains what it has seen.
    min_share: float = 0.5
    # As TP-PRE-DUPLICATE-SHARE's: a few rows are a sample, not a dataset; two copies of
    # one row are no FAIL.
    min_rows: int = 20


MOSTLY_DUPLICATES_DOC = """Half or more of a file's rows repeat an earlier row.

What it flags: a file of at least `min_rows` rows (20) where at least `min_share` of them
(half) repeat an earlier row of the same file, exactly or up to letter case and outer
whitespace; one finding per file,
on the first repeat, with the count, the rows, the share and how many distinct rows are
left.
Why it matters: the run trains on a fraction of the data it seems to have, each kept row
several times an epoch — it memorises them, and its step and epoch budget is spent on
repeats. Usually the file was written twice, or an export or join multiplied the rows.
What it does not mean: that every repeated row is wrong: deliberate upsampling repeats
rows too — then raise `min_share` or disable the rule for that file's run.
"""


def check_mostly_duplicates(scan: ds.DatasetScan, limits: MostlyDuplicatesLimits, ctx: Any) -> Iterator[Hit]:
    r = repeats(scan)
    if r is not None and r.rows >= limits.min_rows and r.share >= limits.min_share:
        yield _repeats_hit(scan, r, limits.min_share)


MOSTLY_DUPLICATES = Rule(id="TP-PRE-MOSTLY-DUPLICATES", name="mostly-duplicates", level=Level.FAIL,
                         doc=MOSTLY_DUPLICATES_DOC, limits=MostlyDuplicatesLimits, check=check_mostly_duplicates,
                         family=DATASET)


def _contamination_hit(scan: ds.DatasetScan, found: tuple[Overlap, ...], limit: float) -> Hit:
    rows = scan.records
    share, lim = share_text(len(found) / rows, limit)
    exact = sum(o.exact for o in found)
    first = found[0]
    return Hit(message=f"{len(found):,} of {rows:,} eval rows ({share}) are in the training data"
                       f"{_near_part(len(found) - exact)}, the first at line {first.line + 1} "
                       f"({first.path}:{first.train_line + 1}); limit {lim}",
               evidence={"line": first.line + 1, "train_line": first.train_line + 1, "count": len(found),
                         "total": rows, "share": len(found) / rows, "exact": exact, "near": len(found) - exact},
               location=_line_location(scan, first.line),
               related=(_in_train(first, "the first of them in the training data"),))


def _contaminated(scan: ds.DatasetScan, ctx: Any, limit: float) -> Iterator[Hit]:
    found = _overlaps(scan, ctx)
    if found and scan.records > 0 and len(found) / scan.records >= limit:
        yield _contamination_hit(scan, found, limit)


@dataclass(frozen=True, kw_only=True)
class EvalOverlapShareLimits:
    # A memorised row's loss falls towards zero, so one eval row in twenty seen in training
    # can move the mean eval loss by as much as checkpoints late in a run differ; below
    # that the per-row findings say enough.
    min_share: float = 0.05


EVAL_OVERLAP_SHARE_DOC = """A share of the eval rows is also in the training data.

What it flags: an eval file (`preflight --eval`, or paired with a train file by `doctor`)
where at least `min_share` (5%) of the rows are rows of the training files, exactly or up
to letter case and outer whitespace; one finding per file, on the first such row, with
the count, the rows and the share. From TP-PRE-EVAL-CONTAMINATED's share on, that FAIL is
reported instead.
Why it matters: the per-row TP-PRE-EVAL-OVERLAP findings are capped in the output, so
the size of the leak is easy to miss; memorised rows pull the eval loss down and early
stopping towards overfit checkpoints.
What it does not mean: anything when no training files are known (the check is listed as
skipped); shared prompts with different answers are not overlap.
"""


def check_eval_overlap_share(scan: ds.DatasetScan, limits: EvalOverlapShareLimits, ctx: Any) -> Iterator[Hit]:
    return _contaminated(scan, ctx, limits.min_share)


EVAL_OVERLAP_SHARE = Rule(id="TP-PRE-EVAL-OVERLAP-SHARE", name="eval-overlap-share", level=Level.WARN,
                          doc=EVAL_OVERLAP_SHARE_DOC, limits=EvalOverlapShareLimits,
                          check=check_eval_overlap_share, family=DATASET)


@dataclass(frozen=True, kw_only=True)
class EvalContaminatedLimits:
    # Half or more of the eval rows trained on: the eval loss is then mostly a measure of
    # recall, and it keeps falling while the model overfits — it can no longer pick a
    # checkpoint or stop a run.
    min_share: float = 0.5


EVAL_CONTAMINATED_DOC = """Most of the eval file is training data.

What it flags: an eval file (`preflight --eval`, or paired with a train file by `doctor`)
where at least `min_share` (half) of the rows are rows of the training files, exactly or
up to letter case and outer whitespace; one finding per file, on the first such row, with
the count, the rows and the share. "10 of 10 eval rows are in the training data" is the
eval split taken from the training data, or the two files swapped.
Why it matters: the eval loss measures memorisation, not generalisation: it looks better
the more the model overfits, so early stopping and best-checkpoint selection pick the
wrong step, and reported eval numbers mean nothing.
What it does not mean: anything when no training files are known (the check is listed as
skipped), or that a held-out test set elsewhere is contaminated.
"""


def check_eval_contaminated(scan: ds.DatasetScan, limits: EvalContaminatedLimits, ctx: Any) -> Iterator[Hit]:
    return _contaminated(scan, ctx, limits.min_share)


EVAL_CONTAMINATED = Rule(id="TP-PRE-EVAL-CONTAMINATED", name="eval-contaminated", level=Level.FAIL,
                         doc=EVAL_CONTAMINATED_DOC, limits=EvalContaminatedLimits, check=check_eval_contaminated,
                         family=DATASET)

# The rules judged against training files only (an eval file): skipped, with OVERLAP_SKIP,
# when none are known.
EVAL_RULES = (OVERLAP, EVAL_OVERLAP_SHARE, EVAL_CONTAMINATED)
# A file-level WARN -> the FAIL of the same idea: where the FAIL fires, the WARN is left
# out of the report (one headline per file, at the severity its share earned).
STANDS_DOWN: dict[str, str] = {DUPLICATE_SHARE.id: MOSTLY_DUPLICATES.id, EVAL_OVERLAP_SHARE.id: EVAL_CONTAMINATED.id}

MIXED_DOC = """One file holds rows of more than one dataset format.

What it flags: a file where rows are, say, partly `text` and partly `messages`; the
finding sits on the first row of the less common format and counts each format.
Why it matters: a trainer applies one formatting function to the whole file — the rows
of the other format are dropped, mis-rendered, or crash the run when they are reached.
What it does not mean: a broken row (each row may be valid in its own format); keys of
two formats on one row are TP-PRE-EXTRA-KEYS.
"""


def check_mixed(scan: ds.DatasetScan, limits: NoLimits, ctx: Any) -> Iterator[Hit]:
    if len(scan.formats) < 2:
        return
    (main, main_rows, main_first), *others = scan.formats
    other_first = min(f for _, _, f in others)
    counts = ", ".join(f"{f} {n} (first line {first + 1})" for f, n, first in scan.formats)
    yield Hit(message=f"rows in {len(scan.formats)} formats: {counts}",
              evidence={"formats": len(scan.formats), "main_rows": main_rows,
                        "other_rows": sum(n for _, n, _ in others),
                        **{f"rows_{f.replace('-', '_')}": n for f, n, _ in scan.formats}},
              location=_line_location(scan, other_first),
              related=(Related(location=_line_location(scan, main_first), message=f"first {main} row"),))


MIXED = Rule(id="TP-PRE-MIXED-FORMATS", name="mixed-formats", level=Level.WARN, doc=MIXED_DOC,
             check=check_mixed, family=DATASET)

LAYOUT_DOC = """How the file was read: encoding marks, line endings, layout.

What it flags: (INFO) a UTF-8 byte-order mark (skipped), Windows CRLF line endings
(read as LF), blank lines (skipped), or a JSON array of records instead of JSON Lines
(each element checked and located at its first line).
Why it matters: most loaders cope, but not all: a BOM breaks some JSONL readers' first
line, and a JSON array needs `json` rather than `jsonl`/`lines=True` loading.
What it does not mean: a problem with the records — it is INFO and never changes a
verdict.
"""


UNREADABLE_ROW = _rule("TP-PRE-ROW-NOT-CHECKED", "row-not-checked", Level.NOT_CHECKED, """A row could not be read, so it was not checked.

What it flags: a line nested deeper than the JSON decoder goes (e.g. 100k levels of
arrays), or longer than the row cap (`max_row_mb` in `[tool.trainproof.caps]`); the
message gives the size and the cap.
Why it matters: nothing about that row was judged (NOT-CHECKED, exit 2); a training
loader may fail or hang on it.
What it does not mean: that the row is malformed — it may be valid JSON.
""", (ds.UNREADABLE_ROW,))


def check_layout(scan: ds.DatasetScan, limits: NoLimits, ctx: Any) -> Iterator[Hit]:
    notes = []
    if scan.bom:
        notes.append("starts with a UTF-8 byte-order mark (skipped)")
    if scan.crlf:
        notes.append("uses CRLF line endings (read as LF)")
    if scan.blank_lines:
        notes.append(f"{scan.blank_lines} blank line(s) skipped")
    if scan.layout == "json-array" and not json_array_named_jsonl(scan):
        notes.append(f"is a JSON array of {scan.records} record(s), not JSON Lines (each element checked)")
    if notes:
        yield Hit(message="file " + "; ".join(notes),
                  evidence={"bom": scan.bom, "crlf": scan.crlf, "blank_lines": scan.blank_lines,
                            "json_array": scan.layout == "json-array", "records": scan.records},
                  location=_line_location(scan, 0))


LAYOUT = Rule(id="TP-PRE-FILE-LAYOUT", name="file-layout", level=Level.INFO, doc=LAYOUT_DOC,
              check=check_layout, family=DATASET)

ARRAY_IN_JSONL_DOC = """A `.jsonl` file holds a JSON array, not JSON Lines.

What it flags: a file named `.jsonl` (or `.ndjson`) whose content is one JSON array of
records (`[{...}, {...}]`) rather than one object per line; every element is still
checked and located at its first line.
Why it matters: line-based loaders — `datasets.load_dataset("json")` picks its reader by
content, but `pandas.read_json(lines=True)`, `jq -c`, streaming JSONL readers and most
training frameworks' own JSONL loaders — read the first line `[` and fail, or read
nothing. Save it with `.json`, or write one object per line.
What it does not mean: anything about the records themselves; the same array in a
`.json` file is only a layout note (TP-PRE-FILE-LAYOUT, INFO).
"""

_JSONL_SUFFIXES = (".jsonl", ".ndjson")


def json_array_named_jsonl(scan: ds.DatasetScan) -> bool:
    return scan.layout == "json-array" and scan.path.lower().endswith(_JSONL_SUFFIXES)


def check_array_in_jsonl(scan: ds.DatasetScan, limits: NoLimits, ctx: Any) -> Iterator[Hit]:
    if json_array_named_jsonl(scan):
        suffix = "." + scan.path.rsplit(".", 1)[-1]
        yield Hit(message=f"the file is named {suffix} but holds a JSON array of {scan.records} record(s): "
                          "line-based JSONL loaders reject it",
                  evidence={"records": scan.records, "lines": scan.lines}, location=_line_location(scan, 0))


ARRAY_IN_JSONL = Rule(id="TP-PRE-JSON-ARRAY-IN-JSONL", name="json-array-in-jsonl", level=Level.WARN,
                      doc=ARRAY_IN_JSONL_DOC, check=check_array_in_jsonl, family=DATASET)

DATASET_RULES: tuple[Rule[ds.DatasetScan, DatasetContext], ...] = (
    MALFORMED,
    UNREADABLE_ROW,
    EMPTY_TEXT,
    MISSING_KEYS,
    EXTRA_KEYS,
    NON_STRING,
    CONTENT_PARTS,
    UNKNOWN_ROLE,
    ASSISTANT_FIRST,
    NO_ASSISTANT,
    EMPTY_ASSISTANT,
    EMPTY_TURN,
    SYSTEM_NOT_FIRST,
    LAST_NOT_ASSISTANT,
    NOT_ALTERNATING,
    CHOSEN_EQUALS_REJECTED,
    DUPLICATE,
    NEAR_DUPLICATE,
    DUPLICATE_SHARE,
    MOSTLY_DUPLICATES,
    ACROSS_FILES,
    OVERLAP,
    EVAL_OVERLAP_SHARE,
    EVAL_CONTAMINATED,
    MIXED,
    ARRAY_IN_JSONL,
    LAYOUT,
)
