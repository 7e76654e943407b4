"""The objective's labels: configs and models saved by transformers (a tiny DistilBERT
classifier, a tiny Llama causal LM), datasets written by `datasets`, batches saved with
safetensors/numpy; each TP-OBJ rule firing at its line with its numbers, and quiet."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
datasets = pytest.importorskip("datasets")

from trainproof_lsp.cli import main  # noqa: E402
from trainproof_lsp.core.config import Config  # noqa: E402
from trainproof_lsp.core.model import Level, Verdict  # noqa: E402
from trainproof_lsp.judge.engine import doctor  # noqa: E402
from trainproof_lsp.judge.labels import judge_labels, preflight_labels  # noqa: E402
from trainproof_lsp.judge.preflight import preflight  # noqa: E402
from trainproof_lsp.judge.token_map import MapOptions  # noqa: E402

NAMES = {0: "negative", 1: "neutral", 2: "positive"}


def classifier(folder: Path) -> Path:
    """A 3-class DistilBERT classifier saved by transformers (config.json with id2label)."""
    cfg = transformers.AutoConfig.for_model("distilbert", vocab_size=64, dim=16, n_layers=1, n_heads=2,
                                            hidden_dim=32, max_position_embeddings=32, num_labels=3,
                                            id2label=NAMES, label2id={v: k for k, v in NAMES.items()})
    torch.manual_seed(0)
    transformers.AutoModelForSequenceClassification.from_config(cfg).save_pretrained(folder)
    return folder / "config.json"


def causal_lm(folder: Path):
    """A tiny Llama saved by transformers (config.json: LlamaForCausalLM, vocab_size 64)."""
    cfg = transformers.LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                   num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(cfg)
    model.save_pretrained(folder)
    return model


def texts(labels: list[int], path: Path, csv: bool = False) -> Path:
    ds = datasets.Dataset.from_dict({"text": [f"review number {i}" for i in range(len(labels))], "label": labels})
    if csv:
        ds.to_csv(str(path), index=False)
    else:
        ds.to_json(str(path))
    return path


def balanced(n: int = 30) -> list[int]:
    return [i % 3 for i in range(n)]


def found(report, rule_id: str) -> list:
    return [f for f in report.findings if f.id == rule_id]


def ran(report, rule_id: str) -> bool:
    return next(c for c in report.checks if c.group == rule_id).ran


def line_of(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines()) if text in line)


# --- targets outside [0, num_labels) -----------------------------------------------------------

def test_a_label_equal_to_num_labels_is_out_of_range_at_its_line(tmp_path):
    classifier(tmp_path)
    labels = balanced()
    labels[7] = 3  # a label map counted from 1
    report = judge_labels([texts(labels, tmp_path / "train.jsonl")], Config())
    got = found(report, "TP-OBJ-TARGET-OUT-OF-RANGE")
    assert [(f.location.span.start_line, f.evidence["label"], f.evidence["classes"], f.evidence["count"])
            for f in got] == [(7, 3, 3, 1)]
    assert got[0].level is Level.FAIL and report.verdict is Verdict.FAIL
    assert got[0].location.path == str(tmp_path / "train.jsonl")
    assert got[0].related[0].location.path == str(tmp_path / "config.json")
    # What the loss does with it: the real cross-entropy refuses a target of 3 among 3 classes.
    with pytest.raises(IndexError):
        torch.nn.functional.cross_entropy(torch.zeros(1, 3), torch.tensor([3]))


def test_labels_within_range_are_quiet_and_the_check_ran(tmp_path):
    classifier(tmp_path)
    report = judge_labels([texts(balanced(), tmp_path / "train.jsonl")], Config())
    assert report.verdict is Verdict.PASS, [f.message for f in report.findings]
    assert ran(report, "TP-OBJ-TARGET-OUT-OF-RANGE") and ran(report, "TP-OBJ-DEAD-CLASS")
    assert report.artefact.kind == "labels"


def test_csv_dataset_labels_are_read_at_their_lines(tmp_path):
    classifier(tmp_path)
    labels = balanced()
    labels[4] = -1  # not -100: cross-entropy indexes with it
    path = texts(labels, tmp_path / "train.csv", csv=True)
    report = judge_labels([path], Config())
    got = found(report, "TP-OBJ-TARGET-OUT-OF-RANGE")
    assert [(f.location.span.start_line, f.evidence["label"]) for f in got] == [(5, -1)]  # the header is line 0
    assert line_of(path, "review number 4,") == 5


# --- a class absent from train -----------------------------------------------------------------

def test_a_class_absent_from_train_is_a_dead_class_at_its_id2label_line(tmp_path):
    config = classifier(tmp_path)
    report = judge_labels([texts([i % 2 for i in range(30)], tmp_path / "train.jsonl")], Config())
    got = found(report, "TP-OBJ-DEAD-CLASS")
    assert [(f.location.path, f.location.span.start_line, dict(f.evidence)) for f in got] == \
        [(str(config), line_of(config, '"2": "positive"'), {"class": 2, "classes": 3, "seen": 2, "rows": 30})]
    assert "'positive'" in got[0].message and got[0].level is Level.FAIL


def test_dead_class_stands_down_on_too_few_rows_and_is_quiet_when_every_class_occurs(tmp_path):
    classifier(tmp_path)
    report = judge_labels([texts([0, 1, 0, 1, 0, 1], tmp_path / "train.jsonl")], Config())
    check = next(c for c in report.checks if c.group == "TP-OBJ-DEAD-CLASS")
    assert not check.ran and check.reason.startswith("6 labelled training rows for 3 classes")
    assert found(report, "TP-OBJ-DEAD-CLASS") == []
    report = judge_labels([texts(balanced(), tmp_path / "train.jsonl")], Config())
    assert ran(report, "TP-OBJ-DEAD-CLASS") and found(report, "TP-OBJ-DEAD-CLASS") == []


def test_an_eval_set_missing_a_class_is_no_dead_class(tmp_path):
    classifier(tmp_path)
    report = judge_labels([texts(balanced(), tmp_path / "train.jsonl")], Config(),
                          eval_paths=[texts([0, 1] * 15, tmp_path / "eval.jsonl")])
    assert found(report, "TP-OBJ-DEAD-CLASS") == []


# --- ignore_index on a real class ------------------------------------------------------------------

SCRIPT = """import torch.nn as nn
from transformers import AutoModelForSequenceClassification

model = AutoModelForSequenceClassification.from_pretrained("{model}")
loss_fct = nn.CrossEntropyLoss(ignore_index={ignore})
"""


def test_ignore_index_0_with_0_a_real_class_is_a_collision_at_the_first_row_of_class_0(tmp_path):
    classifier(tmp_path / "model")
    labels = [1, 2, 0, 1, 0, 2] * 5
    data = texts(labels, tmp_path / "train.jsonl")
    script = tmp_path / "train.py"
    script.write_text(SCRIPT.format(model="model", ignore=0))
    report = preflight_labels([data], Config(), train_config=script)
    got = found(report, "TP-OBJ-IGNORE-INDEX-COLLISION")
    assert [(f.location.path, f.location.span.start_line, f.evidence["ignore_index"], f.evidence["dropped"],
             f.evidence["targets"]) for f in got] == [(str(data), 2, 0, 10, 30)]
    assert "'negative'" in got[0].message
    rel = {r.message: (r.location.path, r.location.span.start_line) for r in got[0].related}
    assert rel["CrossEntropyLoss(ignore_index=0)"] == (str(script), 4)
    assert rel["class 0 in id2label"][0] == str(tmp_path / "model" / "config.json")
    # What the real loss does: with ignore_index=0 the class-0 targets contribute nothing.
    logits = torch.randn(len(labels), 3, generator=torch.Generator().manual_seed(0))
    target = torch.tensor(labels)
    kept = target != 0
    assert torch.allclose(torch.nn.functional.cross_entropy(logits, target, ignore_index=0),
                          torch.nn.functional.cross_entropy(logits[kept], target[kept]))


@pytest.mark.parametrize("ignore", [-100, 3])
def test_ignore_index_outside_the_classes_is_quiet(tmp_path, ignore):
    classifier(tmp_path / "model")
    data = texts(balanced(), tmp_path / "train.jsonl")
    script = tmp_path / "train.py"
    script.write_text(SCRIPT.format(model="model", ignore=ignore))
    report = preflight_labels([data], Config(), train_config=script)
    assert ran(report, "TP-OBJ-IGNORE-INDEX-COLLISION") and report.verdict is Verdict.PASS


def test_label_pad_token_id_of_a_real_token_collides_for_a_causal_lm(tmp_path):
    causal_lm(tmp_path)
    rows = _rows(4)
    data = _lm_data(tmp_path / "train.jsonl", rows, [list(r) for r in rows])
    script = tmp_path / "train.py"
    script.write_text("from transformers import AutoModelForCausalLM, DataCollatorForSeq2Seq\n"
                      "model = AutoModelForCausalLM.from_pretrained('.')\n"
                      "collator = DataCollatorForSeq2Seq(None, label_pad_token_id=0)\n")
    report = preflight_labels([data], Config(), train_config=script)
    got = found(report, "TP-OBJ-IGNORE-INDEX-COLLISION")
    assert [(f.evidence["ignore_index"], f.evidence["classes"]) for f in got] == [(0, 64)]


# --- labels shifted twice ------------------------------------------------------------------------

def _rows(n: int, length: int = 24) -> list[list[int]]:
    g = torch.Generator().manual_seed(1)
    return [torch.randint(1, 64, (length,), generator=g).tolist() for _ in range(n)]


def _lm_data(path: Path, ids: list[list[int]], labels: list[list[int]]) -> Path:
    datasets.Dataset.from_dict({"input_ids": ids, "labels": labels}).to_json(str(path))
    return path


def test_pre_shifted_labels_for_a_causal_lm_are_a_double_shift_at_the_first_row(tmp_path):
    causal_lm(tmp_path)
    ids = _rows(10)
    shifted = [r[1:] + [-100] for r in ids]  # labels = input_ids[1:], padded to length
    report = judge_labels([_lm_data(tmp_path / "train.jsonl", ids, shifted)], Config())
    got = found(report, "TP-OBJ-LABEL-SHIFT-DOUBLE")
    assert [(f.location.span.start_line, dict(f.evidence)) for f in got] == \
        [(0, {"shifted_rows": 10, "informative_rows": 10, "positions": 230, "line": 1, "row": None})]
    assert "LlamaForCausalLM" in got[0].message and report.verdict is Verdict.FAIL


def test_aligned_labels_are_quiet(tmp_path):
    causal_lm(tmp_path)
    ids = _rows(10)
    report = judge_labels([_lm_data(tmp_path / "train.jsonl", ids, [list(r) for r in ids])], Config())
    assert ran(report, "TP-OBJ-LABEL-SHIFT-DOUBLE") and report.verdict is Verdict.PASS


def test_the_real_model_trains_two_tokens_ahead_on_pre_shifted_labels(tmp_path):
    model = causal_lm(tmp_path).eval()
    ids = torch.tensor(_rows(4))
    shifted = torch.cat([ids[:, 1:], torch.full((4, 1), -100)], dim=1)
    with torch.no_grad():
        logits = model(input_ids=ids).logits
        proper = model(input_ids=ids, labels=ids).loss
        twice = model(input_ids=ids, labels=shifted).loss
    ce = torch.nn.functional.cross_entropy
    # Proper labels: position i is scored against the next token; pre-shifted: two ahead.
    assert torch.allclose(proper, ce(logits[:, :-1].reshape(-1, 64), ids[:, 1:].reshape(-1)), atol=1e-5)
    assert torch.allclose(twice, ce(logits[:, :-2].reshape(-1, 64), ids[:, 2:].reshape(-1)), atol=1e-5)
    assert not torch.allclose(proper, twice)


def test_a_language_modeling_collator_rebuilds_labels_and_the_shift_check_stands_down(tmp_path):
    causal_lm(tmp_path)
    ids = _rows(10)
    data = _lm_data(tmp_path / "train.jsonl", ids, [r[1:] + [-100] for r in ids])
    script = tmp_path / "train.py"
    script.write_text("from transformers import AutoModelForCausalLM, DataCollatorForLanguageModeling\n"
                      "model = AutoModelForCausalLM.from_pretrained('.')\n"
                      "collator = DataCollatorForLanguageModeling(tokenizer=None, mlm=False)\n")
    report = preflight_labels([data], Config(), train_config=script)
    check = next(c for c in report.checks if c.group == "TP-OBJ-LABEL-SHIFT-DOUBLE")
    assert not check.ran and "builds the labels from input_ids" in check.reason
    assert found(report, "TP-OBJ-LABEL-SHIFT-DOUBLE") == []


# --- one saved batch ---------------------------------------------------------------------------------

def test_a_safetensors_batch_with_pre_shifted_labels_is_located_at_its_row(tmp_path):
    st = pytest.importorskip("safetensors.torch")
    causal_lm(tmp_path)
    ids = torch.tensor(_rows(8))
    batch = tmp_path / "batch.safetensors"
    st.save_file({"input_ids": ids, "labels": torch.cat([ids[:, 1:], torch.full((8, 1), -100)], dim=1)}, batch)
    report = judge_labels([], Config(), batch=batch, search=[tmp_path])
    got = found(report, "TP-OBJ-LABEL-SHIFT-DOUBLE")
    assert [(f.location.path, f.location.record, f.evidence["shifted_rows"]) for f in got] == [(str(batch), 0, 8)]


def test_an_npz_batch_with_a_label_past_the_classes(tmp_path):
    np = pytest.importorskip("numpy")
    classifier(tmp_path)
    batch = tmp_path / "batch.npz"
    np.savez(batch, input_ids=np.ones((4, 5), dtype=np.int64), labels=np.array([0, 2, 5, 1]))
    report = judge_labels([], Config(), batch=batch, search=[tmp_path])
    got = found(report, "TP-OBJ-TARGET-OUT-OF-RANGE")
    assert [(f.location.record, f.evidence["label"], f.evidence["classes"]) for f in got] == [(2, 5, 3)]


class _Marker:
    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (Path.touch, (Path(self.path),))


def test_a_pt_batch_is_never_unpickled_and_is_not_checked(tmp_path):
    classifier(tmp_path)
    marker = tmp_path / "unpickled"
    batch = tmp_path / "batch.pt"
    batch.write_bytes(pickle.dumps({"labels": _Marker(str(marker))}))
    report = judge_labels([texts(balanced(), tmp_path / "train.jsonl")], Config(), batch=batch)
    assert not marker.exists()
    nc = [f.message for f in report.findings if f.id == "TP-NOT-CHECKED"]
    assert len(nc) == 1 and "never unpickled" in nc[0] and "safetensors" in nc[0]
    assert report.verdict is Verdict.NOT_CHECKED


# --- doors: preflight, doctor, the command line ------------------------------------------------------

def test_preflight_adds_the_labels_report_beside_the_dataset_report(tmp_path):
    classifier(tmp_path)
    labels = balanced()
    labels[3] = 3
    data = texts(labels, tmp_path / "train.jsonl")
    outcome = preflight([data], Config(), map_options=MapOptions())
    kinds = [r.artefact.kind for r in outcome.reports]
    assert kinds == ["dataset", "labels"]
    assert [f.location.span.start_line for f in found(outcome.reports[1], "TP-OBJ-TARGET-OUT-OF-RANGE")] == [3]


def test_doctor_judges_a_folders_labels_with_its_config(tmp_path):
    classifier(tmp_path)
    texts([i % 2 for i in range(30)], tmp_path / "train.jsonl")
    outcome = doctor([tmp_path], Config())
    labels = [r for r in outcome.reports if r.artefact.kind == "labels"]
    assert len(labels) == 1 and [f.evidence["class"] for f in found(labels[0], "TP-OBJ-DEAD-CLASS")] == [2]


def test_a_text_dataset_without_labels_gets_no_labels_report(tmp_path):
    classifier(tmp_path)
    path = tmp_path / "train.jsonl"
    path.write_text("".join(json.dumps({"text": f"row {i}"}) + "\n" for i in range(10)))
    assert judge_labels([path], Config()) is None


def test_cli_preflight_batch_json(tmp_path, capsys):
    causal_lm(tmp_path)
    ids = _rows(8)
    batch = tmp_path / "batch.json"
    batch.write_text(json.dumps({"input_ids": ids, "labels": [r[1:] + [-100] for r in ids]}))
    data = _lm_data(tmp_path / "train.jsonl", ids, [list(r) for r in ids])
    code = main(["preflight", str(data), "--batch", str(batch), "--json", "--jobs", "1"])
    out = json.loads(capsys.readouterr().out)
    assert code == 1
    ids_fired = [(f["id"], f["location"]["path"]) for r in out["reports"] for f in r["findings"]
                 if f["id"].startswith("TP-OBJ")]
    assert ids_fired == [("TP-OBJ-LABEL-SHIFT-DOUBLE", str(batch))]


# --- other label shapes, and what cannot be read ----------------------------------------------------

def test_multi_label_rows_count_a_class_where_its_position_is_ever_one(tmp_path):
    config = classifier(tmp_path)
    doc = json.loads(config.read_text())
    doc["problem_type"] = "multi_label_classification"
    config.write_text(json.dumps(doc, indent=2))
    path = tmp_path / "train.jsonl"
    rows = [[1, 0, 0], [0, 1, 0], [1, 1, 0]] * 10  # class 2 is never set
    path.write_text("".join(json.dumps({"text": f"t{i}", "labels": r}) + "\n" for i, r in enumerate(rows)))
    report = judge_labels([path], Config())
    got = found(report, "TP-OBJ-DEAD-CLASS")
    assert [(f.location.span.start_line, f.evidence["class"]) for f in got] == [(line_of(config, '"2": "positive"'), 2)]
    assert found(report, "TP-OBJ-TARGET-OUT-OF-RANGE") == []  # 0/1 positions are not class ids
    rows[4] = [0, 0, 1]
    path.write_text("".join(json.dumps({"text": f"t{i}", "labels": r}) + "\n" for i, r in enumerate(rows)))
    assert found(judge_labels([path], Config()), "TP-OBJ-DEAD-CLASS") == []


def test_a_regression_head_has_no_classes_to_judge(tmp_path):
    cfg = transformers.AutoConfig.for_model("distilbert", vocab_size=64, dim=16, n_layers=1, n_heads=2,
                                            hidden_dim=32, num_labels=1, problem_type="regression",
                                            architectures=["DistilBertForSequenceClassification"])
    cfg.save_pretrained(tmp_path)
    path = tmp_path / "train.jsonl"
    path.write_text("".join(json.dumps({"text": f"t{i}", "label": 7}) + "\n" for i in range(20)))
    report = judge_labels([path], Config())
    check = next(c for c in report.checks if c.group == "TP-OBJ-TARGET-OUT-OF-RANGE")
    assert not check.ran and "regression" in check.reason and report.verdict is Verdict.PASS


def test_a_cut_safetensors_batch_is_not_checked_in_one_line(tmp_path):
    st = pytest.importorskip("safetensors.torch")
    causal_lm(tmp_path)
    batch = tmp_path / "batch.safetensors"
    st.save_file({"input_ids": torch.ones(2, 8, dtype=torch.int64), "labels": torch.ones(2, 8, dtype=torch.int64)},
                 batch)
    batch.write_bytes(batch.read_bytes()[:-40])
    report = judge_labels([], Config(), batch=batch, search=[tmp_path])
    nc = [f.message for f in report.findings if f.id == "TP-NOT-CHECKED"]
    assert nc == [f"--batch not read: {batch}: tensor 'labels' (16 values) does not fit the file's bytes"]  # the last tensor
    assert report.verdict is Verdict.NOT_CHECKED


def test_the_shift_is_not_judged_for_a_model_whose_loss_is_not_known_to_shift(tmp_path):
    classifier(tmp_path)
    ids = _rows(10)
    report = judge_labels([_lm_data(tmp_path / "train.jsonl", ids, [r[1:] + [-100] for r in ids])], Config())
    check = next(c for c in report.checks if c.group == "TP-OBJ-LABEL-SHIFT-DOUBLE")
    assert not check.ran and "not known" in check.reason
