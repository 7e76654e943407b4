"""The objective's label rules (rules/labels.py) on facts built here, field by field: every
finding asserted whole (message, evidence, location, related places and their messages),
every skip by its exact reason, each limit met exactly and passed by one, several items in
one input (a rule that stopped at the first would miss the second), and each place a fact
may come from (a dataset's line or a batch's row, the config's id2label entry or its
num_labels, the config's architectures or the script's from_pretrained).

The facts are what readers/labels.py returns; building them directly proves the rules and
nothing in front of them (tests/test_labels.py proves the files real writers make, read end
to end; tests/rule_cases/labels.py reads small files through the readers).
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Iterable

import pytest

from trainproof_lsp.core.model import Hit, Location, Related, Span
from trainproof_lsp.readers.labels import (LabelColumn, LabelFacts, LossSettings, ModelLabels, Place, SequenceRow,
                                           Setting)
from trainproof_lsp.rules.base import NoLimits, Skip
from trainproof_lsp.rules.labels import (COLLISION, DEAD_CLASS, DOUBLE_SHIFT, OUT_OF_RANGE, DeadClassLimits,
                                         ShiftLimits, classes)

CFG = "/run/model/config.json"
DATA = "/run/data/train.jsonl"
DATA2 = "/run/data/more.jsonl"
EVAL = "/run/data/eval.jsonl"
BATCH = "/run/batch.safetensors"
SCRIPT = "/run/src/train.py"
CLS = ("BertForSequenceClassification",)
LM = ("LlamaForCausalLM",)


def setting(value: Any, line: int, text: str, path: str = CFG, start: int = 2, end: int = 12) -> Setting:
    return Setting(path=path, line=line, start=start, end=end, value=value, text=text)


def span(s: Setting | None) -> Location:
    assert s is not None
    return Location(path=s.path, span=Span(s.line, s.start, s.line, s.end))


NUM = setting(3, 4, "id2label")
VOCAB = setting(32000, 20, "vocab_size", start=3, end=15)


def model(arch: tuple[str, ...] = CLS, *, n: int | None = 3, names: Iterable[int] | None = None,
          vocab: Setting | None = None, problem: str | None = None, path: str = CFG) -> ModelLabels:
    """A config.json: id2label entries (at lines 5, 6, ...) for `names` (default all n classes)."""
    num = setting(n, 4, "id2label", path=path) if n is not None else None
    ids = range(n or 0) if names is None else names
    return ModelLabels(path=path, architectures=arch, num_labels=num,
                       id2label={k: setting(f"L{k}", 5 + k, f"id2label[{k}]", path=path, start=4, end=7)
                                 for k in ids},
                       problem_type=setting(problem, 2, "problem_type", path=path) if problem else None,
                       vocab_size=vocab)


def column(labels: list[int], *, path: str = DATA, split: str = "train", records: bool = False,
           rows: int | None = None, targets: int | None = None) -> LabelColumn:
    """A label column of one target a row; row i at line i (width 30 + i), or record i of a batch."""
    places: dict[int, list[Place]] = {}
    for i, v in enumerate(labels):
        p = Place(path=path, record=i) if records else Place(path=path, line=i, width=30 + i)
        places.setdefault(v, []).append(p)
    return LabelColumn(path=path, split=split, column="label", rows=len(labels) if rows is None else rows,
                       targets=len(labels) if targets is None else targets, counts=dict(Counter(labels)),
                       places={k: tuple(v) for k, v in places.items()})


def loss(*ignore: Setting, causal: Setting | None = None, collator: Setting | None = None) -> LossSettings:
    return LossSettings(path=SCRIPT, ignore_index=ignore, causal_lm=causal, lm_collator=collator)


def ignore(v: int, line: int = 7, text: str | None = None) -> Setting:
    return setting(v, line, text or f"CrossEntropyLoss(ignore_index={v})", path=SCRIPT, start=10, end=25)


def at_line(path: str, line: int, width: int | None = None) -> Location:
    return Location(path=path, span=Span(line, 0, line, 30 + line if width is None else width))


def run(rule: Any, facts: LabelFacts, limits: Any = None) -> list[Hit]:
    return list(rule.check(facts, limits if limits is not None else rule.limits(), None))


def skip(rule: Any, facts: LabelFacts, limits: Any = None) -> str:
    with pytest.raises(Skip) as e:
        run(rule, facts, limits)
    return str(e.value)


# --- classes(): what the output layer holds --------------------------------------------------

def test_classes_of_a_classifier_are_its_num_labels_at_the_id2label_key():
    m = model(vocab=VOCAB)
    assert classes(LabelFacts(model=m)) == (3, m.num_labels, "classes")


def test_classes_of_a_causal_lm_are_its_vocab_size():
    m = model(LM, n=None, vocab=VOCAB)
    assert classes(LabelFacts(model=m)) == (32000, VOCAB, "token ids")


def test_classes_of_a_model_that_is_neither_classifier_nor_causal_lm_are_its_vocab_size():
    m = model(("BertModel",), n=None, vocab=VOCAB)
    assert not m.classifier and not m.causal_lm
    assert classes(LabelFacts(model=m)) == (32000, VOCAB, "token ids")


def test_classes_of_a_causal_lm_with_a_classification_head_named_too():
    # Both heads named: num_labels when stated, else the vocabulary (the causal LM's).
    both = ("LlamaForCausalLM", "LlamaForSequenceClassification")
    assert classes(LabelFacts(model=model(both, vocab=VOCAB)))[0] == 3
    assert classes(LabelFacts(model=model(both, n=None, vocab=VOCAB)))[0] == 32000


def test_a_classifier_without_num_labels_is_not_judged_by_its_vocab_size():
    with pytest.raises(Skip) as e:
        classes(LabelFacts(model=model(n=None, vocab=VOCAB)))
    assert str(e.value) == f"{CFG} states neither num_labels/id2label nor vocab_size"


def test_a_causal_lm_without_vocab_size_is_not_judged():
    with pytest.raises(Skip) as e:
        classes(LabelFacts(model=model(LM, n=None)))
    assert str(e.value) == f"{CFG} states neither num_labels/id2label nor vocab_size"


def test_no_model_config_is_not_judged():
    with pytest.raises(Skip) as e:
        classes(LabelFacts(model=None))
    assert str(e.value) == ("no model config.json (with id2label, num_labels or vocab_size) beside the data, in "
                            "--tokenizer's folder, or named on disk by the script's from_pretrained")


# --- TP-OBJ-IGNORE-INDEX-COLLISION ----------------------------------------------------------

def test_collision_without_a_script_is_not_judged():
    assert skip(COLLISION, LabelFacts(model=model(), data=(column([0, 1, 2]),))) == (
        "no training script (preflight --train-config FILE, or a script beside the data) to read the loss's "
        "ignore_index from")


def test_collision_without_a_model_is_not_judged():
    assert skip(COLLISION, LabelFacts(model=None, script=loss(ignore(0)))).startswith("no model config.json")


def test_collision_each_real_class_ignored_is_a_finding_whole_and_the_sentinels_are_not():
    # 0 and 2 (the first and the last class) are real classes; -1, -100 and 3 (= num_labels)
    # are not. The first train file holds no 2, the second does: the first row of a class
    # is looked for in every training file; the eval file's rows are not counted.
    first = column([1, 0, 1, 0, 1])
    second = column([2, 2, 0, 1], path=DATA2)
    ev = column([2, 2, 2, 0, 0], path=EVAL, split="eval")
    s0, s_neg, s_sent, s3, s2 = ignore(0, 7), ignore(-1, 8), ignore(-100, 9), ignore(3, 10), ignore(2, 11,
                                                                                                    "label_pad_token_id=2")
    m = model()
    got = run(COLLISION, LabelFacts(model=m, data=(first, ev, second), script=loss(s0, s_neg, s_sent, s3, s2)))
    assert got == [
        Hit(message="CrossEntropyLoss(ignore_index=0): 0 is a real class ('L0') of the 3 classes (0..2); the loss "
                    "drops every target 0: 3 of 9 training targets. Use -100 (or 3, past the last class)",
            evidence={"ignore_index": 0, "classes": 3, "dropped": 3, "targets": 9, "line": 2},
            location=at_line(DATA, 1),
            related=(Related(location=span(s0), message="CrossEntropyLoss(ignore_index=0)"),
                     Related(location=span(m.id2label[0]), message="class 0 in id2label"),
                     Related(location=span(m.num_labels), message="3 classes"))),
        Hit(message="label_pad_token_id=2: 2 is a real class ('L2') of the 3 classes (0..2); the loss drops every "
                    "target 2: 2 of 9 training targets. Use -100 (or 3, past the last class)",
            evidence={"ignore_index": 2, "classes": 3, "dropped": 2, "targets": 9, "line": 1},
            location=at_line(DATA2, 0),
            related=(Related(location=span(s2), message="label_pad_token_id=2"),
                     Related(location=span(m.id2label[2]), message="class 2 in id2label"),
                     Related(location=span(m.num_labels), message="3 classes"))),
    ]


def test_collision_with_no_row_of_the_class_sits_at_its_id2label_entry():
    m = model()
    s = ignore(1)
    got = run(COLLISION, LabelFacts(model=m, data=(column([0, 2, 0]),), script=loss(s)))
    assert got == [Hit(message="CrossEntropyLoss(ignore_index=1): 1 is a real class ('L1') of the 3 classes (0..2); "
                               "the loss drops every target 1: 0 of 3 training targets. Use -100 (or 3, past the "
                               "last class)",
                       evidence={"ignore_index": 1, "classes": 3, "dropped": 0, "targets": 3, "line": None},
                       location=span(m.id2label[1]),
                       related=(Related(location=span(s), message="CrossEntropyLoss(ignore_index=1)"),
                                Related(location=span(m.num_labels), message="3 classes")))]


def test_collision_of_a_language_model_sits_at_the_script_and_counts_the_vocabulary():
    s = ignore(0, text="DataCollatorForSeq2Seq(label_pad_token_id=0)")
    got = run(COLLISION, LabelFacts(model=model(LM, n=None, vocab=VOCAB), script=loss(s)))
    assert got == [Hit(message="DataCollatorForSeq2Seq(label_pad_token_id=0): 0 is a real class of the 32,000 token "
                               "ids (0..31999); the loss drops every target 0: 0 of 0 training targets. Use -100 (or "
                               "32000, past the last class)",
                       evidence={"ignore_index": 0, "classes": 32000, "dropped": 0, "targets": 0, "line": None},
                       location=span(s),
                       related=(Related(location=span(s), message="DataCollatorForSeq2Seq(label_pad_token_id=0)"),
                                Related(location=span(VOCAB), message="32,000 token ids")))]


def test_collision_at_a_row_of_a_batch_like_column_has_no_line_and_a_class_without_a_name():
    # A column whose places are records (row 0 holds the class): located at the record, no line.
    m = model(names=[0, 2])
    s = ignore(1)
    col = column([1, 0, 1], records=True, rows=1200, targets=2400)
    got = run(COLLISION, LabelFacts(model=m, data=(col,), script=loss(s)))
    assert got == [Hit(message="CrossEntropyLoss(ignore_index=1): 1 is a real class of the 3 classes (0..2); the "
                               "loss drops every target 1: 2 of 2,400 training targets. Use -100 (or 3, past the "
                               "last class)",
                       evidence={"ignore_index": 1, "classes": 3, "dropped": 2, "targets": 2400, "line": None},
                       location=Location(path=DATA, record=0),
                       related=(Related(location=span(s), message="CrossEntropyLoss(ignore_index=1)"),
                                Related(location=span(m.num_labels), message="3 classes")))]


def test_collision_counts_thousands_with_separators():
    col = LabelColumn(path=DATA, split="train", column="label", rows=5000, targets=5000, counts={0: 1500, 1: 3500},
                      places={0: (Place(path=DATA, line=3, width=9),), 1: (Place(path=DATA, line=0, width=9),)})
    got = run(COLLISION, LabelFacts(model=model(n=2), data=(col,), script=loss(ignore(0))))
    assert len(got) == 1
    assert "drops every target 0: 1,500 of 5,000 training targets" in got[0].message
    assert got[0].location == at_line(DATA, 3, 9)
    assert got[0].evidence["line"] == 4


def test_collision_outside_the_classes_is_quiet():
    assert run(COLLISION, LabelFacts(model=model(), data=(column([0, 1, 2]),),
                                     script=loss(ignore(-100), ignore(-1), ignore(3), ignore(4)))) == []


# --- TP-OBJ-TARGET-OUT-OF-RANGE -------------------------------------------------------------

def test_out_of_range_of_a_regression_head_is_not_judged():
    reason = "a regression head (num_labels 1 / problem_type regression): labels are values, not ids"
    assert skip(OUT_OF_RANGE, LabelFacts(model=model(n=1), data=(column([0, 5]),))) == reason
    assert skip(OUT_OF_RANGE, LabelFacts(model=model(problem="regression"), data=(column([0, 5]),))) == reason


def test_out_of_range_of_a_two_class_head_or_a_multi_label_head_is_judged():
    assert [h.evidence["label"] for h in run(OUT_OF_RANGE, LabelFacts(model=model(n=2), data=(column([0, 5]),)))] == [5]
    m = model(problem="multi_label_classification")
    assert [h.evidence["label"] for h in run(OUT_OF_RANGE, LabelFacts(model=m, data=(column([0, 5]),)))] == [5]


def test_a_causal_lm_stating_num_labels_1_is_not_a_regression_head():
    # num_labels 1 beside a *ForCausalLM: not a classifier, so not a regression head; judged by the vocabulary.
    m = model(LM, n=1, vocab=setting(4, 9, "vocab_size"))
    got = run(OUT_OF_RANGE, LabelFacts(model=m, data=(column([0, 3, 4]),)))
    assert [(h.evidence["label"], h.evidence["classes"]) for h in got] == [(4, 4)]


def test_out_of_range_without_a_model_is_not_judged():
    assert skip(OUT_OF_RANGE, LabelFacts(model=None, data=(column([0, 5]),))).startswith("no model config.json")


def test_out_of_range_without_a_label_column_is_not_judged():
    reason = "no integer label column in the datasets (label, labels, label_ids) and no --batch"
    assert skip(OUT_OF_RANGE, LabelFacts(model=model())) == reason
    empty = column([], path=DATA)
    multi = LabelColumn(path=DATA2, split="train", column="labels", rows=4, targets=12, counts={5: 4},
                        places={5: (Place(path=DATA2, line=0),)}, multi_hot=True)
    assert skip(OUT_OF_RANGE, LabelFacts(model=model(), data=(empty, multi))) == reason


def test_out_of_range_each_row_of_each_bad_value_in_the_data_and_the_batch():
    # -100 and the script's ignore_index -5 are dropped by the loss; -1, 3 (= num_labels)
    # and 7 are not classes. Each value's rows each get a finding, values in order; the
    # eval file is judged too; the batch's rows are records (row 0 included).
    data = column([3, 0, -100, 7, -1, 2, 3, -5])
    ev = column([1, 9], path=EVAL, split="eval")
    batch = column([4, 1], path=BATCH, split="batch", records=True)
    m = model()
    f = LabelFacts(model=m, data=(data, ev), batch=batch, script=loss(ignore(-5)))
    rel = (Related(location=span(m.num_labels), message="3 classes"),)

    def hit(where: str, v: int, count: int, total: int, targets: int, name: str, loc: Location,
            line: int | None, row: int | None) -> Hit:
        return Hit(message=f"{where}: label {v} is outside the 3 classes of the model (0..2); {count} target(s) {v}, "
                           f"{total} of {targets} out of range in {name}",
                   evidence={"label": v, "classes": 3, "count": count, "out_of_range": total, "targets": targets,
                             "line": line, "row": row},
                   location=loc, related=rel)

    assert run(OUT_OF_RANGE, f) == [
        hit("line 5", -1, 1, 4, 8, "train.jsonl", at_line(DATA, 4), 5, None),
        hit("line 1", 3, 2, 4, 8, "train.jsonl", at_line(DATA, 0), 1, None),
        hit("line 7", 3, 2, 4, 8, "train.jsonl", at_line(DATA, 6), 7, None),
        hit("line 4", 7, 1, 4, 8, "train.jsonl", at_line(DATA, 3), 4, None),
        hit("line 2", 9, 1, 1, 2, "eval.jsonl", at_line(EVAL, 1), 2, None),
        hit("row 0", 4, 1, 1, 2, "batch.safetensors", Location(path=BATCH, record=0), None, 0),
    ]


def test_out_of_range_of_a_language_model_counts_the_vocabulary_with_separators():
    col = LabelColumn(path=DATA, split="train", column="labels", rows=10, targets=4500, counts={32000: 1200, 5: 3300},
                      places={32000: (Place(path=DATA, line=2, width=40),), 5: (Place(path=DATA, line=0),)})
    got = run(OUT_OF_RANGE, LabelFacts(model=model(LM, n=None, vocab=VOCAB), data=(col,)))
    assert got == [Hit(message="line 3: label 32000 is outside the 32,000 token ids of the model (0..31999); 1,200 "
                               "target(s) 32000, 1,200 of 4,500 out of range in train.jsonl",
                       evidence={"label": 32000, "classes": 32000, "count": 1200, "out_of_range": 1200,
                                 "targets": 4500, "line": 3, "row": None},
                       location=at_line(DATA, 2, 40),
                       related=(Related(location=span(VOCAB), message="32,000 token ids"),))]


def test_out_of_range_quiet_at_the_edges_of_the_classes():
    assert run(OUT_OF_RANGE, LabelFacts(model=model(), data=(column([0, 2, -100, 1]),))) == []


# --- TP-OBJ-DEAD-CLASS ------------------------------------------------------------------------

def test_dead_class_not_judged_without_a_classifier_config():
    reason = "no classifier config.json (id2label / num_labels) for the data"
    data = (column([0] * 20),)
    assert skip(DEAD_CLASS, LabelFacts(model=None, data=data)) == reason
    assert skip(DEAD_CLASS, LabelFacts(model=model(LM, n=None, vocab=VOCAB), data=data)) == reason
    assert skip(DEAD_CLASS, LabelFacts(model=model(n=None), data=data)) == reason


def test_dead_class_not_judged_for_a_regression_head():
    assert skip(DEAD_CLASS, LabelFacts(model=model(n=1), data=(column([0] * 20),))) == (
        "a regression head (num_labels 1 / problem_type regression): no classes")


def test_dead_class_not_judged_without_training_labels():
    reason = "no training label column (label, labels, label_ids)"
    assert skip(DEAD_CLASS, LabelFacts(model=model(), data=(column([0] * 30, path=EVAL, split="eval"),))) == reason
    assert skip(DEAD_CLASS, LabelFacts(model=model(), data=(column([]),))) == reason


def test_dead_class_rows_per_class_limit_on_both_sides():
    # 3 classes at 5 rows a class: 15 rows judge, 14 do not; a limit of 4 judges 12.
    m = model()
    assert [h.evidence["class"] for h in run(DEAD_CLASS, LabelFacts(model=m, data=(column([0] * 8 + [1] * 7),)))] == [2]
    assert skip(DEAD_CLASS, LabelFacts(model=m, data=(column([0] * 7 + [1] * 7),))) == (
        "14 labelled training rows for 3 classes; absence is judged from 5 rows a class (15)")
    lim = DeadClassLimits(min_rows_per_class=4)
    assert len(run(DEAD_CLASS, LabelFacts(model=m, data=(column([0] * 6 + [1] * 6),)), lim)) == 1
    assert skip(DEAD_CLASS, LabelFacts(model=m, data=(column([0] * 6 + [1] * 5),)), lim) == (
        "11 labelled training rows for 3 classes; absence is judged from 4 rows a class (12)")


def test_dead_class_rows_over_a_thousand_in_the_skip():
    m = model(n=400, names=[])
    assert skip(DEAD_CLASS, LabelFacts(model=m, data=(column([0] * 1999),))) == (
        "1,999 labelled training rows for 400 classes; absence is judged from 5 rows a class (2,000)")


def test_dead_class_coverage_limit_on_both_sides():
    # 4 classes, 2 occur: coverage 50% is the limit (fires); 1 of 4 does not.
    m = model(n=4)
    got = run(DEAD_CLASS, LabelFacts(model=m, data=(column([0] * 10 + [2] * 10),)))
    assert [h.evidence for h in got] == [{"class": 1, "classes": 4, "seen": 2, "rows": 20},
                                         {"class": 3, "classes": 4, "seen": 2, "rows": 20}]
    assert skip(DEAD_CLASS, LabelFacts(model=m, data=(column([0] * 20),))) == (
        "1 of 4 classes occur in 20 rows: too few to call the others left out (coverage 25%, limit 50%; at most 8 "
        "missing)")
    lim = DeadClassLimits(min_coverage=0.75)
    assert skip(DEAD_CLASS, LabelFacts(model=m, data=(column([0] * 10 + [2] * 10),)), lim) == (
        "2 of 4 classes occur in 20 rows: too few to call the others left out (coverage 50%, limit 75%; at most 8 "
        "missing)")
    assert len(run(DEAD_CLASS, LabelFacts(model=m, data=(column([0] * 10 + [2] * 5 + [3] * 5),)), lim)) == 1


def test_dead_class_max_missing_on_both_sides():
    # 20 classes, 12 occur: 8 missing fire (each its own finding); 9 missing do not.
    m = model(n=20)
    rows = [k for k in range(12) for _ in range(10)]
    got = run(DEAD_CLASS, LabelFacts(model=m, data=(column(rows),)))
    assert [h.evidence["class"] for h in got] == list(range(12, 20))
    rows = [k for k in range(11) for _ in range(10)]
    assert skip(DEAD_CLASS, LabelFacts(model=m, data=(column(rows),))) == (
        "11 of 20 classes occur in 110 rows: too few to call the others left out (coverage 55%, limit 50%; at most 8 "
        "missing)")
    assert skip(DEAD_CLASS, LabelFacts(model=model(n=4), data=(column([0] * 10 + [2] * 10),)),
                DeadClassLimits(max_missing=1)).startswith("2 of 4 classes occur in 20 rows")


def test_dead_class_whole_finding_over_several_training_files():
    # Four train files (the related places name the first three), an eval file holding
    # class 3 (not training data: still dead), a class without an id2label entry (located
    # at num_labels); labels outside the classes (5, exactly num_labels, and -1) and zero
    # counts do not make a class seen.
    m = model(n=5, names=[0, 1, 2, 3])
    a = LabelColumn(path=DATA, split="train", column="label", rows=600, targets=600, counts={0: 300, 1: 0, 5: 300})
    b = LabelColumn(path="/run/data/b.jsonl", split="train", column="label", rows=300, targets=300, counts={-1: 1, 2: 299})
    c = LabelColumn(path="/run/data/c.jsonl", split="train", column="label", rows=50, targets=50, counts={0: 50})
    d = LabelColumn(path="/run/data/d.jsonl", split="train", column="label", rows=50, targets=50, counts={2: 50})
    ev = column([3] * 30, path=EVAL, split="eval")
    got = run(DEAD_CLASS, LabelFacts(model=m, data=(a, ev, b, c, d)), DeadClassLimits(min_coverage=0.4))
    related = tuple(Related(location=Location(path=p), message="the training labels")
                    for p in (DATA, "/run/data/b.jsonl", "/run/data/c.jsonl"))
    files = "train.jsonl, b.jsonl, c.jsonl, d.jsonl"
    assert got == [
        Hit(message=f"class 1 ('L1') never occurs in the training labels (1,000 rows of {files}; 2 of 5 classes occur)",
            evidence={"class": 1, "classes": 5, "seen": 2, "rows": 1000}, location=span(m.id2label[1]), related=related),
        Hit(message=f"class 3 ('L3') never occurs in the training labels (1,000 rows of {files}; 2 of 5 classes occur)",
            evidence={"class": 3, "classes": 5, "seen": 2, "rows": 1000}, location=span(m.id2label[3]), related=related),
        Hit(message=f"class 4 never occurs in the training labels (1,000 rows of {files}; 2 of 5 classes occur)",
            evidence={"class": 4, "classes": 5, "seen": 2, "rows": 1000}, location=span(m.num_labels), related=related),
    ]


def test_dead_class_multi_hot_counts_a_class_when_its_position_is_ever_set():
    m = model(n=4)
    mh = LabelColumn(path=DATA, split="train", column="labels", rows=20, targets=80, counts={0: 20, 1: 20},
                     multi_hot=True, positives={0: 0, 1: 12, 2: 5, 3: 0})
    got = run(DEAD_CLASS, LabelFacts(model=m, data=(mh,)))
    assert [h.evidence for h in got] == [{"class": 0, "classes": 4, "seen": 2, "rows": 20},
                                         {"class": 3, "classes": 4, "seen": 2, "rows": 20}]


def test_dead_class_every_class_seen_is_quiet():
    assert run(DEAD_CLASS, LabelFacts(model=model(), data=(column([0, 1, 2] * 5),))) == []


# --- TP-OBJ-LABEL-SHIFT-DOUBLE ----------------------------------------------------------------

def seq(ids: list[int], labels: list[int], line: int = 0, *, path: str = DATA, record: int | None = None) -> SequenceRow:
    place = Place(path=path, record=record) if record is not None else Place(path=path, line=line, width=30 + line)
    return SequenceRow(place=place, input_ids=tuple(ids), labels=tuple(labels))


def shifted(length: int, start: int, line: int = 0, *, wrong: int = 0, **kw: Any) -> SequenceRow:
    ids = list(range(start, start + length))
    labels = ids[1:] + [-100]
    for j in range(wrong):
        labels[j] = 99_999
    return seq(ids, labels, line, **kw)


def aligned(length: int, start: int, line: int = 0, **kw: Any) -> SequenceRow:
    ids = list(range(start, start + length))
    return seq(ids, ids[:], line, **kw)


def seqs(*rows: SequenceRow, path: str = DATA, split: str = "train") -> LabelColumn:
    return LabelColumn(path=path, split=split, column="labels", sequences=rows)


def lm_facts(*cols: LabelColumn, script: LossSettings | None = None, batch: LabelColumn | None = None,
             m: ModelLabels | None = None) -> LabelFacts:
    return LabelFacts(model=m if m is not None else model(LM, n=None, vocab=VOCAB), data=cols, script=script,
                      batch=batch)


def test_shift_without_rows_of_ids_and_labels_is_not_judged():
    assert skip(DOUBLE_SHIFT, lm_facts(column([1, 2]))) == (
        "no rows with both input_ids and labels (in the datasets or --batch)")


def test_shift_whether_the_loss_shifts_unknown_is_not_judged():
    reason = ("whether the loss shifts the labels is not known: no *ForCausalLM in config.json's architectures or "
              "the script's from_pretrained")
    rows = seqs(*(shifted(12, 20 * k, k) for k in range(4)))
    assert skip(DOUBLE_SHIFT, lm_facts(rows, m=model(("BertForMaskedLM",), n=None, vocab=VOCAB))) == reason
    assert skip(DOUBLE_SHIFT, LabelFacts(model=None, data=(rows,), script=loss())) == reason


def test_shift_an_lm_collator_without_mlm_builds_the_labels():
    rows = seqs(*(shifted(12, 20 * k, k) for k in range(4)))
    coll = setting(False, 9, "DataCollatorForLanguageModeling(mlm=False)", path=SCRIPT)
    assert skip(DOUBLE_SHIFT, lm_facts(rows, script=loss(collator=coll))) == (
        "DataCollatorForLanguageModeling(mlm=False) builds the labels from input_ids: the dataset's labels column is "
        "not used")
    mlm = setting(True, 9, "DataCollatorForLanguageModeling(mlm=True)", path=SCRIPT)
    assert len(run(DOUBLE_SHIFT, lm_facts(rows, script=loss(collator=mlm)))) == 1


def test_shift_whole_finding_from_the_config_with_the_first_three_other_rows_related():
    # Five shifted rows (lines 0, 2, 3, 4, 5) after an aligned-looking row that repeats
    # one token (labels match both input_ids[i] and [i+1]: no vote) and a short row that
    # cannot vote; masked positions (-100 and the script's 7) in the middle of a row are
    # passed over, not the end of it (7 is masked in the first row too: 10 of its 11 count).
    m = model(("LlamaForCausalLM", "MyLlama"), n=None, vocab=VOCAB, path="/run/model/sub/config.json")
    masked = seq(list(range(100, 112)), [101, 102, -100, 104, 7, 106, 107, 108, 109, 110, 111, -100], 2)
    rows = seqs(shifted(12, 0, 0), seq([5] * 12, [5] * 12, 1), masked, shifted(12, 200, 3), shifted(3, 300, 6),
                shifted(12, 400, 4), shifted(12, 500, 5))
    got = run(DOUBLE_SHIFT, lm_facts(rows, m=m, script=loss(ignore(7))))
    assert got == [Hit(message="line 1: labels are input_ids shifted by one (labels[i] == input_ids[i+1] in 5 of 5 "
                               "rows that tell, 65 positions) and the model shifts them again (config.json: "
                               "LlamaForCausalLM, MyLlama): it learns to predict two tokens ahead",
                       evidence={"shifted_rows": 5, "informative_rows": 5, "positions": 65, "line": 1, "row": None},
                       location=at_line(DATA, 0),
                       related=tuple(Related(location=at_line(DATA, line), message="labels == input_ids shifted by one")
                                     for line in (2, 3, 4)))]


def test_shift_whole_finding_from_the_script_at_a_batch_row():
    causal = setting("LlamaForCausalLM", 3, "AutoModelForCausalLM.from_pretrained('.')", path=SCRIPT, start=8,
                     end=50)
    batch = seqs(shifted(10, 0, record=0, path=BATCH), shifted(10, 50, record=1, path=BATCH),
                 shifted(10, 90, record=2, path=BATCH), shifted(10, 130, record=3, path=BATCH), path=BATCH)
    got = run(DOUBLE_SHIFT, LabelFacts(model=None, script=loss(causal=causal), batch=batch))
    assert got == [Hit(message="row 0: labels are input_ids shifted by one (labels[i] == input_ids[i+1] in 4 of 4 rows "
                               "that tell, 36 positions) and the model shifts them again (AutoModelForCausalLM."
                               "from_pretrained('.')): it learns to predict two tokens ahead",
                       evidence={"shifted_rows": 4, "informative_rows": 4, "positions": 36, "line": None, "row": 0},
                       location=Location(path=BATCH, record=0),
                       related=(*(Related(location=Location(path=BATCH, record=r),
                                          message="labels == input_ids shifted by one") for r in (1, 2, 3)),
                                Related(location=span(causal), message="the model shifts the labels")))]


def test_shift_the_script_names_the_model_when_the_config_does_not_shift():
    causal = setting("X", 3, "AutoModelForCausalLM.from_pretrained('m')", path=SCRIPT)
    rows = seqs(*(shifted(12, 20 * k, k) for k in range(4)))
    got = run(DOUBLE_SHIFT, LabelFacts(model=model(), data=(rows,), script=loss(causal=causal)))
    assert len(got) == 1 and "(AutoModelForCausalLM.from_pretrained('m'))" in got[0].message
    # A script without the call leaves the config's architectures to say it.
    got = run(DOUBLE_SHIFT, lm_facts(rows, script=loss()))
    assert len(got) == 1 and "(config.json: LlamaForCausalLM)" in got[0].message


def test_shift_each_source_judged_a_shifted_one_fires_beside_one_that_cannot_tell():
    few = seqs(shifted(9, 0, 0), path=DATA2)
    many = seqs(*(shifted(12, 20 * k, k) for k in range(4)))
    got = run(DOUBLE_SHIFT, lm_facts(few, many))
    assert [(h.location, h.evidence["shifted_rows"]) for h in got] == [(at_line(DATA, 0), 4)]
    batch = seqs(*(shifted(12, 20 * k, record=k, path=BATCH) for k in range(4)), path=BATCH)
    got = run(DOUBLE_SHIFT, lm_facts(few, many, batch=batch))
    assert [h.location for h in got] == [at_line(DATA, 0), Location(path=BATCH, record=0)]


def test_shift_sources_that_cannot_tell_say_why_each():
    few = seqs(shifted(9, 0, 0), path=DATA2)
    disagree = seqs(shifted(12, 0, 0), shifted(12, 20, 1), aligned(12, 40, 2))
    assert skip(DOUBLE_SHIFT, lm_facts(few, disagree)) == (
        "more.jsonl: 8 comparable unmasked positions; the vote needs 32; train.jsonl: rows disagree: 1 aligned, "
        "2 shifted")


def test_shift_an_aligned_source_is_quiet_beside_one_that_cannot_tell():
    few = seqs(shifted(9, 0, 0), path=DATA2)
    ok = seqs(*(aligned(12, 20 * k, k) for k in range(4)))
    assert run(DOUBLE_SHIFT, lm_facts(few, ok)) == []
    assert run(DOUBLE_SHIFT, lm_facts(ok)) == []


def test_shift_min_positions_on_both_sides_counting_rows_too_short_to_vote():
    # 3 rows of 8 positions and a row of 7 (too short to vote): 31 positions; one more is 32.
    base = [shifted(9, 20 * k, k) for k in range(3)]
    assert skip(DOUBLE_SHIFT, lm_facts(seqs(*base, shifted(8, 100, 3)))) == (
        "train.jsonl: 31 comparable unmasked positions; the vote needs 32")
    got = run(DOUBLE_SHIFT, lm_facts(seqs(*base, shifted(9, 100, 3))))
    assert [h.evidence for h in got] == [{"shifted_rows": 4, "informative_rows": 4, "positions": 32, "line": 1,
                                          "row": None}]
    got = run(DOUBLE_SHIFT, lm_facts(seqs(shifted(8, 100, 3), *base, shifted(9, 200, 4))))
    assert [h.evidence["shifted_rows"] for h in got] == [4]
    assert skip(DOUBLE_SHIFT, lm_facts(seqs(*base, shifted(9, 100, 3))), ShiftLimits(min_positions=33)) == (
        "train.jsonl: 32 comparable unmasked positions; the vote needs 33")


def test_shift_min_row_positions_on_both_sides():
    # Rows of 8 unmasked positions vote; with a limit of 9 none does.
    rows = seqs(*(shifted(9, 20 * k, k) for k in range(5)))
    assert [h.evidence["informative_rows"] for h in run(DOUBLE_SHIFT, lm_facts(rows))] == [5]
    assert skip(DOUBLE_SHIFT, lm_facts(rows), ShiftLimits(min_row_positions=9)) == (
        "train.jsonl: 0 of 0 rows tell shifted from aligned labels (the labels are not a copy of input_ids, or repeat tokens)")


def test_shift_half_the_voting_rows_telling_is_enough_less_is_not():
    # 4 rows vote, 2 tell (2 repeat one token): judged; 5 vote, 2 tell: not.
    rep = [seq([5] * 12, [5] * 12, 10 + k) for k in range(3)]
    tell = [shifted(12, 20 * k, k) for k in range(2)]
    got = run(DOUBLE_SHIFT, lm_facts(seqs(*tell, *rep[:2])))
    assert [(h.evidence["shifted_rows"], h.evidence["informative_rows"]) for h in got] == [(2, 2)]
    assert skip(DOUBLE_SHIFT, lm_facts(seqs(*tell, *rep))) == (
        "train.jsonl: 2 of 5 rows tell shifted from aligned labels (the labels are not a copy of input_ids, or repeat tokens)")


def test_shift_match_fraction_on_both_sides():
    # 100 positions: 99 matching the next token is the limit; 98 is not shifted.
    assert len(run(DOUBLE_SHIFT, lm_facts(seqs(shifted(101, 0, wrong=1))))) == 1
    assert skip(DOUBLE_SHIFT, lm_facts(seqs(shifted(101, 0, wrong=2)))) == (
        "train.jsonl: 0 of 1 rows tell shifted from aligned labels (the labels are not a copy of input_ids, or repeat tokens)")
    assert len(run(DOUBLE_SHIFT, lm_facts(seqs(shifted(101, 0, wrong=2))), ShiftLimits(match_fraction=0.98))) == 1


def test_shift_row_agreement_on_both_sides_and_a_tie_is_not_shifted():
    three = seqs(*(shifted(12, 20 * k, k) for k in range(3)), aligned(12, 200, 3))
    assert [h.evidence["shifted_rows"] for h in run(DOUBLE_SHIFT, lm_facts(three))] == [3]
    two = seqs(shifted(12, 0, 0), shifted(12, 20, 1), aligned(12, 200, 3))
    assert skip(DOUBLE_SHIFT, lm_facts(two)) == "train.jsonl: rows disagree: 1 aligned, 2 shifted"
    assert len(run(DOUBLE_SHIFT, lm_facts(two), ShiftLimits(row_agreement=2 / 3))) == 1
    tie = seqs(shifted(12, 0, 0), aligned(12, 20, 1), aligned(12, 40, 2), shifted(12, 60, 3))
    assert run(DOUBLE_SHIFT, lm_facts(tie), ShiftLimits(row_agreement=0.5)) == []


def test_shift_labels_longer_than_input_ids_compare_only_what_has_a_next_token():
    # labels one longer than input_ids: the last two labels have no next token to compare.
    ids = list(range(10))
    row = seq(ids, ids[1:] + [50, 51], 0)
    got = run(DOUBLE_SHIFT, lm_facts(seqs(*(row for _ in range(4)))))
    assert [h.evidence["positions"] for h in got] == [36]


def test_shift_a_shifted_row_that_repeats_one_token_still_votes_shifted():
    # ids 7, 7, 8, ...: the first label (the next id, 7) also equals its own id, 1 of 11
    # positions matching "aligned" - far under the match fraction, so the row votes shifted.
    ids = [7, 7, *range(8, 18)]
    row = seq(ids, ids[1:] + [-100], 0)
    got = run(DOUBLE_SHIFT, lm_facts(seqs(*(row for _ in range(4)))))
    assert [(h.evidence["shifted_rows"], h.evidence["informative_rows"], h.evidence["positions"]) for h in got] == [
        (4, 4, 44)]


def test_shift_an_aligned_row_at_the_match_fraction_votes_aligned():
    # 99 of 100 labels equal to their own input id is the limit for "aligned" too: beside
    # three shifted rows that row votes, so 4 rows tell (3 of 4 agree, the limit).
    ids = list(range(500, 601))
    near = seq(ids, [99_999] + ids[1:], 9)
    rows = seqs(*(shifted(12, 20 * k, k) for k in range(3)), near)
    got = run(DOUBLE_SHIFT, lm_facts(rows))
    assert [(h.evidence["shifted_rows"], h.evidence["informative_rows"]) for h in got] == [(3, 4)]
