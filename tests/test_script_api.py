"""TP-SCRIPT-API-UNKNOWN-KEYWORD / TP-SCRIPT-API-BAD-VALUE: `env` binds the keywords of the
script's library calls to the installed classes' signatures (read in a child process of
the run's interpreter, never called) — checked here against the real transformers, trl,
peft and lightning of the test environment, and each finding is proved by running just
the offending call in a subprocess: it raises exactly where a finding is."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from trainproof_lsp.core.config import Config
from trainproof_lsp.core.model import Level, Span, Verdict
from trainproof_lsp.judge.engine import env
from trainproof_lsp.readers.envcheck import ApiProbe, EnvFacts, EnvRequest, Signature, _signatures
from trainproof_lsp.readers.script import read_script
from trainproof_lsp.rules.base import NoLimits, Context
from trainproof_lsp.rules.script_api import check_keywords

for _lib in ("transformers", "trl", "peft", "lightning", "accelerate"):
    pytest.importorskip(_lib, reason="the peers extra brings the real libraries")

IMPORTS = """\
import lightning as L
from transformers import BitsAndBytesConfig, Trainer, TrainingArguments
from trl import DPOConfig, GRPOConfig, SFTConfig
from peft import LoraConfig

"""
# One call per line, after the imports (line numbers below are 0-based).
CALLS = [
    'args = TrainingArguments(output_dir="out", evaluation_strategy="epoch", no_cuda=True, warmup_ratio=0.1)',
    "trainer = Trainer(model=None, args=args, tokenizer=None)",
    'sft = SFTConfig(output_dir="out", max_seq_length=512)',
    'dpo = DPOConfig(output_dir="out", max_prompt_length=128)',
    'grpo = GRPOConfig(output_dir="out", eval_strategy="epochs")',
    'lora = LoraConfig(r=8, lora_alhpa=16, target_modules=["q_proj"])',
    "bnb = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_typo=1)",  # takes **kwargs: no finding
    "fit = L.Trainer(gpus=1, max_epochs=2)",
    'ok = TrainingArguments(output_dir="out", eval_strategy="epoch", save_strategy="epoch")',
]
FIRST = IMPORTS.count("\n")
SCRIPT = IMPORTS + "\n".join(CALLS) + '\nopen("TOP_LEVEL_RAN", "w").write("ran")\n'

KEYWORD = "TP-SCRIPT-API-UNKNOWN-KEYWORD"
VALUE = "TP-SCRIPT-API-BAD-VALUE"
# (rule, call index, the text the finding's range covers, replacement / closest, the fix's new text)
EXPECTED = [
    (KEYWORD, 0, "evaluation_strategy", "eval_strategy", "eval_strategy"),
    (KEYWORD, 0, "no_cuda", "use_cpu", "use_cpu"),
    (KEYWORD, 0, "warmup_ratio", "warmup_steps", "warmup_steps"),
    (KEYWORD, 1, "tokenizer", "processing_class", "processing_class"),
    (KEYWORD, 2, "max_seq_length", "max_length", "max_length"),
    (KEYWORD, 3, "max_prompt_length", "", None),
    (VALUE, 4, '"epochs"', "epoch", "'epoch'"),
    (KEYWORD, 5, "lora_alhpa", "lora_alpha", "lora_alpha"),
    (KEYWORD, 7, "gpus", "", None),
]

# Runs each call alone (after the imports), with `args` bound, and prints what it raised.
PROVE = """\
import json, sys, warnings
warnings.simplefilter("ignore")
ns = {"args": None}
exec(sys.argv[1], ns)
out = []
for call in json.loads(sys.argv[2]):
    try:
        exec(call.replace('output_dir="out"', 'output_dir=%r, report_to=[], bf16=False' % sys.argv[3]), dict(ns))
        out.append("")
    except Exception as e:
        out.append(type(e).__name__)
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    folder = tmp_path_factory.mktemp("project")
    (folder / "train.py").write_text(SCRIPT, encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def report(project):
    request = EnvRequest(entrypoint=project / "train.py", cwd=project, python=sys.executable, timeout_s=300)
    (rep,) = env(request, Config()).reports
    return rep


def _fixed_calls(report) -> list[str]:
    """CALLS with every fix of the report applied (lightning's gpus and DPO's
    max_prompt_length have no mechanical fix: changed by hand)."""
    lines = SCRIPT.split("\n")
    edits = sorted(((e.span, e.new_text) for f in report.findings if f.fix for e in f.fix.edits),
                   key=lambda se: (se[0].start_line, -se[0].start_char))
    for span, text in edits:
        line = lines[span.start_line]
        lines[span.start_line] = line[:span.start_char] + text + line[span.end_char:]
    fixed = lines[FIRST:FIRST + len(CALLS)]
    fixed[3] = fixed[3].replace(", max_prompt_length=128", "")
    fixed[7] = fixed[7].replace("gpus=1", 'accelerator="cpu", devices=1')
    return fixed


@pytest.fixture(scope="module")
def raised(report, tmp_path_factory):
    """What each call raises under the real libraries, run one by one: as written, then
    with the report's fixes applied (one subprocess for both)."""
    out = tmp_path_factory.mktemp("out")
    calls = CALLS + _fixed_calls(report)
    proc = subprocess.run([sys.executable, "-c", PROVE, IMPORTS, json.dumps(calls), str(out)], cwd=out,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    return result[:len(CALLS)], result[len(CALLS):]


def _covered(span: Span) -> str:
    line = CALLS[span.start_line - FIRST]
    assert span.start_line == span.end_line
    return line[span.start_char:span.end_char]


def test_each_drifted_keyword_and_value_is_a_fail_at_its_own_text(report, project):
    api = [f for f in report.findings if f.id in (KEYWORD, VALUE)]
    got = [(f.id, f.location.span.start_line - FIRST, _covered(f.location.span), f.evidence.get("replacement",
            f.evidence.get("closest")), f.fix.edits[0].new_text if f.fix else None) for f in api]
    assert got == EXPECTED
    assert all(f.level is Level.FAIL for f in api) and report.verdict is Verdict.FAIL
    assert not (project / "TOP_LEVEL_RAN").exists()  # the script's own code never ran


def test_every_finding_is_where_the_real_library_raises_and_nowhere_else(report, raised):
    expected = {i: ("TypeError" if rule == KEYWORD else "ValueError") for rule, i, *_ in EXPECTED}
    assert raised[0] == [expected.get(i, "") for i in range(len(CALLS))]


def test_messages_name_the_installed_version_and_the_new_name(report):
    import transformers

    (hit,) = [f for f in report.findings if f.id == KEYWORD and f.evidence["keyword"] == "evaluation_strategy"]
    assert hit.message == (
        f"TrainingArguments(evaluation_strategy=...): transformers {transformers.__version__} TrainingArguments "
        "takes no keyword 'evaluation_strategy' (renamed eval_strategy); the call raises TypeError before "
        "training starts")
    assert hit.evidence["class"] == "transformers.training_args.TrainingArguments"
    (gpus,) = [f for f in report.findings if f.id == KEYWORD and f.evidence["keyword"] == "gpus"]
    assert 'use accelerator="gpu", devices=N' in gpus.message


def test_renames_are_safe_fixes_typos_and_values_are_suggestions(report):
    fixes = {f.evidence["keyword"]: f.fix for f in report.findings if f.id in (KEYWORD, VALUE) and f.fix}
    assert {k for k, fix in fixes.items() if fix.safe} == {"evaluation_strategy", "no_cuda", "warmup_ratio",
                                                          "tokenizer", "max_seq_length"}
    assert fixes["lora_alhpa"].safe is False and fixes["eval_strategy"].safe is False
    assert fixes["evaluation_strategy"].title == "rename evaluation_strategy to eval_strategy"


def test_the_fixed_script_binds_its_calls(raised):
    """Every fix applied, the real libraries bind every call: the configs construct, and
    Trainer gets past its arguments (it stops at model=None with RuntimeError, in its body)."""
    assert raised[1] == ["", "RuntimeError", "", "", "", "", "", "", ""]


def test_the_signature_child_never_imports_from_the_workspace(tmp_path, monkeypatch):
    """A workspace copy of `transformers`, even first on PYTHONPATH, is never imported:
    the installed class is read instead."""
    project = tmp_path / "project"
    fake = project / "transformers"
    fake.mkdir(parents=True)
    marker = tmp_path / "FAKE_IMPORTED"
    (fake / "__init__.py").write_text(f"open({str(marker)!r}, 'w').write('x')\nclass TrainingArguments:\n"
                                      "    def __init__(self, anything): pass\n", encoding="utf-8")
    script = project / "train.py"
    script.write_text("from transformers import TrainingArguments\nTrainingArguments(bogus_flag=1)\n",
                      encoding="utf-8")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(project), os.environ.get("PYTHONPATH", "")]))
    facts = read_script(script)
    probes, error = _signatures(sys.executable, facts.api_calls, str(script), 300, forbid=(str(project),))
    assert error == "" and not marker.exists()
    (probe,) = probes
    assert probe.signature.outcome == "ok"
    assert probe.signature.qualname == "transformers.training_args.TrainingArguments"
    assert "bogus_flag" not in probe.signature.params


def _probe(script: str, tmp_path: Path, sig: Signature) -> EnvFacts:
    path = tmp_path / "train.py"
    path.write_text(script, encoding="utf-8")
    calls = read_script(path).api_calls
    return EnvFacts(path=str(path), python=sys.executable, imports_requested=True,
                    api=tuple(ApiProbe(call=c, path=str(path), signature=sig) for c in calls))


def test_no_rename_when_the_new_name_is_passed_too_and_no_check_of_open_kwargs(tmp_path):
    sig = Signature(outcome="ok", library="transformers", version="5.0", qualname="x.TrainingArguments",
                    params=("output_dir", "eval_strategy"))
    facts = _probe('from transformers import TrainingArguments\n'
                   'TrainingArguments(evaluation_strategy="no", eval_strategy="no")\n', tmp_path, sig)
    (hit,) = check_keywords(facts, NoLimits(), Context())
    assert hit.fix is None and hit.evidence["replacement"] == "eval_strategy"
    open_sig = Signature(outcome="ok", library="transformers", params=("load_in_4bit",), var_keyword=True)
    facts = _probe("from transformers import BitsAndBytesConfig\nBitsAndBytesConfig(anything=1)\n", tmp_path, open_sig)
    assert list(check_keywords(facts, NoLimits(), Context())) == []


def test_classes_not_imported_from_a_library_are_not_checked(tmp_path):
    path = tmp_path / "train.py"
    path.write_text("from mylib import TrainingArguments\nclass Trainer: pass\n"
                    "TrainingArguments(x=1)\nTrainer(y=2)\n", encoding="utf-8")
    assert read_script(path).api_calls == ()
