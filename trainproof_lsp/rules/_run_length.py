"""How long a training script's run is, from its config and the dataset it names, and the
edits the script rules offer as fixes. Pure functions of `ScriptFacts`.

HF Trainer's length (transformers' `Trainer._inner_training_loop`): `max_steps` when it
is > 0; otherwise ceil(num_train_epochs x update steps per epoch), where an epoch is
ceil(rows / (per-device batch x processes)) batches and an update takes
`gradient_accumulation_steps` of them (a last partial one counts).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..core.model import Edit, Span
from ..readers.script import ConfigCall, ScriptFacts, Value

# HF TrainingArguments defaults (transformers/training_args.py), for keywords the config
# does not set.
DEFAULTS: dict[str, object] = {
    "num_train_epochs": 3.0, "per_device_train_batch_size": 8, "gradient_accumulation_steps": 1,
    "max_steps": -1, "save_steps": 500, "logging_steps": 500, "save_strategy": "steps", "eval_strategy": "no",
}
# TRL's configs log every 10 steps instead of 500 (trl/trainer/*_config.py).
_PLAIN_HF = ("TrainingArguments", "Seq2SeqTrainingArguments")
TRL_LOGGING_STEPS = 10


def default(c: ConfigCall, key: str) -> object:
    if key == "logging_steps" and c.cls not in _PLAIN_HF:
        return TRL_LOGGING_STEPS
    return DEFAULTS.get(key)


@dataclass(frozen=True, kw_only=True)
class Setting:
    """A keyword's value in force: as written, or the default when absent."""

    value: object  # None when not known statically
    given: Value | None  # the keyword as written; None: the default applies

    @property
    def known(self) -> bool:
        return self.value is not None

    def said(self, key: str) -> str:
        if self.given is None:
            return f"{key} unset (default {self.value!r})"
        return self.given.text if self.given.assigned else f"{key}={self.given.text}"


def setting(c: ConfigCall, key: str, *aliases: str) -> Setting:
    for k in (key, *aliases):
        v = c.kwargs.get(k)
        if v is not None:
            value = v.value if v.known else None
            if isinstance(value, str) and key.endswith("_strategy"):
                value = value.lower()
            return Setting(value=value, given=v)
    return Setting(value=None if c.opaque else default(c, key), given=None)


def number(s: Setting) -> float | None:
    if isinstance(s.value, bool) or not isinstance(s.value, (int, float)):
        return None
    return float(s.value)


@dataclass(frozen=True, kw_only=True)
class Plan:
    steps: int  # optimizer steps the run takes (at most, unless exact)
    exact: bool
    how: str  # how it was computed, for messages
    max_steps: Value | None = None  # where max_steps is set, when it decides
    dataset: str = ""  # the dataset file counted
    dataset_path: str | None = None
    dataset_span: Span | None = None

    def words(self) -> str:
        return f"{'' if self.exact else 'at most '}{self.steps} steps ({self.how})"


def _usable(key: str, x: float | None) -> bool:
    """A finite value > 0; a whole one for the batch and the accumulation (they count
    examples and batches: 0.5 would be a batch of 0 to the Trainer); epochs may be a fraction."""
    return x is not None and math.isfinite(x) and x > 0 and (key == "num_train_epochs" or x == int(x))


def plan(facts: ScriptFacts, c: ConfigCall) -> Plan | str:
    """The run's length in optimizer steps, or why it cannot be known statically."""
    max_steps = setting(c, "max_steps")
    total = number(max_steps)
    if total is None or not math.isfinite(total):
        return f"max_steps is not known without running the script ({max_steps.said('max_steps')})"
    if total > 0:
        return Plan(steps=int(total), exact=True, how=max_steps.said("max_steps"), max_steps=max_steps.given)
    parts = {k: setting(c, k) for k in ("num_train_epochs", "per_device_train_batch_size",
                                        "gradient_accumulation_steps")}
    unknown = [s.said(k) for k, s in parts.items() if not _usable(k, number(s))]
    if unknown:
        return f"not known without running the script: {', '.join(unknown)}"
    train = {d.found: d for d in facts.datasets if d.split == "train" and d.rows is not None}
    if not train:
        named = [d for d in facts.datasets if d.split == "train"]
        if named:
            return f"the training dataset {named[0].text} was not counted ({named[0].note})"
        return "no max_steps, and no dataset file the script names (load_dataset(\"json\", data_files=...))"
    if len(train) > 1:
        return f"{len(train)} training datasets named ({', '.join(sorted(d.text for d in train.values()))})"
    (data,) = train.values()
    assert data.rows is not None
    epochs = number(parts["num_train_epochs"]) or 0.0
    batch = int(number(parts["per_device_train_batch_size"]) or 1)
    accumulation = int(number(parts["gradient_accumulation_steps"]) or 1)
    processes = 1
    exact_processes = False
    p = facts.processes
    if p is not None and p.known and isinstance(p.value, int) and not isinstance(p.value, bool) and p.value > 0:
        processes, exact_processes = p.value, True
    batches = math.ceil(math.ceil(data.rows / processes) / batch)
    per_epoch = max(math.ceil(batches / accumulation), 1)
    steps = max(math.ceil(epochs * per_epoch), 1)
    procs = f"{processes} process{'es' if processes != 1 else ''}" + ("" if exact_processes else ", assumed")
    how = (f"{epochs:g} epoch(s) x {per_epoch} steps: {data.rows} rows of {data.text} / batch {batch} "
           f"/ accumulation {accumulation}, {procs}")
    # More processes, packing or filtering only shorten the run: the count is an upper bound.
    return Plan(steps=steps, exact=False, how=how, dataset=data.text, dataset_path=data.path,
                dataset_span=data.span)


# --- edits for fixes ---------------------------------------------------------------------------

def editable(v: Value | None) -> bool:
    """A value written at the call (not through a constant or a later attribute set)."""
    return v is not None and v.via is None and not v.assigned and v.path is None


def set_keyword(facts: ScriptFacts, c: ConfigCall, key: str, text: str) -> Edit | None:
    """Set `key` to the source `text` in a config call of the script: replace its value,
    or add the keyword after the call's last keyword. None when the call is not a plain
    call in the script (HfArgumentParser's dataclass, a value through a constant)."""
    if c.origin != "call":
        return None
    v = c.kwargs.get(key)
    if v is not None:
        return Edit(span=v.span, new_text=text) if editable(v) else None
    # the call's own `name=value` keywords (not the keys of a **{...} inside it)
    inside = [x.span for k, x in c.kwargs.items() if x.path is None and _within(x.span, c.span)
              and not x.assigned and _after_keyword(facts, x.span, k)]
    if inside:
        last = max(inside, key=lambda s: (s.end_line, s.end_char))
        return Edit(span=Span(last.end_line, last.end_char, last.end_line, last.end_char), new_text=f", {key}={text}")
    if c.kwargs or c.opaque:
        return None
    end = Span(c.span.end_line, c.span.end_char - 1, c.span.end_line, c.span.end_char - 1)  # before ")"
    return Edit(span=end, new_text=f"{key}={text}")


def _after_keyword(facts: ScriptFacts, span: Span, key: str) -> bool:
    if not 0 <= span.start_line < len(facts.source_lines):
        return False
    before = facts.source_lines[span.start_line][:span.start_char].rstrip()
    return before.endswith("=") and before[:-1].rstrip().endswith(key)


def _within(inner: Span, outer: Span) -> bool:
    return (outer.start_line, outer.start_char) <= (inner.start_line, inner.start_char) and \
        (inner.end_line, inner.end_char) <= (outer.end_line, outer.end_char)
