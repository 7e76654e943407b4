"""LoRA target_modules against the model's modules: names read from the safetensors weights
a tiny real Llama was saved with (transformers' save_pretrained), else from the
architecture's known layers; each case proved with the real PEFT get_peft_model."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from trainproof_lsp.core.config import Config
from trainproof_lsp.core.model import Level
from trainproof_lsp.judge.engine import judge_file

NONE = "TP-SCRIPT-LORA-TARGETS-NOT-FOUND"
PARTIAL = "TP-SCRIPT-LORA-TARGETS-PARTIAL"
SAVE = """\
import sys, warnings
warnings.simplefilter("ignore")
from transformers import LlamaConfig, LlamaForCausalLM
c = LlamaConfig(vocab_size=32, hidden_size=8, intermediate_size=16, num_hidden_layers=1, num_attention_heads=2,
                num_key_value_heads=1)
LlamaForCausalLM(c).save_pretrained(sys.argv[1])
"""
PROVE = """\
import json, sys, warnings
warnings.simplefilter("ignore")
from transformers import AutoModelForCausalLM
from peft import LoraConfig, get_peft_model
out = []
for targets in json.loads(sys.argv[2]):
    model = AutoModelForCausalLM.from_pretrained(sys.argv[1])
    try:
        m = get_peft_model(model, LoraConfig(r=2, target_modules=targets))
        out.append(sorted({n.split(".lora_A")[0].split(".")[-1] for n, p in m.named_parameters() if "lora_A" in n}))
    except ValueError as e:
        out.append("ValueError")
print(json.dumps(out))
"""
CASES = [  # (target_modules, rule or None, missing)
    ('["c_attn", "c_fc"]', NONE, "c_attn, c_fc"),  # GPT-2 names on a Llama
    ('["q_proj", "v_proj", "c_fc"]', PARTIAL, "c_fc"),
    ('["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]', None, ""),
    ('r".*\\.(q|v)_proj"', None, ""),
    ('"all-linear"', None, ""),
]


@pytest.fixture(scope="module")
def llama(tmp_path_factory) -> Path:
    pytest.importorskip("transformers")
    folder = tmp_path_factory.mktemp("project")
    proc = subprocess.run([sys.executable, "-c", SAVE, str(folder / "tiny-llama")], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (folder / "tiny-llama" / "model.safetensors").is_file()
    return folder


def script(folder: Path, targets: str, model: str = "tiny-llama") -> Path:
    path = folder / "train.py"
    path.write_text("from transformers import AutoModelForCausalLM, TrainingArguments\n"
                    "from peft import LoraConfig, get_peft_model\n"
                    f'model = AutoModelForCausalLM.from_pretrained("{model}")\n'
                    f"model = get_peft_model(model, LoraConfig(r=8, target_modules={targets}))\n"
                    'args = TrainingArguments(output_dir="out", max_steps=10, logging_steps=1, save_steps=5)\n',
                    encoding="utf-8")
    return path


@pytest.mark.parametrize("targets,rule,missing", CASES)
def test_targets_against_the_weights_module_names(llama, targets, rule, missing):
    report = judge_file(script(llama, targets), Config())
    found = [f for f in report.findings if f.id in (NONE, PARTIAL)]
    if rule is None:
        assert found == []
        return
    (hit,) = found
    assert hit.id == rule and hit.level is (Level.FAIL if rule == NONE else Level.WARN)
    assert hit.evidence["missing"] == missing
    assert hit.evidence["source"].startswith("the weights in ") and hit.evidence["source"].endswith("model.safetensors")
    line = (llama / "train.py").read_text().splitlines()[3]
    assert hit.location.span.start_line == 3 and line[hit.location.span.start_char:].startswith(targets)


def test_the_real_peft_agrees(llama):
    pytest.importorskip("peft")
    lists = [["c_attn", "c_fc"], ["q_proj", "v_proj", "c_fc"]]
    proc = subprocess.run([sys.executable, "-c", PROVE, str(llama / "tiny-llama"), json.dumps(lists)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == ["ValueError", ["q_proj", "v_proj"]]


def test_without_weights_the_architectures_known_names_are_used(tmp_path):
    (tmp_path / "gpt2").mkdir()
    (tmp_path / "gpt2" / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    report = judge_file(script(tmp_path, '["q_proj", "v_proj"]', model="gpt2"), Config())
    (hit,) = [f for f in report.findings if f.id == NONE]
    assert hit.evidence["source"] == "the gpt2 architecture's known layers"
    (tmp_path / "gpt2" / "config.json").write_text(json.dumps({"model_type": "brand-new"}))
    report = judge_file(script(tmp_path, '["q_proj"]', model="gpt2"), Config())
    (check,) = [c for c in report.checks if c.group == NONE]
    assert not check.ran and "has no known layer names" in check.reason
