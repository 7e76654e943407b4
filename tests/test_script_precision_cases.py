"""rules/script_precision.py, case by case: each finding whole (message, place, evidence,
related place, the fix's edit), when the fix cannot be made, the model's facts each rule
needs, several models and config calls in one script, the files each finding points into, and
the reason when no model's config.json is on disk."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainproof_lsp.core.config import Config
from trainproof_lsp.judge.engine import judge_file

BF16 = "TP-SCRIPT-FP16-ON-BF16-MODEL"
HALF = "TP-SCRIPT-FP16-WEIGHTS-FULL-TRAIN"
HEAD = "import torch\nfrom transformers import AutoModelForCausalLM, TrainingArguments\n"
LLAMA = {"model_type": "llama", "torch_dtype": "bfloat16"}
OPT = {"model_type": "opt", "torch_dtype": "float16"}
SAID_DTYPE = "its config.json says torch_dtype bfloat16"
FIX = "train in bf16 instead (bf16=True; needs an Ampere or newer GPU)"


def _judge(tmp_path: Path, source: str, **configs: dict) -> tuple[list[tuple], dict]:
    for name, config in configs.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text(json.dumps(config), encoding="utf-8")
    path = tmp_path / "train.py"
    path.write_text(source, encoding="utf-8")
    report = judge_file(path, Config())
    found = []
    for f in report.findings:
        if f.id in (BF16, HALF):
            s = f.location.span
            found.append((f.id, f.message, (s.start_line, s.start_char, s.end_line, s.end_char), dict(f.evidence),
                          [(r.location.span.start_line, r.message.replace(str(tmp_path) + "/", "")) for r in f.related],
                          f.fix and (f.fix.title, [((e.span.start_line, e.span.start_char, e.span.end_line,
                                                     e.span.end_char), e.new_text) for e in f.fix.edits])))
    checks = {c.group: c.reason for c in report.checks if c.group in (BF16, HALF)}
    return found, checks


def _bf16(why: str) -> str:
    return (f"fp16=True but the model model was pretrained in bfloat16 ({why}): fp16's range (max 65504) overflows "
            "where bf16's did not, the loss can turn NaN")


def _ev(torch_dtype: str, model_type: str) -> dict:
    return {"config": "TrainingArguments", "model": "model", "torch_dtype": torch_dtype, "model_type": model_type}


MODEL = 'model = AutoModelForCausalLM.from_pretrained("model")\n'

# the config call (after the model's line, line 3) -> the finding's place, and its fix's edit (or None)
FIXES = {
    'args = TrainingArguments(output_dir="o", fp16=True)\n': ((3, 46, 3, 50), ((3, 41, 3, 45), "bf16")),
    # spaces around "=": the keyword is still found
    'args = TrainingArguments(output_dir="o", fp16 = True)\n': ((3, 48, 3, 52), ((3, 41, 3, 45), "bf16")),
    # bf16 already written (False): renaming fp16 would write it twice
    'args = TrainingArguments(output_dir="o", fp16 = True, bf16=False)\n': ((3, 48, 3, 52), None),
}


@pytest.mark.parametrize("call", list(FIXES))
def test_fp16_on_a_bf16_model_whole_and_its_fix(tmp_path, call):
    at, edit = FIXES[call]
    found, checks = _judge(tmp_path, HEAD + MODEL + call, model=LLAMA)
    assert found == [(BF16, _bf16(SAID_DTYPE), at, _ev("bfloat16", "llama"), [(2, "the model, model/config.json")],
                      edit and (FIX, [edit]))]
    assert checks == {BF16: "", HALF: ""}


def test_fp16_through_a_constant_has_no_mechanical_fix(tmp_path):
    found, _ = _judge(tmp_path, HEAD + "FP16 = True\n" + MODEL + 'args = TrainingArguments(output_dir="o", fp16=FP16)\n',
                      model=LLAMA)
    assert [(f[2], f[5]) for f in found] == [((4, 46, 4, 50), None)]


def test_a_call_on_the_first_line_of_the_script_is_fixed_there(tmp_path):
    source = ('from transformers import AutoModelForCausalLM, TrainingArguments; '
              'args = TrainingArguments(output_dir="o", fp16=True)\n' + MODEL)
    found, _ = _judge(tmp_path, source, model=LLAMA)
    assert [(f[2], f[5]) for f in found] == [((0, 112, 0, 116), (FIX, [((0, 107, 0, 111), "bf16")]))]


@pytest.mark.parametrize("config,found", [
    ({"model_type": "t5"}, (_bf16("t5 models are pretrained in bfloat16"), _ev("", "t5"))),  # no dtype saved
    ({"torch_dtype": "bfloat16"}, (_bf16(SAID_DTYPE), _ev("bfloat16", ""))),              # no model type
    (OPT, None),
])
def test_either_fact_of_the_model_is_enough(tmp_path, config, found):
    hits, checks = _judge(tmp_path, HEAD + MODEL + 'args = TrainingArguments(output_dir="o", fp16=True)\n',
                          model=config)
    assert [(h[1], h[3]) for h in hits] == ([found] if found else [])
    assert checks[BF16] == ""


def test_fp16_false_is_quiet_and_no_model_is_said(tmp_path):
    found, checks = _judge(tmp_path, HEAD + MODEL + 'args = TrainingArguments(output_dir="o", fp16=False)\n',
                           model=LLAMA)
    assert (found, checks) == ([], {BF16: "", HALF: ""})
    (tmp_path / "none").mkdir()
    found, checks = _judge(tmp_path / "none", HEAD + 'args = TrainingArguments(output_dir="o", fp16=True)\n')
    reason = 'the script loads no model with from_pretrained("name or folder")'
    assert (found, checks) == ([], {BF16: reason, HALF: reason})


def test_every_model_and_call_is_judged_whatever_the_one_before_it_did(tmp_path):
    source = (HEAD + 'a = AutoModelForCausalLM.from_pretrained("opt")\n' + MODEL.replace("model =", "b =")
              + 'x = TrainingArguments(output_dir="o", fp16=False)\nargs = TrainingArguments(output_dir="o", fp16=True)\n')
    found, _ = _judge(tmp_path, source, model=LLAMA, opt=OPT)
    assert [(f[0], f[2], f[4]) for f in found] == [(BF16, (5, 46, 5, 50), [(3, "the model, model/config.json")])]


def test_fp16_weights_whole_after_a_model_and_a_call_passed_over(tmp_path):
    source = (HEAD + 'a = AutoModelForCausalLM.from_pretrained("model", torch_dtype=torch.bfloat16)\n'
              'b = AutoModelForCausalLM.from_pretrained("opt", torch_dtype=torch.float16)\n'
              'x = TrainingArguments(output_dir="o", fp16=False)\nargs = TrainingArguments(output_dir="o", fp16=True)\n')
    found, _ = _judge(tmp_path, source, opt=OPT)
    assert found == [(HALF, 'opt is loaded in float16 and trained in full with fp16=True: the fp16 gradient scaler '
                            'raises ValueError ("Attempting to unscale FP16 gradients") at the first optimizer step',
                      (3, 60, 3, 73), {"config": "TrainingArguments", "model": "opt", "load_dtype": "float16"},
                      [(5, "fp16 mixed precision is on here")], None)]


def test_a_script_with_adapters_says_only_they_train(tmp_path):
    source = (HEAD + 'b = AutoModelForCausalLM.from_pretrained("opt", torch_dtype=torch.float16)\n'
              "from peft import LoraConfig, get_peft_model\nb = get_peft_model(b, LoraConfig(r=8))\n"
              'args = TrainingArguments(output_dir="o", fp16=True)\n')
    found, checks = _judge(tmp_path, source, opt=OPT)
    assert (found, checks[HALF]) == ([], "the script sets up adapters: only they train")



def _places(tmp_path: Path, source: str, **configs: dict) -> list[tuple[str, str, list[str]]]:
    """(rule, the finding's file, its related places' files), files relative to tmp_path."""
    for name, config in configs.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text(json.dumps(config), encoding="utf-8")
    (tmp_path / "train.py").write_text(source, encoding="utf-8")
    report = judge_file(tmp_path / "train.py", Config())
    return [(f.id, str(Path(f.location.path).relative_to(tmp_path)),
             [str(Path(r.location.path).relative_to(tmp_path)) for r in f.related])
            for f in report.findings if f.id in (BF16, HALF)]


def test_both_findings_and_their_related_places_point_into_the_script(tmp_path):
    source = (HEAD + 'a = AutoModelForCausalLM.from_pretrained("model")\n'
              'b = AutoModelForCausalLM.from_pretrained("opt", torch_dtype=torch.float16)\n'
              'args = TrainingArguments(output_dir="o", fp16=True)\n')
    # in the order of their lines: the torch_dtype keyword, then fp16
    assert _places(tmp_path, source, model=LLAMA, opt=OPT) == [(HALF, "train.py", ["train.py"]),
                                                              (BF16, "train.py", ["train.py"])]


def test_without_any_models_config_on_disk_the_first_model_is_named(tmp_path):
    source = (HEAD + 'a = AutoModelForCausalLM.from_pretrained("first")\n'
              'b = AutoModelForCausalLM.from_pretrained("second")\n'
              'args = TrainingArguments(output_dir="o", fp16=True)\n')
    found, checks = _judge(tmp_path, source)
    assert (found, checks[BF16]) == ([], "the model's config.json is not on disk (first)")
