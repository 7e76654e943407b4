"""The training config's precision against the model: fp16 on a bfloat16-pretrained model
(config.json dtypes of real families), and fp16 weights trained in full under fp16 AMP —
proved with torch's own gradient scaler, which refuses fp16 gradients."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainproof_lsp.core.config import Config
from trainproof_lsp.core.model import Level
from trainproof_lsp.judge.engine import judge_file

BF16 = "TP-SCRIPT-FP16-ON-BF16-MODEL"
HALF = "TP-SCRIPT-FP16-WEIGHTS-FULL-TRAIN"
# config.json fields as the real families publish them
FAMILIES = {
    "llama-3": ({"model_type": "llama", "torch_dtype": "bfloat16"}, True),
    "gemma-2": ({"model_type": "gemma2", "torch_dtype": "float32"}, True),  # a bf16 family saved in fp32
    "t5": ({"model_type": "t5", "torch_dtype": "float32"}, True),
    "qwen2.5": ({"model_type": "qwen2", "torch_dtype": "bfloat16"}, True),
    "gpt2": ({"model_type": "gpt2"}, False),
    "opt": ({"model_type": "opt", "torch_dtype": "float16"}, False),
}


def write(tmp_path: Path, config: dict | None, load: str = "", fp16: str = "fp16=True", extra: str = "") -> Path:
    if config is not None:
        (tmp_path / "model").mkdir(exist_ok=True)
        (tmp_path / "model" / "config.json").write_text(json.dumps(config))
    path = tmp_path / "train.py"
    path.write_text("import torch\nfrom transformers import AutoModelForCausalLM, TrainingArguments\n"
                    f'model = AutoModelForCausalLM.from_pretrained("model"{load})\n{extra}'
                    f'args = TrainingArguments(output_dir="out", {fp16}, max_steps=10, logging_steps=1, '
                    "save_steps=5)\n", encoding="utf-8")
    return path


def found(path: Path, rule: str) -> list:
    return [f for f in judge_file(path, Config()).findings if f.id == rule]


@pytest.mark.parametrize("family", list(FAMILIES))
def test_fp16_on_each_family_by_its_config_json(tmp_path, family):
    config, fires = FAMILIES[family]
    hits = found(write(tmp_path, config), BF16)
    assert len(hits) == (1 if fires else 0)
    if fires:
        (hit,) = hits
        assert hit.level is Level.WARN
        assert (hit.location.span.start_line, hit.evidence["model_type"]) == (3, config["model_type"])
        (edit,) = hit.fix.edits
        line = (tmp_path / "train.py").read_text().splitlines()[3]
        assert line[edit.span.start_char:edit.span.end_char] == "fp16" and edit.new_text == "bf16"


def test_bf16_training_is_quiet_and_a_missing_config_is_said(tmp_path):
    assert found(write(tmp_path, FAMILIES["llama-3"][0], fp16="bf16=True"), BF16) == []
    (tmp_path / "elsewhere").mkdir()
    report = judge_file(write(tmp_path / "elsewhere", None), Config())
    (check,) = [c for c in report.checks if c.group == BF16]
    assert not check.ran and check.reason == "the model's config.json is not on disk (model)"


@pytest.mark.parametrize("load,extra,fires", [
    (", torch_dtype=torch.float16", "", True),
    (', dtype="float16"', "", True),
    (", torch_dtype=torch.half", "", True),
    (", torch_dtype=torch.bfloat16", "", False),
    (", torch_dtype=torch.float16", "from peft import LoraConfig, get_peft_model\n"
                                    "model = get_peft_model(model, LoraConfig(r=8))\n", False),
])
def test_fp16_weights_trained_in_full_under_fp16_amp(tmp_path, load, extra, fires):
    hits = found(write(tmp_path, {"model_type": "opt", "torch_dtype": "float16"}, load=load, extra=extra), HALF)
    assert len(hits) == (1 if fires else 0)
    if fires:
        (hit,) = hits
        assert hit.level is Level.FAIL and hit.location.span.start_line == 2
        assert hit.related[0].location.span.start_line == 3 + extra.count("\n")


def test_the_real_gradient_scaler_refuses_fp16_parameters():
    """What the FAIL stands on: torch's AMP gradient scaler (the one the Trainer uses for
    fp16) raises on fp16 gradients and accepts fp32 ones."""
    torch = pytest.importorskip("torch")
    for dtype, raises in ((torch.float16, True), (torch.float32, False)):
        layer = torch.nn.Linear(4, 1).to(dtype)
        opt = torch.optim.SGD(layer.parameters(), lr=0.1)
        scaler = torch.amp.GradScaler("cpu")
        loss = layer(torch.ones(2, 4, dtype=dtype)).float().sum()
        scaler.scale(loss).backward()
        if raises:
            with pytest.raises(ValueError, match="Attempting to unscale FP16 gradients"):
                scaler.unscale_(opt)
        else:
            scaler.unscale_(opt)
