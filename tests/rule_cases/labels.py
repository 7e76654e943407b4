"""Cases for the labels family: the model's config.json, the datasets' label columns and
the training script's loss settings, written here and read by their readers
(readers/labels.py) into the LabelFacts the rules judge."""

from __future__ import annotations

import json
import re
import tempfile
import textwrap
from pathlib import Path
from typing import Any, Sequence

from trainproof_lsp.readers.labels import LabelFacts, read_label_column, read_loss_settings, read_model_labels

from . import Expect, FamilyCases, Fires, Quiet, RuleCases, straddle
from .checkpoint import _folder


def facts(model: dict[str, Any] | None, rows: Sequence[dict[str, Any]] = (), *, script: str | None = None) -> LabelFacts:
    """config.json (when given), train.jsonl of `rows` and train.py (when given) in a fresh folder, read."""
    folder = Path(tempfile.mkdtemp(dir=_folder()))
    labels = None
    if model is not None:
        (folder / "config.json").write_text(json.dumps(model, indent=2))
        labels = read_model_labels(folder / "config.json")
    data = "".join(json.dumps(r) + "\n" for r in rows).encode()
    column = read_label_column(folder / "train.jsonl", split="train", data=data) if rows else None
    loss = None
    if script is not None:
        (folder / "train.py").write_text(textwrap.dedent(script).lstrip())
        loss = read_loss_settings(folder / "train.py")
    return LabelFacts(model=labels, data=(column,) if column is not None else (), script=loss)


def classifier(n: int) -> dict[str, Any]:
    return {"architectures": ["BertForSequenceClassification"], "id2label": {str(i): f"C{i}" for i in range(n)}}


LLAMA = {"architectures": ["LlamaForCausalLM"], "vocab_size": 1000}

CROSS_ENTROPY_0 = """
    import torch
    loss_fn = torch.nn.CrossEntropyLoss(ignore_index=0)
    """


def labelled(counts: Sequence[int]) -> list[dict[str, Any]]:
    """`counts[k]` rows of label k, classes in turn."""
    rows: list[dict[str, Any]] = []
    left = list(counts)
    while any(left):
        for k, c in enumerate(left):
            if c:
                rows.append({"text": f"row {len(rows)}", "label": k})
                left[k] -= 1
    return rows


def dead_class(n: int, seen: int, per_class: float) -> LabelFacts:
    """A classifier of n classes whose training rows (per_class x n of them) hold only the first `seen`."""
    total = round(per_class * n)
    counts = [total // seen + (1 if k < total % seen else 0) for k in range(seen)] + [0] * (n - seen)
    return facts(classifier(n), labelled(counts))


def shifted_row(length: int, start: int, *, aligned: bool = False, wrong: int = 0) -> dict[str, Any]:
    """input_ids start..start+length-1 and labels that copy them shifted by one (or aligned);
    `wrong` of the labels match neither."""
    ids = list(range(start, start + length))
    labels = ids[:] if aligned else ids[1:] + [-100]
    for j in range(wrong):
        labels[j] = 999
    return {"input_ids": ids, "labels": labels}


def shift(rows: Sequence[dict[str, Any]]) -> LabelFacts:
    return facts(LLAMA, rows)


def context(_: LabelFacts) -> None:
    return None


def normalize(text: str) -> str:
    return re.sub(re.escape(str(_folder())) + r"/[^/\s]+", "<tmp>", text)


CASES: dict[str, RuleCases] = {
    "TP-OBJ-IGNORE-INDEX-COLLISION": RuleCases(
        fires=Fires(subject=lambda: facts(classifier(3), labelled([4, 3, 3]), script=CROSS_ENTROPY_0), hits=(Expect(message="CrossEntropyLoss(ignore_index=0): 0 is a real class ('C0') of the 3 classes (0..2); the loss drops every target 0: 4 of 10 training targets. Use -100 (or 3, past the last class)",
                           evidence={'ignore_index': 0, 'classes': 3, 'dropped': 4, 'targets': 10, 'line': 1}, line=0),),
                    family=('TP-OBJ-IGNORE-INDEX-COLLISION',)),
        quiet=(Quiet(subject=lambda: facts(classifier(3), labelled([4, 3, 3]), script=CROSS_ENTROPY_0.replace("=0", "=-100"))),
               Quiet(subject=lambda: facts(classifier(3), labelled([4, 3, 3])), skip="no training script")),
    ),
    "TP-OBJ-TARGET-OUT-OF-RANGE": RuleCases(
        fires=Fires(subject=lambda: facts(classifier(3), labelled([2, 2, 2, 1, 0, 1])), hits=(Expect(message='line 4: label 3 is outside the 3 classes of the model (0..2); 1 target(s) 3, 2 of 8 out of range in train.jsonl',
                           evidence={'label': 3, 'classes': 3, 'count': 1, 'out_of_range': 2, 'targets': 8, 'line': 4, 'row': None}, line=3),
                     Expect(message='line 5: label 5 is outside the 3 classes of the model (0..2); 1 target(s) 5, 2 of 8 out of range in train.jsonl',
                           evidence={'label': 5, 'classes': 3, 'count': 1, 'out_of_range': 2, 'targets': 8, 'line': 5, 'row': None}, line=4),),
                    family=('TP-OBJ-TARGET-OUT-OF-RANGE', 'TP-OBJ-TARGET-OUT-OF-RANGE')),
        quiet=(Quiet(subject=lambda: facts(classifier(3), labelled([2, 2, 2]))),
               Quiet(subject=lambda: facts(classifier(3), [{"text": "no label"}]), skip="no integer label column")),
    ),
    "TP-OBJ-DEAD-CLASS": RuleCases(
        fires=Fires(subject=lambda: facts(classifier(4), labelled([12, 0, 10, 0])), hits=(Expect(message="class 1 ('C1') never occurs in the training labels (22 rows of train.jsonl; 2 of 4 classes occur)",
                           evidence={'class': 1, 'classes': 4, 'seen': 2, 'rows': 22}, line=6),
                     Expect(message="class 3 ('C3') never occurs in the training labels (22 rows of train.jsonl; 2 of 4 classes occur)",
                           evidence={'class': 3, 'classes': 4, 'seen': 2, 'rows': 22}, line=8),),
                    family=('TP-OBJ-DEAD-CLASS', 'TP-OBJ-DEAD-CLASS')),
        quiet=(Quiet(subject=lambda: facts(classifier(4), labelled([6, 5, 7, 2]))),
               Quiet(subject=lambda: facts(LLAMA, labelled([3, 3])), skip="no classifier config.json")),
        straddles=(straddle("min_rows_per_class", 5, lambda r: dead_class(4, 3, r), fire=5, quiet=4.75,
                            skip="absence is judged from 5 rows a class"),
                   straddle("min_coverage", 0.5, lambda c: dead_class(10, round(10 * c), 6), fire=0.5, quiet=0.4,
                            skip="too few to call the others left out"),
                   straddle("max_missing", 8, lambda m: dead_class(20, 20 - int(m), 6), fire=8, quiet=9,
                            skip="too few to call the others left out")),
    ),
    "TP-OBJ-LABEL-SHIFT-DOUBLE": RuleCases(
        fires=Fires(subject=lambda: shift([shifted_row(12, 10 * k) for k in range(4)]), hits=(Expect(message='line 1: labels are input_ids shifted by one (labels[i] == input_ids[i+1] in 4 of 4 rows that tell, 44 positions) and the model shifts them again (config.json: LlamaForCausalLM): it learns to predict two tokens ahead',
                           evidence={'shifted_rows': 4, 'informative_rows': 4, 'positions': 44, 'line': 1, 'row': None}, line=0),),
                    family=('TP-OBJ-LABEL-SHIFT-DOUBLE',)),
        quiet=(Quiet(subject=lambda: shift([shifted_row(12, 10 * k, aligned=True) for k in range(4)])),
               Quiet(subject=lambda: facts(classifier(3), [shifted_row(12, 10 * k) for k in range(4)]), skip="not known")),
        straddles=(straddle("min_row_positions", 8, lambda n: shift([shifted_row(int(n) + 1, 20 * k) for k in range(5)]),
                            fire=8, quiet=7, skip="rows tell shifted from aligned"),
                   straddle("min_positions", 32, lambda t: shift([shifted_row(9, 20 * k) for k in range(3)]
                                                                 + [shifted_row(int(t) - 24 + 1, 100)]),
                            fire=32, quiet=31, skip="comparable unmasked positions"),
                   straddle("match_fraction", 0.99, lambda f: shift([shifted_row(101, 0, wrong=round(100 * (1 - f)))]),
                            fire=0.99, quiet=0.98, skip="rows tell shifted from aligned"),
                   straddle("row_agreement", 0.75, lambda a: shift([shifted_row(12, 20 * k) for k in range(2 if a < 0.75 else 3)]
                                                                   + [shifted_row(12, 200, aligned=True)]),
                            fire=0.75, quiet=2 / 3, skip="rows disagree")),
    ),
}

FAMILY = FamilyCases(cases=CASES, context=context, normalize=normalize)
