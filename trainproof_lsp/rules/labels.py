"""The objective's targets: the loss's ignore_index, the labels' range, the classes the
training data never holds, and labels shifted twice.

Every check reads a `LabelFacts` (readers/labels.py): the model's config.json (its
id2label/num_labels, or vocab_size for a language model), the datasets' label columns,
the script's loss and collator settings, and one saved batch when given. Each finding sits
at the line of the label it is about: the dataset row that holds it, else the config's
id2label entry, else the script's setting. The IDs are the published trainproof's, whose
objective pack means the same; the facts here come from the run's files, not from a hook
inside the training loop. The registry entries are the tuple RULES.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import Iterator

from ..core.model import Hit, Level, Location, Related, Span
from ..readers.labels import LabelColumn, LabelFacts, ModelLabels, Place, SequenceRow, Setting
from .base import Family, NoLimits, Rule, Skip

# Every rule here judges one run's label facts (readers/labels.py); no context.
LABELS: Family[LabelFacts, None] = Family("labels")

# transformers' and PyTorch's own ignore_index: never a class.
DEFAULT_IGNORE = -100


def place_location(p: Place) -> Location:
    if p.record is not None:
        return Location(path=p.path, record=p.record)
    return Location(path=p.path, span=Span(p.line, 0, p.line, p.width))


def setting_location(s: Setting) -> Location:
    return Location(path=s.path, span=Span(s.line, s.start, s.line, s.end))


def _where(p: Place) -> str:
    return f"row {p.record}" if p.record is not None else f"line {p.line + 1}"


def classes(facts: LabelFacts) -> tuple[int, Setting, str]:
    """(the number of classes the output layer has, where the config says it, what they
    are) or Skip: a classifier's num_labels, a language model's vocab_size."""
    model = facts.model
    if model is None:
        raise Skip("no model config.json (with id2label, num_labels or vocab_size) beside the data, in "
                   "--tokenizer's folder, or named on disk by the script's from_pretrained")
    if model.classifier and model.num_labels is not None:
        return int(model.num_labels.value), model.num_labels, "classes"
    if model.vocab_size is not None and (model.causal_lm or not model.classifier):
        return int(model.vocab_size.value), model.vocab_size, "token ids"
    raise Skip(f"{model.path} states neither num_labels/id2label nor vocab_size")


def _regression(model: ModelLabels | None) -> bool:
    if model is None:
        return False
    kind = model.problem_type.value if model.problem_type is not None else ""
    return kind == "regression" or (model.classifier and model.num_labels is not None
                                    and model.num_labels.value == 1)


def _columns(facts: LabelFacts) -> list[LabelColumn]:
    return [c for c in (*facts.data, *([facts.batch] if facts.batch else [])) if c.rows and not c.multi_hot]


def _ignored(facts: LabelFacts) -> set[int]:
    """The values the loss drops: -100, and the script's ignore_index / label_pad_token_id."""
    out = {DEFAULT_IGNORE}
    if facts.script is not None:
        out.update(int(s.value) for s in facts.script.ignore_index)
    return out


def _class_name(model: ModelLabels | None, c: int) -> str:
    if model is None or c not in model.id2label:
        return ""
    return f" ({model.id2label[c].value!r})"


# --- ignore_index on a real class ---------------------------------------------------------------

COLLISION_DOC = """The loss's ignore_index (or the collator's label padding) is a real class id.

What it flags: an `ignore_index=` of the script's loss (nn.CrossEntropyLoss,
F.cross_entropy) or a collator's `label_pad_token_id=` whose value lies inside
`[0, num_labels)` of the model's config.json (a language model: `[0, vocab_size)`); located
at the first training row whose label is that class (the config's id2label entry when no
row has it, else the script's setting), with the rows it drops counted.
Why it matters: every target with that id is dropped from the loss, so the class is never
learned (with label padding: padded positions are trained as that class). The loss curve
looks healthy; only the model's outputs show it.
What it does not mean: anything for -100 or an id at or past the last class (outside the
output layer): those are safe sentinels.
"""


def check_collision(facts: LabelFacts, limits: NoLimits, ctx: None) -> Iterator[Hit]:
    if facts.script is None:
        raise Skip("no training script (preflight --train-config FILE, or a script beside the data) to read the "
                   "loss's ignore_index from")
    n, where, what = classes(facts)
    model = facts.model
    assert model is not None  # classes() stands down without one
    settings = [s for s in facts.script.ignore_index if 0 <= int(s.value) < n]
    train = facts.train
    for s in settings:
        v = int(s.value)
        rows = sum(c.counts.get(v, 0) for c in train)
        total = sum(c.targets for c in train)
        first = next((c.places[v][0] for c in train if c.places.get(v)), None)
        entry = model.id2label.get(v)
        related = [Related(location=setting_location(s), message=s.text)]
        if first is not None:
            location = place_location(first)
            if entry is not None:
                related.append(Related(location=setting_location(entry), message=f"class {v} in id2label"))
        elif entry is not None:
            location = setting_location(entry)
        else:
            location = setting_location(s)
        related.append(Related(location=setting_location(where), message=f"{n:,} {what}"))
        yield Hit(message=f"{s.text}: {v} is a real class{_class_name(facts.model, v)} of the {n:,} {what} "
                          f"(0..{n - 1}); the loss drops every target {v}: {rows:,} of {total:,} training "
                          f"targets. Use -100 (or {n}, past the last class)",
                  evidence={"ignore_index": v, "classes": n, "dropped": rows, "targets": total,
                            "line": (first.line + 1) if first is not None and first.record is None else None},
                  location=location, related=tuple(related))


COLLISION = Rule(id="TP-OBJ-IGNORE-INDEX-COLLISION", name="ignore-index-collision", level=Level.FAIL,
                 doc=COLLISION_DOC, check=check_collision, family=LABELS, origin="trainproof")


# --- targets the output layer cannot hold -------------------------------------------------------

OUT_OF_RANGE_DOC = """Label targets outside `[0, num_labels)` (a language model: `[0, vocab_size)`).

What it flags: each dataset row (or saved-batch row) whose label is negative (other than
-100 and the script's ignore_index) or at least the number of classes in the model's
config.json; one finding per row, up to 20 rows a value, with the value's total count.
Why it matters: cross-entropy indexes the logits with the target: on a GPU the run dies on a
device-side assert, on a CPU with "Target N is out of bounds"; a label id equal to
num_labels is the classic off-by-one of a label map built from 1.
What it does not mean: that the label map is wrong in the config rather than in the data;
the message names both numbers.
"""


def check_out_of_range(facts: LabelFacts, limits: NoLimits, ctx: None) -> Iterator[Hit]:
    if _regression(facts.model):
        raise Skip("a regression head (num_labels 1 / problem_type regression): labels are values, not ids")
    columns = _columns(facts)
    if not columns:
        raise Skip("no integer label column in the datasets (label, labels, label_ids) and no --batch")
    n, where, what = classes(facts)
    ignored = _ignored(facts)
    for col in columns:
        bad = sorted(v for v in col.counts if (v < 0 and v not in ignored) or v >= n)
        total = sum(col.counts[v] for v in bad)
        for v in bad:
            for p in col.places[v]:
                yield Hit(message=f"{_where(p)}: label {v} is outside the {n:,} {what} of the model (0..{n - 1}); "
                                  f"{col.counts[v]:,} target(s) {v}, {total:,} of {col.targets:,} out of range in "
                                  f"{posixpath.basename(col.path)}",
                          evidence={"label": v, "classes": n, "count": col.counts[v], "out_of_range": total,
                                    "targets": col.targets, "line": p.line + 1 if p.record is None else None,
                                    "row": p.record},
                          location=place_location(p),
                          related=(Related(location=setting_location(where), message=f"{n:,} {what}"),))


OUT_OF_RANGE = Rule(id="TP-OBJ-TARGET-OUT-OF-RANGE", name="target-out-of-range", level=Level.FAIL,
                    doc=OUT_OF_RANGE_DOC, check=check_out_of_range, family=LABELS, origin="trainproof")


# --- classes the training data never holds ------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class DeadClassLimits:
    # Fewer labelled training rows than this many per class, and a class may be absent by
    # chance (a sample, a small fine-tune): the check stands down.
    min_rows_per_class: int = 5
    # At least this share of the classes must occur: a dataset holding few of many
    # classes is another task's data or a sample, not a class left out.
    min_coverage: float = 0.5
    # More absent classes than this is the same case (a sample), said as such, not listed.
    max_missing: int = 8


DEAD_CLASS_DOC = """A class of the model's head never occurs in the training labels.

What it flags: each class id of a classifier's config.json (its id2label entry, located at
its line) that no training row's label holds, when the data holds at least
`min_rows_per_class` labelled rows per class and `min_coverage` of the classes occur;
multi-label (multi-hot) rows count a class when its position is ever 1.
Why it matters: the model is never shown the class, so it never predicts it; the eval
accuracy is capped and the loss looks fine. Usually a label map that does not match the
data (classes renumbered, a split filtered by label).
What it does not mean: anything for a language model's vocabulary, or for an eval set.
"""


def check_dead_class(facts: LabelFacts, limits: DeadClassLimits, ctx: None) -> Iterator[Hit]:
    model = facts.model
    if model is None or not model.classifier or model.num_labels is None:
        raise Skip("no classifier config.json (id2label / num_labels) for the data")
    if _regression(model):
        raise Skip("a regression head (num_labels 1 / problem_type regression): no classes")
    train = [c for c in facts.train if c.rows]
    if not train:
        raise Skip("no training label column (label, labels, label_ids)")
    n = int(model.num_labels.value)
    rows = sum(c.rows for c in train)
    if rows < limits.min_rows_per_class * n:
        raise Skip(f"{rows:,} labelled training rows for {n} classes; absence is judged from "
                   f"{limits.min_rows_per_class} rows a class ({limits.min_rows_per_class * n:,})")
    seen: set[int] = set()
    for c in train:
        seen.update(k for k, v in (c.positives if c.multi_hot else c.counts).items() if v and 0 <= k < n)
    missing = [k for k in range(n) if k not in seen]
    coverage = len(seen) / n
    if not missing:
        return
    if coverage < limits.min_coverage or len(missing) > limits.max_missing:
        raise Skip(f"{len(seen)} of {n} classes occur in {rows:,} rows: too few to call the others left out "
                   f"(coverage {coverage:.0%}, limit {limits.min_coverage:.0%}; at most {limits.max_missing} "
                   "missing)")
    data = ", ".join(posixpath.basename(c.path) for c in train)
    for k in missing:
        entry = model.id2label.get(k)
        location = setting_location(entry) if entry is not None else setting_location(model.num_labels)
        yield Hit(message=f"class {k}{_class_name(model, k)} never occurs in the training labels ({rows:,} rows "
                          f"of {data}; {len(seen)} of {n} classes occur)",
                  evidence={"class": k, "classes": n, "seen": len(seen), "rows": rows},
                  location=location,
                  related=tuple(Related(location=Location(path=c.path), message="the training labels")
                                for c in train[:3]))


DEAD_CLASS = Rule(id="TP-OBJ-DEAD-CLASS", name="dead-class", level=Level.FAIL, doc=DEAD_CLASS_DOC,
                  check=check_dead_class, family=LABELS, limits=DeadClassLimits, origin="trainproof")


# --- labels shifted twice -----------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class ShiftLimits:
    # A row votes "shifted" when this share of its unmasked positions has
    # labels[i] == input_ids[i + 1] (and "aligned" for labels[i] == input_ids[i]); real
    # text repeats tokens, so a share, not every position.
    match_fraction: float = 0.99
    # Unmasked positions a row needs to vote, and the rows together to judge at all.
    min_row_positions: int = 8
    min_positions: int = 32
    # Share of the voting rows that must agree: a collator shifts every row or none.
    row_agreement: float = 0.75


SHIFT_DOC = """The labels are already shifted (`labels == input_ids[1:]`) for a model that shifts them again.

What it flags: dataset rows (or saved-batch rows) whose labels match the next token
(`labels[i] == input_ids[i + 1]` on at least `match_fraction` of a row's unmasked
positions) while the run's model is a causal LM whose loss shifts the labels itself
(config.json's `architectures` *ForCausalLM, or the script's `*ForCausalLM.from_pretrained`);
judged by a vote of the rows, located at the first shifted row.
Why it matters: the model is trained to predict the token two ahead. Shapes stay valid, the
loss falls, the curve looks healthy; generation is garbage.
What it does not mean: anything when the script's DataCollatorForLanguageModeling(mlm=False)
builds the labels from input_ids (the column is not used), or for a model whose loss does
not shift (not judged: that cannot be read from the tensors).
"""


def _vote(rows: tuple[SequenceRow, ...], ignored: set[int], limits: ShiftLimits
          ) -> tuple[str, list[SequenceRow], int, int, int]:
    """(winner or a reason, the rows that voted shifted, shifted votes, informative votes, positions)."""
    shifted_rows: list[SequenceRow] = []
    aligned = shifted = judgeable = total = 0
    for r in rows:
        ids, labels = r.input_ids, r.labels
        n = a = s = 0
        for i in range(min(len(labels), len(ids) - 1)):
            t = labels[i]
            if t in ignored:
                continue
            n += 1
            a += t == ids[i]
            s += t == ids[i + 1]
        total += n
        if n < limits.min_row_positions:
            continue
        judgeable += 1
        sa, ss = a / n >= limits.match_fraction, s / n >= limits.match_fraction
        if ss and not sa:
            shifted += 1
            shifted_rows.append(r)
        elif sa and not ss:
            aligned += 1
    informative = aligned + shifted
    if total < limits.min_positions:
        return f"{total} comparable unmasked positions; the vote needs {limits.min_positions}", [], 0, 0, total
    if informative == 0 or informative * 2 < judgeable:
        return (f"{informative} of {judgeable} rows tell shifted from aligned labels (the labels are not a copy "
                "of input_ids, or repeat tokens)"), [], shifted, informative, total
    if max(aligned, shifted) / informative < limits.row_agreement:
        return f"rows disagree: {aligned} aligned, {shifted} shifted", [], shifted, informative, total
    return ("shifted" if shifted > aligned else "aligned"), shifted_rows, shifted, informative, total


def check_double_shift(facts: LabelFacts, limits: ShiftLimits, ctx: None) -> Iterator[Hit]:
    sources = [c for c in (*facts.data, *([facts.batch] if facts.batch else [])) if c.sequences]
    if not sources:
        raise Skip("no rows with both input_ids and labels (in the datasets or --batch)")
    shifts: Setting | str | None = None
    if facts.model is not None and facts.model.causal_lm:
        shifts = f"{posixpath.basename(facts.model.path)}: {', '.join(facts.model.architectures)}"
    if facts.script is not None and facts.script.causal_lm is not None:
        shifts = facts.script.causal_lm
    if shifts is None:
        raise Skip("whether the loss shifts the labels is not known: no *ForCausalLM in config.json's "
                   "architectures or the script's from_pretrained")
    lm = facts.script.lm_collator if facts.script is not None else None
    if lm is not None and lm.value is False:
        raise Skip(f"{lm.text} builds the labels from input_ids: the dataset's labels column is not used")
    ignored = _ignored(facts)
    said = []
    for col in sources:
        winner, rows, shifted, informative, positions = _vote(col.sequences, ignored, limits)
        if winner != "shifted":
            said.append(f"{posixpath.basename(col.path)}: {winner}")
            continue
        first = rows[0]
        how = shifts.text if isinstance(shifts, Setting) else shifts
        related = [Related(location=place_location(r.place), message="labels == input_ids shifted by one")
                   for r in rows[1:4]]
        if isinstance(shifts, Setting):
            related.append(Related(location=setting_location(shifts), message="the model shifts the labels"))
        yield Hit(message=f"{_where(first.place)}: labels are input_ids shifted by one (labels[i] == input_ids[i+1] "
                          f"in {shifted} of {informative} rows that tell, {positions:,} positions) and the model "
                          f"shifts them again ({how}): it learns to predict two tokens ahead",
                  evidence={"shifted_rows": shifted, "informative_rows": informative, "positions": positions,
                            "line": first.place.line + 1 if first.place.record is None else None,
                            "row": first.place.record},
                  location=place_location(first.place), related=tuple(related))
    if said and len(said) == len(sources) and not any(w.endswith("aligned") for w in said):
        raise Skip("; ".join(said))


DOUBLE_SHIFT = Rule(id="TP-OBJ-LABEL-SHIFT-DOUBLE", name="label-shift-double", level=Level.FAIL, doc=SHIFT_DOC,
                    check=check_double_shift, family=LABELS, limits=ShiftLimits, origin="trainproof")

RULES: tuple[Rule[LabelFacts, None], ...] = (COLLISION, OUT_OF_RANGE, DEAD_CLASS, DOUBLE_SHIFT)

__all__ = ["LABELS", "RULES", "COLLISION", "OUT_OF_RANGE", "DEAD_CLASS", "DOUBLE_SHIFT", "classes"]
