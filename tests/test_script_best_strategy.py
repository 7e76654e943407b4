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


# --- the whole finding, and what the check says when it cannot judge ----------------------

_PREFIX = "TrainingArguments(load_best_model_at_end=True) "
_RAISES = "; TrainingArguments raises ValueError before training starts"
_STEPS = 'with both strategies "steps" needs save_steps to be a round multiple of eval_steps: '

# keywords -> (message between the prefix and the tail, evidence, related (line, message),
# fix (title, [(line, column, new text)]))
WHOLE = {
    'eval_strategy="no", load_best_model_at_end=True': (
        "needs the save and eval strategies to match: save_strategy unset (HF default 'steps'), "
        'eval_strategy="no"',
        {"save_strategy": "steps", "eval_strategy": "no"}, [(4, 'eval strategy: "no"')],
        ("set eval_strategy='steps' to match", [(4, 18, "'steps'")])),
    "load_best_model_at_end=True": (
        "needs the save and eval strategies to match: save_strategy unset (HF default 'steps'), "
        "eval_strategy unset (HF default 'no')",
        {"save_strategy": "steps", "eval_strategy": "no"}, [],
        ("set eval_strategy='steps' to match", [(4, 31, ", eval_strategy='steps'")])),
    'eval_strategy="epoch", save_strategy="steps", load_best_model_at_end=True': (
        'needs the save and eval strategies to match: save_strategy="steps", eval_strategy="epoch"',
        {"save_strategy": "steps", "eval_strategy": "epoch"},
        [(4, 'save strategy: "steps"'), (4, 'eval strategy: "epoch"')],
        ("set save_strategy='epoch' to match", [(4, 41, "'epoch'")])),
    'save_strategy="epoch", eval_strategy="steps", load_best_model_at_end=True': (
        'needs the save and eval strategies to match: save_strategy="epoch", eval_strategy="steps"',
        {"save_strategy": "epoch", "eval_strategy": "steps"},
        [(4, 'save strategy: "epoch"'), (4, 'eval strategy: "steps"')],
        ("set save_strategy='steps' to match", [(4, 18, "'steps'")])),
    'evaluation_strategy="epoch", load_best_model_at_end=True': (
        "needs the save and eval strategies to match: save_strategy unset (HF default 'steps'), "
        'evaluation_strategy="epoch"',
        {"save_strategy": "steps", "eval_strategy": "epoch"}, [(4, 'eval strategy: "epoch"')],
        ("set save_strategy='epoch' to match", [(4, 60, ", save_strategy='epoch'")])),
    # the older spelling is kept in the fix when it is the one written
    'evaluation_strategy="no", load_best_model_at_end=True': (
        "needs the save and eval strategies to match: save_strategy unset (HF default 'steps'), "
        'evaluation_strategy="no"',
        {"save_strategy": "steps", "eval_strategy": "no"}, [(4, 'eval strategy: "no"')],
        ("set evaluation_strategy='steps' to match", [(4, 24, "'steps'")])),
    'eval_strategy="steps", eval_steps=300, save_steps=500, load_best_model_at_end=True': (
        _STEPS + "500 is not a multiple of 300",
        {"save_steps": 500.0, "eval_steps": 300.0}, [(4, "save_steps: 500"), (4, "eval_steps: 300")],
        ("set save_steps to 300 (a multiple of eval_steps 300)", [(4, 54, "300")])),
    # eval_steps unset falls back to logging_steps
    'eval_strategy="steps", logging_steps=30, load_best_model_at_end=True': (
        _STEPS + "500 is not a multiple of 30",
        {"save_steps": 500.0, "eval_steps": 30.0}, [],
        ("set save_steps to 480 (a multiple of eval_steps 30)", [(4, 72, ", save_steps=480")])),
    # ... and logging_steps unset to HF's 500; a save_steps below it is set up to one eval
    'eval_strategy="steps", save_steps=300, load_best_model_at_end=True': (
        _STEPS + "300 is not a multiple of 500",
        {"save_steps": 300.0, "eval_steps": 500.0}, [(4, "save_steps: 300")],
        ("set save_steps to 500 (a multiple of eval_steps 500)", [(4, 38, "500")])),
    # save_steps of exactly 1 is a step count (below 1 it is a fraction of the run)
    'eval_strategy="steps", eval_steps=3, save_steps=1, load_best_model_at_end=True': (
        _STEPS + "1 is not a multiple of 3",
        {"save_steps": 1.0, "eval_steps": 3.0}, [(4, "save_steps: 1"), (4, "eval_steps: 3")],
        ("set save_steps to 3 (a multiple of eval_steps 3)", [(4, 52, "3")])),
}


@pytest.mark.parametrize("keywords", list(WHOLE))
def test_the_whole_finding(tmp_path, keywords):
    message, evidence, related, (title, edits) = WHOLE[keywords]
    report = judge_file(script(tmp_path, keywords), Config())
    (hit,) = [f for f in report.findings if f.id == RULE]
    assert hit.message == _PREFIX + message + _RAISES
    assert dict(hit.evidence) == {**evidence, "config": "TrainingArguments"}
    assert [(r.location.span.start_line, r.message) for r in hit.related] == related
    assert hit.fix is not None and hit.fix.title == title
    assert [(e.span.start_line, e.span.start_char, e.new_text) for e in hit.fix.edits] == edits


_UNKNOWN = "not known without running the script: "
_HIDDEN = _UNKNOWN + "the save/eval strategy of TrainingArguments(..., **...)"

# the config calls (after `import os`) -> the check's reason ("" when it ran); none finds anything
OUTCOMES = [
    ('TrainingArguments(output_dir="o", load_best_model_at_end=True, **extra)', _HIDDEN),
    # one strategy written, the other maybe in **extra
    ('TrainingArguments(output_dir="o", eval_strategy="epoch", load_best_model_at_end=True, **extra)', _HIDDEN),
    ('TrainingArguments(output_dir="o", save_strategy="steps", load_best_model_at_end=True, **extra)', _HIDDEN),
    # values the source does not fix: named in the reason, each keyword by its own name
    ('TrainingArguments(output_dir="o", save_strategy=os.environ["S"], load_best_model_at_end=True)',
     _UNKNOWN + 'save_strategy=os.environ["S"]'),
    ('TrainingArguments(output_dir="o", eval_strategy=os.environ["S"], load_best_model_at_end=True)',
     _UNKNOWN + 'eval_strategy=os.environ["S"]'),
    ('TrainingArguments(output_dir="o", evaluation_strategy=os.environ["S"], load_best_model_at_end=True)',
     _UNKNOWN + 'evaluation_strategy=os.environ["S"]'),
    ('TrainingArguments(output_dir="o", load_best_model_at_end=os.environ["B"] == "1")',
     _UNKNOWN + 'load_best_model_at_end=os.environ["B"] == "1"'),
    # a strategy that is not a string, a step count that is a bool: not judged, and nothing hidden
    ('TrainingArguments(output_dir="o", save_strategy=1, load_best_model_at_end=True)', ""),
    ('TrainingArguments(output_dir="o", eval_strategy="steps", eval_steps=300, save_steps=True, '
     'load_best_model_at_end=True)', ""),
    # fractions of the run (below 1) are HF's to check at train time
    ('TrainingArguments(output_dir="o", eval_strategy="steps", eval_steps=100, save_steps=0.5, '
     'load_best_model_at_end=True)', ""),
    ('TrainingArguments(output_dir="o", eval_strategy="steps", eval_steps=0.1, save_steps=0.5, '
     'load_best_model_at_end=True)', ""),
    # **extra without load_best_model_at_end anywhere: nothing asks for the match
    ("TrainingArguments(**extra)", ""),
    # another call that decides the check keeps it from standing down for this one
    ('TrainingArguments(output_dir="a")\n'
     'b = TrainingArguments(output_dir="o", save_strategy=os.environ["S"], load_best_model_at_end=True)', ""),
    ('TrainingArguments(output_dir="a", load_best_model_at_end=False, **extra)\n'
     'b = TrainingArguments(output_dir="o", save_strategy=os.environ["S"], load_best_model_at_end=True)', ""),
    ('TrainingArguments(output_dir="a", eval_strategy="epoch", save_strategy="epoch", load_best_model_at_end=True)\n'
     'b = TrainingArguments(output_dir="o", load_best_model_at_end=os.environ["B"] == "1")', ""),
    ('TrainingArguments(output_dir="a")\n'
     'b = TrainingArguments(output_dir="o", load_best_model_at_end=True, **extra)', ""),
]


def _calls(tmp_path: Path, calls: str) -> Path:
    path = tmp_path / "train.py"
    path.write_text(f"import os\nfrom transformers import TrainingArguments\n\na = {calls}\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("calls,reason", OUTCOMES)
def test_what_the_check_says_when_it_finds_nothing(tmp_path, calls, reason):
    report = judge_file(_calls(tmp_path, calls), Config())
    assert not [f for f in report.findings if f.id == RULE], [f.message for f in report.findings]
    (check,) = [c for c in report.checks if c.group == RULE]
    assert (check.ran, check.reason) == (not reason, reason)


# a call before the one that fires, in each way a call can leave the check undecided or passed
BEFORE = [
    'TrainingArguments(output_dir="a")',
    'TrainingArguments(output_dir="a", load_best_model_at_end=False)',
    'TrainingArguments(output_dir="a", load_best_model_at_end=os.environ["B"] == "1")',
    'TrainingArguments(output_dir="a", load_best_model_at_end=True, **extra)',
    'TrainingArguments(output_dir="a", save_strategy="best", load_best_model_at_end=True)',
    'TrainingArguments(output_dir="a", eval_strategy="no", load_best_model_at_end=True)',  # fires too
    'TrainingArguments(output_dir="a", eval_strategy="epoch", save_strategy="epoch", load_best_model_at_end=True)',
    'TrainingArguments(output_dir="a", eval_strategy="steps", save_steps=0.5, load_best_model_at_end=True)',
    'TrainingArguments(output_dir="a", eval_strategy="steps", eval_steps=10, save_steps=30, load_best_model_at_end=True)',
]


@pytest.mark.parametrize("before", BEFORE)
def test_every_call_is_judged_whatever_the_one_before_it_did(tmp_path, before):
    path = _calls(tmp_path, before + '\nb = TrainingArguments(output_dir="b", eval_strategy="epoch", '
                                     'load_best_model_at_end=True)')
    hits = [f for f in judge_file(path, Config()).findings if f.id == RULE]
    assert [(h.location.span.start_line, h.evidence["eval_strategy"]) for h in hits][-1] == (4, "epoch")
    assert len(hits) == (2 if "eval_strategy=\"no\"" in before else 1)


def test_a_value_through_a_constant_is_named_as_written_and_has_no_mechanical_fix(tmp_path):
    path = tmp_path / "train.py"
    path.write_text('from transformers import TrainingArguments\nEVAL = "no"\n'
                    'args = TrainingArguments(output_dir="o", eval_strategy=EVAL, load_best_model_at_end=True)\n',
                    encoding="utf-8")
    (hit,) = [f for f in judge_file(path, Config()).findings if f.id == RULE]
    assert hit.message == (_PREFIX + "needs the save and eval strategies to match: save_strategy unset "
                           "(HF default 'steps'), eval_strategy=EVAL" + _RAISES)
    assert [(r.location.span.start_line, r.message) for r in hit.related] == [(2, "eval strategy: EVAL")]
    assert hit.fix is None


def test_save_steps_through_a_constant_has_no_mechanical_fix(tmp_path):
    path = tmp_path / "train.py"
    path.write_text('from transformers import TrainingArguments\nSAVE = 500\n'
                    'args = TrainingArguments(output_dir="o", eval_strategy="steps", eval_steps=300, '
                    'save_steps=SAVE, load_best_model_at_end=True)\n', encoding="utf-8")
    (hit,) = [f for f in judge_file(path, Config()).findings if f.id == RULE]
    assert dict(hit.evidence) == {"save_steps": 500.0, "eval_steps": 300.0, "config": "TrainingArguments"}
    assert [(r.location.span.start_line, r.message) for r in hit.related] == [(2, "save_steps: SAVE"),
                                                                               (2, "eval_steps: 300")]
    assert hit.fix is None
