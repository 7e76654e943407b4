"""Every rule belongs to one family: the kind of record its check judges.

The judge calls a family's rules with that family's subject (rules_of); the docs name the
family's artefact kind (applies_to). These tests pin which rules each family holds, so a
rule moved to the wrong family (and so called with the wrong record) fails here as well as
under mypy.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from trainproof_lsp.rules import BY_ID, METRICS, REGISTRY, metric_rules, rules_of
from trainproof_lsp.rules import checkpoint, compare, dataset, env, script, script_best_strategy, tokenizer, tokens
from trainproof_lsp.rules import script_api, script_lora, script_precision, script_run
from trainproof_lsp.rules import labels, speech
from trainproof_lsp.rules.base import ANY


def test_each_fact_family_holds_exactly_its_modules_rules_in_registry_order():
    assert rules_of(checkpoint.CHECKPOINT) == checkpoint.RULES
    assert rules_of(env.ENV) == (*env.RULES, *script_api.RULES)
    assert rules_of(script.SCRIPT) == (*script.RULES, script_best_strategy.RULE, *script_run.RULES,
                                       *script_precision.RULES, *script_lora.RULES)
    assert rules_of(tokenizer.TOKENIZER) == tokenizer.TOKENIZER_RULES
    assert rules_of(dataset.DATASET) == dataset.DATASET_RULES
    assert rules_of(speech.SPEECH) == speech.SPEECH_RULES
    assert rules_of(labels.LABELS) == labels.RULES


def test_comparison_rules_are_the_compare_modules_checked_rules():
    ids = [r.id for r in rules_of(compare.COMPARISON)]
    assert ids == ["TP-FLOOR-RATIO", "TP-END-RATIO", "TP-NEG-IMPROVE", "TP-IMPROVE-DEFICIT", "TP-GRADNORM-RATIO",
                   "TP-EVAL-BEST-RATIO", "TP-EVAL-END-RATIO", "TP-OVERFIT-VS-BASELINE", "TP-BAD-BASELINE"]
    # Emitted by the judge itself (no check): in the family, never called.
    assert compare.UNCOMPARABLE_RULE.family is compare.COMPARISON and compare.UNCOMPARABLE_RULE.check is None


def test_token_counts_and_rendered_templates_are_two_families_of_one_artefact_kind():
    assert rules_of(tokens.TOKENS) == (tokens.OVERFLOW, tokens.NO_TRAINABLE)
    assert rules_of(tokens.TEMPLATES) == (tokens.TEMPLATE_ERROR,)
    assert {r.applies_to for r in tokens.TOKEN_RULES} == {"dataset"}
    assert tokens.TOKENS is not dataset.DATASET and tokens.TOKENS.kind == dataset.DATASET.kind


def test_metric_family_is_every_checked_metrics_rule():
    assert metric_rules() == tuple(r for r in REGISTRY if r.applies_to == "metrics" and r.check is not None)
    assert all(r.family is METRICS for r in metric_rules())
    assert BY_ID["TP-NOT-CHECKED"].family is ANY and BY_ID["TP-NOT-CHECKED"].applies_to == "any"


def test_every_registry_rule_is_in_exactly_one_family_with_a_known_kind():
    kinds = {"metrics", "comparison", "checkpoint", "script", "env", "dataset", "tokenizer", "speech", "labels", "bundle",
             "any"}
    assert {r.applies_to for r in REGISTRY} == kinds
    families = {id(r.family) for r in REGISTRY}
    covered = sum(len(rules_of(f)) for f in {id(r.family): r.family for r in REGISTRY}.values())
    assert covered == sum(1 for r in REGISTRY if r.check is not None)
    # metrics, any, comparison, checkpoint, script, env, dataset, tokens, templates, token map, tokenizer,
    # speech, the comparison of a DPO/GRPO run's reward (rules/objective_compare.py), an output
    # folder's bundle (rules/bundle.py) and the objective's labels (rules/labels.py)
    assert len(families) == 15


# --- the families are types: mypy refuses a check or a subject of another family ----------------

ROOT = Path(__file__).resolve().parents[1]


def _mypy(source: str) -> subprocess.CompletedProcess[str]:
    if importlib.util.find_spec("mypy") is None:
        pytest.skip("mypy is not installed (pip install -e '.[test]')")
    return subprocess.run([sys.executable, "-m", "mypy", "--no-incremental", "--config-file", "/dev/null",
                           "--python-version", "3.10", "--follow-imports=silent", "--no-error-summary",
                           "-c", source], cwd=ROOT, capture_output=True, text=True, timeout=300)


HEADER = """
from trainproof_lsp.core.model import Level
from trainproof_lsp.rules import rules_of
from trainproof_lsp.rules.base import Context, Rule
from trainproof_lsp.rules.checkpoint import CHECKPOINT, check_unsafe
from trainproof_lsp.rules.env import check_cwd
from trainproof_lsp.readers.envcheck import EnvFacts
"""


def test_a_check_of_the_rules_own_family_type_checks():
    done = _mypy(HEADER + "R = Rule(id='TP-X', name='x', level=Level.WARN, doc='x', family=CHECKPOINT, "
                          "check=check_unsafe)\n")
    assert done.returncode == 0, done.stdout


def test_a_check_of_another_family_is_a_type_error():
    done = _mypy(HEADER + "R = Rule(id='TP-X', name='x', level=Level.WARN, doc='x', family=CHECKPOINT, "
                          "check=check_cwd)\n")
    assert done.returncode == 1
    assert '<string>:8: error: Argument "check" to "Rule" has incompatible type' in done.stdout
    assert "EnvFacts" in done.stdout and "CheckpointFacts" in done.stdout


def test_calling_a_familys_check_with_another_record_is_a_type_error():
    done = _mypy(HEADER + "def judge(env: EnvFacts) -> None:\n"
                          "    for rule in rules_of(CHECKPOINT):\n"
                          "        if rule.check is not None:\n"
                          "            list(rule.check(env, None, Context()))\n")
    assert done.returncode == 1
    assert '<string>:11: error: Argument 1 has incompatible type "EnvFacts"; expected "CheckpointFacts"' in done.stdout
