"""Static lint of training scripts (ast; never imported): each TrainingArguments / SFTConfig
foot-gun on its exact line, values followed through constants, nothing run."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FIXTURES, REPO, ids, line_with, only, start_line
from trainproof_lsp.core.config import Config
from trainproof_lsp.judge.engine import IMPORTS_BY_ENV, doctor, judge_file
from trainproof_lsp.core.model import Level, Verdict

SCRIPTS = FIXTURES / "scripts"
FOOTGUNS = SCRIPTS / "sft_footguns.py"


def lint(path: Path):
    return judge_file(path, Config())


def write(tmp_path: Path, body: str, name: str = "train.py") -> Path:
    path = tmp_path / name
    path.write_text("from transformers import TrainingArguments, Trainer\n" + body, encoding="utf-8")
    return path


@pytest.mark.parametrize("rule_id,level", [
    ("TP-SCRIPT-ZERO-LR", Level.FAIL), ("TP-SCRIPT-WARMUP-EXCEEDS-RUN", Level.WARN),
    ("TP-SCRIPT-LOGGING-EXCEEDS-RUN", Level.WARN), ("TP-SCRIPT-FP16-BF16", Level.FAIL),
    ("TP-SCRIPT-EVAL-DISABLED", Level.WARN), ("TP-SCRIPT-BEST-CKPT-DELETED", Level.WARN),
])
def test_each_footgun_lands_on_its_marked_line(rule_id, level):
    f = only(lint(FOOTGUNS), rule_id)
    assert f.level is level
    assert start_line(f) == line_with(FOOTGUNS, f"# <- {rule_id}")


def test_zero_lr_through_a_module_constant_points_at_the_constant_too():
    f = only(lint(FOOTGUNS), "TP-SCRIPT-ZERO-LR")
    assert f.evidence["via"] == "LEARNING_RATE"
    assert start_line(f.related[0]) == line_with(FOOTGUNS, "the constant TP-SCRIPT-ZERO-LR follows")


def test_clean_script_passes_with_every_check_run():
    report = lint(SCRIPTS / "train_clean.py")
    assert report.verdict is Verdict.PASS and report.findings == ()
    # Every static check of the config ran; skipped: the model checks (it loads no model)
    # and the import check, which is env's.
    skipped = [(c.group, c.reason) for c in report.checks if not c.ran]
    no_model = 'the script loads no model with from_pretrained("name or folder")'
    no_lora = "no LoraConfig(target_modules=...) in the script"
    assert skipped == [("TP-SCRIPT-FP16-ON-BF16-MODEL", no_model), ("TP-SCRIPT-FP16-WEIGHTS-FULL-TRAIN", no_model),
                       ("TP-SCRIPT-LORA-TARGETS-NOT-FOUND", no_lora), ("TP-SCRIPT-LORA-TARGETS-PARTIAL", no_lora),
                       ("TP-ENV-IMPORT-FAIL", IMPORTS_BY_ENV)]


def test_values_through_function_constants_arithmetic_star_kwargs_and_attribute_sets(tmp_path):
    path = write(tmp_path, (
        "BASE = dict(bf16=True, max_steps=10)\n"
        "def main():\n"
        "    lr = 1e-4 * 0\n"
        "    args = TrainingArguments(output_dir='o', learning_rate=lr, **BASE)\n"
        "    args.fp16 = True\n"
        "    args.logging_steps = 50\n"
    ))
    report = lint(path)
    # (max_steps=10 with the default save_steps=500: no checkpoint before the last step)
    assert sorted(ids(report)) == ["TP-SCRIPT-FP16-BF16", "TP-SCRIPT-LOGGING-EXCEEDS-RUN",
                                   "TP-SCRIPT-NO-CHECKPOINT-SAVED", "TP-SCRIPT-ZERO-LR"]
    assert start_line(only(report, "TP-SCRIPT-FP16-BF16")) == line_with(path, "args.fp16")


def test_values_not_known_statically_make_the_check_stand_down(tmp_path):
    path = write(tmp_path, "import sys\nargs = TrainingArguments(output_dir='o', learning_rate=float(sys.argv[1]))\n")
    report = lint(path)
    assert ids(report) == []
    reason = next(c.reason for c in report.checks if c.group == "TP-SCRIPT-ZERO-LR")
    assert "learning_rate=float(sys.argv[1])" in reason


def test_a_name_assigned_twice_is_not_a_constant(tmp_path):
    path = write(tmp_path, "LR = 0.0\nLR = 3e-4\nargs = TrainingArguments(output_dir='o', learning_rate=LR)\n")
    assert ids(lint(path)) == []


def test_eval_dataset_with_evaluation_run_by_hand_is_fine(tmp_path):
    path = write(tmp_path, ("args = TrainingArguments(output_dir='o')\n"
                            "t = Trainer(model=None, args=args, eval_dataset=ds)\n"
                            "t.train()\nt.evaluate()\n"))
    assert ids(lint(path)) == []


def test_best_checkpoint_kept_with_load_best_model_at_end(tmp_path):
    path = write(tmp_path, ("args = TrainingArguments(output_dir='o', eval_strategy='epoch', save_strategy='epoch',"
                            " save_total_limit=1, load_best_model_at_end=True)\n"))
    assert ids(lint(path)) == []


def test_syntax_error_is_not_checked_with_its_line(tmp_path):
    path = write(tmp_path, "args = TrainingArguments(output_dir='o',\n")
    report = lint(path)
    assert report.verdict is Verdict.NOT_CHECKED
    assert report.reason.startswith(f"{path}:") and "not valid Python" in report.reason


def test_python_file_without_a_training_config_is_passed_over_in_a_folder(tmp_path):
    (tmp_path / "utils.py").write_text("def f():\n    return 1\n")
    shutil.copy(FOOTGUNS, tmp_path / "train.py")
    outcome = doctor([tmp_path], Config())
    assert [r.artefact.path for r in outcome.reports] == [str(tmp_path / "train.py")]
    assert str(tmp_path / "utils.py") in {n.path for n in outcome.passed_over}


def test_doctor_never_runs_a_script_without_main_guard(tmp_path):
    shutil.copy(SCRIPTS / "no_main_guard.py", tmp_path / "no_main_guard.py")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "trainproof_lsp", "doctor", "."], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no_main_guard.py: PASS" in proc.stdout
    assert not (tmp_path / "TRAINING_STARTED").exists()
