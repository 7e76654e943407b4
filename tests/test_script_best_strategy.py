"""TP-SCRIPT-BEST-STRATEGY-MISMATCH: `load_best_model_at_end=True` with save and eval
strategies that differ (or save_steps not a multiple of eval_steps) makes
TrainingArguments raise at construction. Each case is also built with the real
transformers when it is installed: the rule fires exactly when TrainingArguments raises."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from trainproof_lsp.core.config import Config
from trainproof_lsp.judge.engine import judge_file
from trainproof_lsp.core.model import Level, Verdict

RULE = "TP-SCRIPT-BEST-STRATEGY-MISMATCH"

# (keywords as written in the script, fires)
CASES = [
    ('eval_strategy="no", load_best_model_at_end=True', True),
    ("load_best_model_at_end=True", True),  # HF defaults: save "steps", eval "no"
    ('eval_strategy="epoch", save_strategy="steps", load_best_model_at_end=True', True),
    ('evaluation_strategy="epoch", load_best_model_at_end=True', True),  # the older spelling
    ('eval_strategy="steps", eval_steps=300, save_steps=500, load_best_model_at_end=True', True),
    ('eval_strategy="steps", logging_steps=30, load_best_model_at_end=True', True),  # eval_steps <- logging_steps
    ('eval_strategy="steps", load_best_model_at_end=True', False),
    ('eval_strategy="steps", eval_steps=100, save_steps=500, load_best_model_at_end=True', False),
    ('eval_strategy="epoch", save_strategy="epoch", load_best_model_at_end=True', False),
    ('save_strategy="best", metric_for_best_model="loss", load_best_model_at_end=True', False),
    ('eval_strategy="no", load_best_model_at_end=False', False),
    ('eval_strategy="no"', False),
]


def script(tmp_path: Path, keywords: str) -> Path:
    path = tmp_path / "train.py"
    path.write_text("from transformers import TrainingArguments\n\n"
                    "args = TrainingArguments(\n"
                    '    output_dir="out",\n'
                    f"    {keywords},\n"
                    ")\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("keywords,fires", CASES)
def test_the_rule_fires_exactly_on_mismatched_strategies(tmp_path, keywords, fires):
    report = judge_file(script(tmp_path, keywords), Config())
    hits = [f for f in report.findings if f.id == RULE]
    assert len(hits) == (1 if fires else 0), [f.message for f in report.findings]
    assert any(c.group == RULE and c.ran for c in report.checks)
    if fires:
        (hit,) = hits
        assert hit.level is Level.FAIL and report.verdict is Verdict.FAIL
        # On the load_best_model_at_end keyword: line 5 (1-based), after the other keywords.
        assert hit.location.span.start_line == 4
        assert hit.location.span.start_char == 4 + keywords.index("load_best_model_at_end=True") + len(
            "load_best_model_at_end=")


def test_message_evidence_and_related_name_the_strategies(tmp_path):
    report = judge_file(script(tmp_path, 'eval_strategy="no", load_best_model_at_end=True'), Config())
    (hit,) = [f for f in report.findings if f.id == RULE]
    assert hit.message == ('TrainingArguments(load_best_model_at_end=True) needs the save and eval strategies to '
                           "match: save_strategy unset (HF default 'steps'), eval_strategy=\"no\"; "
                           "TrainingArguments raises ValueError before training starts")
    assert dict(hit.evidence) == {"save_strategy": "steps", "eval_strategy": "no", "config": "TrainingArguments"}
    assert [(r.location.span.start_line, r.message) for r in hit.related] == [(4, 'eval strategy: "no"')]


def test_steps_not_a_multiple_names_both_numbers(tmp_path):
    report = judge_file(script(tmp_path, 'eval_strategy="steps", eval_steps=300, save_steps=500, '
                                         'load_best_model_at_end=True'), Config())
    (hit,) = [f for f in report.findings if f.id == RULE]
    assert dict(hit.evidence) == {"save_steps": 500.0, "eval_steps": 300.0, "config": "TrainingArguments"}
    assert "500 is not a multiple of 300" in hit.message


def test_values_it_cannot_know_make_it_say_so(tmp_path):
    path = script(tmp_path, "load_best_model_at_end=True, **extra")
    report = judge_file(path, Config())
    assert not [f for f in report.findings if f.id == RULE]
    (check,) = [c for c in report.checks if c.group == RULE]
    assert not check.ran and "not known without running the script" in check.reason


@pytest.mark.parametrize("keywords,fires", CASES)
def test_the_real_training_arguments_raise_exactly_where_the_rule_fires(tmp_path, keywords, fires):
    transformers = pytest.importorskip("transformers", reason="transformers is in the peers extra")
    pytest.importorskip("accelerate", reason="TrainingArguments needs accelerate")
    parameters = inspect.signature(transformers.TrainingArguments).parameters
    namespace: dict = {}
    source = f"args = TrainingArguments(output_dir={str(tmp_path / 'out')!r}, report_to=[], {keywords})"
    if "evaluation_strategy" in keywords and "evaluation_strategy" not in parameters:
        # transformers 5 removed the older spelling: the call raises TypeError before it can
        # compare strategies, and env's API check says so at the keyword, with the new name.
        with pytest.raises(TypeError, match="evaluation_strategy"):
            exec(source, {"TrainingArguments": transformers.TrainingArguments}, namespace)  # noqa: S102
        (hit,) = _api_hits(script(tmp_path, keywords), transformers, parameters)
        assert hit.evidence["keyword"] == "evaluation_strategy" and hit.evidence["replacement"] == "eval_strategy"
        assert hit.location.span.start_line == 4 and hit.fix is not None and hit.fix.edits[0].new_text == "eval_strategy"
        return
    try:
        exec(source, {"TrainingArguments": transformers.TrainingArguments}, namespace)  # noqa: S102
        raised = False
    except ValueError as e:
        raised = "load_best_model_at_end" in str(e)
    assert raised == fires, keywords


def _api_hits(path: Path, transformers, parameters) -> list:
    """TP-SCRIPT-API-UNKNOWN-KEYWORD over the script, with the installed TrainingArguments'
    signature (read here as env's child reads it)."""
    from trainproof_lsp.readers.envcheck import ApiProbe, EnvFacts, Signature
    from trainproof_lsp.readers.script import read_script
    from trainproof_lsp.rules.base import Context, NoLimits
    from trainproof_lsp.rules.script_api import check_keywords

    sig = Signature(outcome="ok", library="transformers", version=transformers.__version__,
                    qualname="transformers.training_args.TrainingArguments",
                    params=tuple(n for n, p in parameters.items() if p.kind is not p.VAR_KEYWORD))
    calls = read_script(path).api_calls
    facts = EnvFacts(path=str(path), python="python", imports_requested=True,
                     api=tuple(ApiProbe(call=c, path=str(path), signature=sig) for c in calls))
    return list(check_keywords(facts, NoLimits(), Context()))


def _apply(path: Path, fix) -> str:
    lines = path.read_text(encoding="utf-8").split("\n")
    for e in sorted(fix.edits, key=lambda e: (e.span.start_line, e.span.start_char), reverse=True):
        line = lines[e.span.start_line]
        lines[e.span.start_line] = line[:e.span.start_char] + e.new_text + line[e.span.end_char:]
    return "\n".join(lines)


@pytest.mark.parametrize("keywords", [k for k, fires in CASES if fires])
def test_the_fix_makes_the_strategies_match_and_the_real_arguments_construct(tmp_path, keywords):
    path = script(tmp_path, keywords)
    (hit,) = [f for f in judge_file(path, Config()).findings if f.id == RULE]
    assert hit.fix is not None and hit.fix.safe is False
    path.write_text(_apply(path, hit.fix), encoding="utf-8")
    assert not [f for f in judge_file(path, Config()).findings if f.id == RULE], path.read_text()
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    fixed = path.read_text().split("TrainingArguments(\n", 1)[1].rsplit(")", 1)[0].replace('output_dir="out",', "")
    if "evaluation_strategy" in fixed and "evaluation_strategy" not in inspect.signature(
            transformers.TrainingArguments).parameters:
        return  # that spelling is TP-SCRIPT-API-UNKNOWN-KEYWORD's (its fix renames it)
    exec(f"TrainingArguments(output_dir={str(tmp_path / 'out')!r}, report_to=[], {fixed})",  # noqa: S102
         {"TrainingArguments": transformers.TrainingArguments})


def test_save_total_limit_one_gets_load_best_with_matching_strategies(tmp_path):
    path = tmp_path / "train.py"
    path.write_text('from transformers import TrainingArguments\nargs = TrainingArguments(output_dir="out", '
                    'eval_strategy="epoch", save_total_limit=1)\n', encoding="utf-8")
    (hit,) = [f for f in judge_file(path, Config()).findings if f.id == "TP-SCRIPT-BEST-CKPT-DELETED"]
    assert hit.fix.title == "keep the best checkpoint: load_best_model_at_end=True, save_strategy='epoch'"
    fixed = _apply(path, hit.fix)
    assert fixed.splitlines()[1] == ('args = TrainingArguments(output_dir="out", eval_strategy="epoch", '
                                     "save_total_limit=1, load_best_model_at_end=True, save_strategy='epoch')")
    path.write_text(fixed, encoding="utf-8")
    ids = {f.id for f in judge_file(path, Config()).findings}
    assert not ids & {"TP-SCRIPT-BEST-CKPT-DELETED", RULE}
