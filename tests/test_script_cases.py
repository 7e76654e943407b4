"""The six rules of rules/script.py with their whole findings, at the edges tests/rule_cases/
does not reach: a value through a constant, each side of each comparison (warmup_ratio 1,
warmup_steps against max_steps and against the run's length from its dataset, logging_steps
against both), the defaults that decide (eval_strategy "no", logging_steps 500), the fix that
keeps the best checkpoint, and each reason a check stands down. Also what a mutation run
left: values that are no numbers, the file of each place, the old keyword evaluation_strategy,
configs and trainers passed over before one that fires, and which configs decide a check."""

from __future__ import annotations

from typing import Any, Callable, Iterator

import pytest

from rule_cases.script import args, script, trainer
from trainproof_lsp.core.model import Hit
from trainproof_lsp.readers.script import ScriptFacts
from trainproof_lsp.rules import Context, Skip
from trainproof_lsp.rules.base import NoLimits
from trainproof_lsp.rules.script import (check_best, check_eval, check_fp16_bf16, check_logging, check_warmup,
                                         check_zero_lr)

Check = Callable[[ScriptFacts, NoLimits, Context], Iterator[Hit]]


def hits(check: Check, facts: ScriptFacts) -> list[tuple[str, dict[str, Any], int, list[tuple[int, str]]]]:
    return [(h.message, dict(h.evidence), h.location.span.start_line,
             [(r.location.span.start_line, r.message) for r in h.related]) for h in check(facts, NoLimits(), Context())]


def skip(check: Check, facts: ScriptFacts) -> str:
    with pytest.raises(Skip) as skipped:
        list(check(facts, NoLimits(), Context()))
    return str(skipped.value)


# args(...) writes TrainingArguments( on line 2 (0-based) and one keyword per line from line 4.


def test_a_zero_learning_rate_is_found_on_its_keyword():
    assert hits(check_zero_lr, args(learning_rate="0.0")) == [(
        "TrainingArguments(learning_rate=0.0) is 0: the optimizer will not move the weights",
        {"learning_rate": 0.0, "config": "TrainingArguments", "via": ""}, 4, [])]
    assert hits(check_zero_lr, args(learning_rate="1e-5")) == []


def test_a_zero_learning_rate_through_a_constant_names_it():
    facts = script("""
        from transformers import TrainingArguments
        LR = 0
        args = TrainingArguments(output_dir="o", learning_rate=LR)
        """)
    assert hits(check_zero_lr, facts) == [(
        "TrainingArguments(learning_rate=LR) is 0 (through LR): the optimizer will not move the weights",
        {"learning_rate": 0.0, "config": "TrainingArguments", "via": "LR"}, 2, [(1, "LR is assigned here")])]


@pytest.mark.parametrize("check,keywords,said", [
    (check_zero_lr, {"learning_rate": "float(os.environ['LR'])"}, "learning_rate=float(os.environ['LR'])"),
    (check_warmup, {"warmup_steps": "W", "max_steps": "100"}, "warmup_steps=W"),
    (check_fp16_bf16, {"fp16": "True", "bf16": "X"}, "bf16=X"),
    (check_logging, {"logging_steps": "L", "max_steps": "100"}, "logging_steps=L"),
])
def test_a_value_the_source_does_not_fix_stands_the_check_down(check, keywords, said):
    assert skip(check, args(**keywords)) == f"not known without running the script: {said}"


@pytest.mark.parametrize("check", [check_zero_lr, check_warmup, check_fp16_bf16, check_best, check_logging])
def test_a_script_without_a_config_call_says_so(check):
    assert skip(check, script("x = 1\n")) == "no TrainingArguments / SFTConfig-family call in the script"


# -- warmup


@pytest.mark.parametrize("ratio,fires", [("1.0", True), ("0.99", False)])
def test_a_warmup_ratio_of_1_spans_the_whole_run(ratio, fires):
    assert hits(check_warmup, args(warmup_ratio=ratio)) == ([(
        "warmup_ratio=1.0 is 1 >= 1: warmup spans the whole run", {"warmup_ratio": 1.0, "config": "TrainingArguments"},
        4, [])] if fires else [])


@pytest.mark.parametrize("warmup,max_steps,fires", [("100", "100", True), ("99", "100", False), ("100", "-1", False)])
def test_warmup_steps_against_max_steps(warmup, max_steps, fires):
    found = hits(check_warmup, args(warmup_steps=warmup, max_steps=max_steps))
    assert found == ([(
        "warmup_steps=100 (100) >= max_steps=100 (100): the learning rate is still warming up when training ends",
        {"warmup_steps": 100.0, "max_steps": 100.0, "config": "TrainingArguments"}, 4, [(5, "max_steps 100 set here")])]
        if fires else [])


@pytest.mark.parametrize("keywords,said", [
    # the ratio decides the warmup unless warmup_steps > 0 overrides it
    ({"warmup_ratio": "R"}, "warmup_ratio=R"),
    ({"warmup_ratio": "R", "warmup_steps": "0.5"}, "warmup_ratio=R"),
    # a known ratio does not decide a warmup_steps the source does not fix
    ({"warmup_ratio": "0.1", "warmup_steps": "W", "max_steps": "100"}, "warmup_steps=W"),
    ({"warmup_steps": "10", "max_steps": "M"}, "max_steps=M"),
])
def test_a_warmup_value_that_matters_and_is_not_known_stands_the_check_down(keywords, said):
    assert skip(check_warmup, args(**keywords)) == f"not known without running the script: {said}"


@pytest.mark.parametrize("keywords", [
    {"warmup_ratio": "R", "warmup_steps": "10", "max_steps": "100"},  # warmup_steps overrides the ratio
    {"warmup_ratio": "R", "warmup_steps": "1", "max_steps": "100"},
    {"warmup_ratio": "0.1", "max_steps": "M"},  # no warmup_steps: max_steps does not matter
])
def test_an_unknown_value_that_does_not_matter_leaves_the_warmup_judged(keywords):
    assert hits(check_warmup, args(**keywords)) == []


def test_warmup_steps_below_1_are_a_fraction_and_not_judged():
    assert hits(check_warmup, args(warmup_steps="0.5")) == []


ROWS = "".join('{"text": "row %d"}\n' % i for i in range(40))
LENGTH = "at most 10 steps (1 epoch(s) x 10 steps: 40 rows of data/train.jsonl / batch 4 / accumulation 1, 1 process, assumed)"


def _planned(keyword: str) -> ScriptFacts:
    """A run of 40 rows at batch 4 for one epoch: 10 steps."""
    return script(f"""
        from datasets import load_dataset
        from transformers import TrainingArguments
        ds = load_dataset("json", data_files="data/train.jsonl")
        args = TrainingArguments(output_dir="o", num_train_epochs=1, per_device_train_batch_size=4, {keyword})
        """, files={"data/train.jsonl": ROWS})


def test_warmup_steps_against_the_runs_length_from_its_dataset():
    assert hits(check_warmup, _planned("warmup_steps=10")) == [(
        f"warmup_steps=10 (10) >= the run's {LENGTH}: the learning rate is still warming up when training ends",
        {"warmup_steps": 10.0, "planned_steps": 10, "exact": False, "config": "TrainingArguments"}, 3, [])]
    assert hits(check_warmup, _planned("warmup_steps=9")) == []


@pytest.mark.parametrize("max_steps", ["", "max_steps=-1, "])
def test_warmup_steps_against_the_runs_length_when_max_steps_is_absent_or_its_default(max_steps):
    assert [m for m, *_ in hits(check_warmup, _planned(max_steps + "warmup_steps=10"))] == [
        f"warmup_steps=10 (10) >= the run's {LENGTH}: the learning rate is still warming up when training ends"]


def test_warmup_steps_without_a_length_are_not_judged():
    assert hits(check_warmup, args(warmup_steps="10")) == []


# -- fp16 and bf16


def test_fp16_and_bf16_both_on_is_found_on_the_second():
    assert hits(check_fp16_bf16, args(fp16="True", bf16="True")) == [(
        "fp16 and bf16 are both on (fp16=True on line 5; bf16=True on line 6): TrainingArguments raises ValueError "
        "before training starts", {"fp16": True, "bf16": True, "config": "TrainingArguments"}, 5,
        [(4, "the other one is turned on here")])]
    assert hits(check_fp16_bf16, args(bf16="True", fp16="True"))[0][0].startswith(
        "fp16 and bf16 are both on (bf16=True on line 5; fp16=True on line 6)")


@pytest.mark.parametrize("keywords", [{"bf16": "X"}, {"fp16": "X"}, {"fp16": "False", "bf16": "X"},
                                      {"fp16": "X", "bf16": "0"}])
def test_an_unknown_flag_beside_one_that_is_off_or_absent_is_judged(keywords):
    # an absent flag is TrainingArguments' default, False: the two cannot both be on
    assert hits(check_fp16_bf16, args(**keywords)) == []


@pytest.mark.parametrize("keywords,said", [("bf16=X", "bf16=X"), ("fp16=X", "fp16=X")])
def test_an_unknown_flag_beside_kwargs_that_may_set_the_other_stands_down(keywords, said):
    facts = script(f"""
        from transformers import TrainingArguments
        args = TrainingArguments(output_dir="o", {keywords}, **extra)
        """)
    assert skip(check_fp16_bf16, facts) == f"not known without running the script: {said}"


def test_both_flags_on_beside_kwargs_is_found():
    facts = script("""
        from transformers import TrainingArguments
        args = TrainingArguments(output_dir="o", fp16=True, bf16=True, **extra)
        """)
    assert [m for m, *_ in hits(check_fp16_bf16, facts)] == [
        "fp16 and bf16 are both on (fp16=True on line 2; bf16=True on line 2): TrainingArguments raises ValueError "
        "before training starts"]


@pytest.mark.parametrize("keywords", [{"fp16": "True", "bf16": "False"}, {"fp16": "True"}, {"bf16": "1"}])
def test_one_precision_is_quiet(keywords):
    assert hits(check_fp16_bf16, args(**keywords)) == []


# -- the best checkpoint


def test_one_checkpoint_kept_with_evaluation_on_loses_the_best():
    facts = args(save_total_limit="1", eval_strategy='"steps"')
    assert hits(check_best, facts) == [(
        "save_total_limit=1 with evaluation on (steps) and load_best_model_at_end=unset: each save deletes the "
        "previous checkpoint, the best one included",
        {"save_total_limit": 1, "eval_strategy": "steps", "config": "TrainingArguments",
         "load_best_model_at_end": False}, 4, [(5, 'evaluation is on: "steps"')])]
    (hit,) = check_best(facts, NoLimits(), Context())
    assert hit.fix is not None and hit.fix.title == "keep the best checkpoint: load_best_model_at_end=True"
    assert [(e.span.start_line, e.new_text) for e in hit.fix.edits] == [(5, ", load_best_model_at_end=True")]


def test_the_fix_matches_save_strategy_to_an_epoch_evaluation():
    facts = args(save_total_limit="1", eval_strategy='"epoch"', load_best_model_at_end="False")
    ((message, *_),) = hits(check_best, facts)
    assert "load_best_model_at_end=False: each save deletes" in message
    (hit,) = check_best(facts, NoLimits(), Context())
    assert hit.fix is not None
    assert hit.fix.title == "keep the best checkpoint: load_best_model_at_end=True, save_strategy='epoch'"
    assert [(e.span.start_line, e.new_text) for e in hit.fix.edits] == [(6, "True"), (6, ", save_strategy='epoch'")]


@pytest.mark.parametrize("keywords", [
    {"save_total_limit": "1", "evaluation_strategy": '"epoch"', "load_best_model_at_end": "True"},
    {"save_total_limit": "2", "eval_strategy": '"steps"'},
    {"save_total_limit": "1", "eval_strategy": '"no"'},
    {"save_total_limit": "1"},
])
def test_the_best_checkpoint_is_kept_or_there_is_none(keywords):
    assert hits(check_best, args(**keywords)) == []


# -- the eval dataset


def test_an_eval_dataset_with_the_default_strategy_is_never_evaluated():
    assert hits(check_eval, trainer("")) == [(
        'Trainer gets eval_dataset=held_out but TrainingArguments has evaluation off (eval_strategy "no", the '
        "default): it is never evaluated",
        {"eval_strategy": "no", "trainer": "Trainer", "config": "TrainingArguments", "explicit": False}, 3,
        [(2, 'TrainingArguments without eval_strategy (HF default "no")')])]


def test_an_eval_dataset_with_evaluation_turned_off_points_at_the_keyword():
    assert hits(check_eval, trainer(', eval_strategy="no"')) == [(
        'Trainer gets eval_dataset=held_out but TrainingArguments has evaluation off (eval_strategy "no"): it is '
        "never evaluated", {"eval_strategy": "no", "trainer": "Trainer", "config": "TrainingArguments", "explicit": True},
        3, [(2, 'evaluation is off here: "no"')])]
    assert hits(check_eval, trainer(', eval_strategy="steps"')) == []


def test_the_eval_check_stands_down_with_its_reason():
    assert skip(check_eval, trainer("", evaluate=True)) == "the script calls .evaluate() itself"
    assert skip(check_eval, args(max_steps="1")) == "no *Trainer(...) call in the script"


# -- the logging interval


@pytest.mark.parametrize("every,fires", [("200", True), ("100", False), ("0.5", False)])
def test_logging_steps_against_max_steps(every, fires):
    assert hits(check_logging, args(logging_steps=every, max_steps="100")) == ([(
        "logging_steps=200 (200) > max_steps=100 (100): the run ends before the first loss is logged",
        {"logging_steps": 200.0, "max_steps": 100.0, "config": "TrainingArguments"}, 4,
        [(5, "max_steps 100 set here")])] if fires else [])


@pytest.mark.parametrize("max_steps,fires", [("499", True), ("500", False)])
def test_the_default_of_500_against_max_steps(max_steps, fires):
    assert hits(check_logging, args(max_steps=max_steps)) == ([(
        "logging_steps unset (default 500) > the run's 499 steps (max_steps=499): the run ends before the first loss "
        "is logged", {"logging_steps": 500.0, "planned_steps": 499, "exact": True, "config": "TrainingArguments"}, 2,
        [])] if fires else [])


def test_logging_steps_against_the_runs_length_from_its_dataset():
    assert hits(check_logging, _planned("logging_steps=11")) == [(
        f"logging_steps=11 > the run's {LENGTH}: the run ends before the first loss is logged",
        {"logging_steps": 11.0, "planned_steps": 10, "exact": False, "config": "TrainingArguments"}, 3, [])]
    assert hits(check_logging, _planned("logging_steps=10")) == []


# -- what a first mutation run left: constants, one-step runs, several configs, the fix's edits


def test_warmup_values_through_constants_relate_their_assignments():
    facts = script("""
        from transformers import TrainingArguments
        W = 100
        R = 1.0
        args = TrainingArguments(output_dir="o", warmup_steps=W, max_steps=100, warmup_ratio=R)
        """)
    assert hits(check_warmup, facts) == [
        ("warmup_ratio=R is 1 >= 1: warmup spans the whole run", {"warmup_ratio": 1.0, "config": "TrainingArguments"},
         3, [(2, "R is assigned here")]),
        ("warmup_steps=W (100) >= max_steps=100 (100): the learning rate is still warming up when training ends",
         {"warmup_steps": 100.0, "max_steps": 100.0, "config": "TrainingArguments"}, 3,
         [(3, "max_steps 100 set here"), (1, "W is assigned here")])]


def test_one_warmup_step_covers_a_run_of_one_step():
    facts = script("""
        from datasets import load_dataset
        from transformers import TrainingArguments
        ds = load_dataset("json", data_files="data/train.jsonl")
        args = TrainingArguments(output_dir="o", num_train_epochs=1, per_device_train_batch_size=4, warmup_steps=1)
        """, files={"data/train.jsonl": "".join('{"text": "row %d"}\n' % i for i in range(4))})
    ((message, evidence, _, _),) = hits(check_warmup, facts)
    assert message.startswith("warmup_steps=1 (1) >= the run's at most 1 steps (1 epoch(s) x 1 steps: 4 rows")
    assert evidence["planned_steps"] == 1
    assert [m for m, *_ in hits(check_warmup, args(warmup_steps="1", max_steps="1"))] == [
        "warmup_steps=1 (1) >= max_steps=1 (1): the learning rate is still warming up when training ends"]


def test_max_steps_of_0_is_no_length_to_exceed():
    assert hits(check_warmup, args(warmup_steps="5", max_steps="0")) == []
    assert hits(check_logging, args(logging_steps="1", max_steps="0")) == []
    assert [m for m, *_ in hits(check_logging, args(logging_steps="2", max_steps="1"))] == [
        "logging_steps=2 (2) > max_steps=1 (1): the run ends before the first loss is logged"]


def _two(first: str, second: str) -> ScriptFacts:
    return script(f"""
        from transformers import TrainingArguments
        a = TrainingArguments(output_dir="o", {first})
        b = TrainingArguments(output_dir="p", {second})
        """)


@pytest.mark.parametrize("check,known,unknown", [
    (check_warmup, "warmup_steps=10, max_steps=100", "warmup_steps=W, max_steps=100"),
    (check_logging, "logging_steps=10, max_steps=100", "logging_steps=L, max_steps=100"),
    (check_zero_lr, "learning_rate=1e-5", "learning_rate=LR"),
    (check_fp16_bf16, "fp16=True, bf16=False", "fp16=X, bf16=True"),
])
def test_a_config_the_source_decides_is_judged_beside_one_it_does_not(check, known, unknown):
    # the second call alone stands the check down; the first one decides it
    assert hits(check, _two(known, unknown)) == []
    with pytest.raises(Skip):
        list(check(_two(unknown, unknown), NoLimits(), Context()))


def test_a_finding_in_one_config_is_kept_beside_an_unknown_one():
    assert [m for m, *_ in hits(check_zero_lr, _two("learning_rate=0.0", "learning_rate=LR"))] == [
        "TrainingArguments(learning_rate=0.0) is 0: the optimizer will not move the weights"]
    ((message, _, line, _),) = hits(check_fp16_bf16, _two("fp16=True, bf16=True", "fp16=X, bf16=True"))
    assert message.startswith("fp16 and bf16 are both on (fp16=True on line 2; bf16=True on line 2)") and line == 1


def _best_fix(**keywords: str) -> tuple[str, list[tuple[int, int, str]]] | None:
    (hit,) = check_best(args(save_total_limit="1", **keywords), NoLimits(), Context())
    if hit.fix is None:
        return None
    return hit.fix.title, [(e.span.start_line, e.span.start_char, e.new_text) for e in hit.fix.edits]


def test_the_best_checkpoint_fix_edits_save_strategy_as_the_call_has_it():
    # both keywords absent: one insertion after the last keyword
    assert _best_fix(eval_strategy='"epoch"') == (
        "keep the best checkpoint: load_best_model_at_end=True, save_strategy='epoch'",
        [(5, 25, ", load_best_model_at_end=True, save_strategy='epoch'")])
    # save_strategy already the eval strategy (in any case): only load_best_model_at_end
    assert _best_fix(eval_strategy='"epoch"', save_strategy='"EPOCH"') == (
        "keep the best checkpoint: load_best_model_at_end=True", [(6, 25, ", load_best_model_at_end=True")])
    # save_strategy another value: its value is replaced where it is
    assert _best_fix(eval_strategy='"steps"', save_strategy='"epoch"') == (
        "keep the best checkpoint: load_best_model_at_end=True, save_strategy='steps'",
        [(6, 25, ", load_best_model_at_end=True"), (6, 18, "'steps'")])
    # save_strategy not known without running the script: no fix
    assert _best_fix(eval_strategy='"epoch"', save_strategy="S") is None


# -- what a second mutation run left: non-numbers, the places' files, the old keyword name,
# configs and trainers passed over before one that fires, and what each check stands down on


def _places(check: Check, facts: ScriptFacts) -> list[tuple[str | None, list[str | None]]]:
    """Each finding's file and its related places' files."""
    return [(h.location.path, [r.location.path for r in h.related]) for h in check(facts, NoLimits(), Context())]


@pytest.mark.parametrize("value", ["False", '"0"'])
def test_a_learning_rate_that_is_no_number_is_not_a_zero(value):
    # False and "0" are known, so nothing stands down, but neither is a learning rate of 0
    assert hits(check_zero_lr, args(learning_rate=value)) == []


def test_a_related_constant_is_placed_in_the_script():
    facts = script("""
        from transformers import TrainingArguments
        LR = 0
        args = TrainingArguments(output_dir="o", learning_rate=LR)
        """)
    assert _places(check_zero_lr, facts) == [(facts.path, [facts.path])]


def test_the_stand_down_names_at_most_three_unknown_values():
    facts = _two("warmup_ratio=R, warmup_steps=W, max_steps=M", "warmup_steps=W2")
    assert skip(check_warmup, facts) == \
        "not known without running the script: warmup_steps=W, max_steps=M, warmup_ratio=R"


def _planned_through(constant: str, value: int, keyword: str) -> ScriptFacts:
    """_planned's run of 10 steps, with `keyword` set through `constant = value` (line 3),
    on a line of its own (line 5)."""
    return script(f"""
        from datasets import load_dataset
        from transformers import TrainingArguments
        ds = load_dataset("json", data_files="data/train.jsonl")
        {constant} = {value}
        args = TrainingArguments(output_dir="o", num_train_epochs=1, per_device_train_batch_size=4,
                                 {keyword}={constant})
        """, files={"data/train.jsonl": ROWS})


def test_warmup_steps_through_a_constant_against_the_runs_length_relate_the_constant():
    facts = _planned_through("W", 10, "warmup_steps")
    assert hits(check_warmup, facts) == [(
        f"warmup_steps=W (10) >= the run's {LENGTH}: the learning rate is still warming up when training ends",
        {"warmup_steps": 10.0, "planned_steps": 10, "exact": False, "config": "TrainingArguments"}, 5,
        [(3, "W is assigned here")])]
    assert _places(check_warmup, facts) == [(facts.path, [facts.path])]


@pytest.mark.parametrize("keywords", [{"warmup_steps": "10", "warmup_ratio": "R"},
                                      {"warmup_steps": "10", "max_steps": "-1", "warmup_ratio": "R"}])
def test_warmup_steps_without_a_length_decide_an_unknown_ratio(keywords):
    # warmup_steps > 0 overrides the ratio; with no length to judge them the check is done
    assert hits(check_warmup, args(**keywords)) == []


def test_a_warmup_finding_against_the_runs_length_is_kept_beside_an_unknown_ratio():
    assert [m for m, *_ in hits(check_warmup, _planned("warmup_steps=10, warmup_ratio=R"))] == [
        f"warmup_steps=10 (10) >= the run's {LENGTH}: the learning rate is still warming up when training ends"]


def test_fp16_set_as_an_attribute_after_the_call_is_quoted_as_written():
    facts = script("""
        from transformers import TrainingArguments
        args = TrainingArguments(output_dir="o", bf16=True)
        args.fp16 = True
        """)
    assert hits(check_fp16_bf16, facts) == [(
        "fp16 and bf16 are both on (bf16=True on line 2; args.fp16 = True on line 3): TrainingArguments raises "
        "ValueError before training starts", {"fp16": True, "bf16": True, "config": "TrainingArguments"}, 2,
        [(1, "the other one is turned on here")])]


def test_the_old_name_evaluation_strategy_turns_evaluation_on():
    assert hits(check_best, args(save_total_limit="1", evaluation_strategy='"steps"')) == [(
        "save_total_limit=1 with evaluation on (steps) and load_best_model_at_end=unset: each save deletes the "
        "previous checkpoint, the best one included",
        {"save_total_limit": 1, "eval_strategy": "steps", "config": "TrainingArguments",
         "load_best_model_at_end": False}, 4, [(5, 'evaluation is on: "steps"')])]


@pytest.mark.parametrize("strategy", ["None", "S"])
def test_an_eval_strategy_that_is_no_known_string_loses_no_checkpoint(strategy):
    assert hits(check_best, args(save_total_limit="1", eval_strategy=strategy)) == []


@pytest.mark.parametrize("keywords,fires", [
    ('eval_strategy="steps", **extra', False),  # **extra may set load_best_model_at_end
    ('eval_strategy="steps", load_best_model_at_end=False, **extra', True),
])
def test_kwargs_beside_one_checkpoint_kept_hide_only_an_absent_load_best(keywords, fires):
    facts = script(f"""
        from transformers import TrainingArguments
        args = TrainingArguments(output_dir="o", save_total_limit=1, {keywords})
        """)
    assert hits(check_best, facts) == ([(
        "save_total_limit=1 with evaluation on (steps) and load_best_model_at_end=False: each save deletes the "
        "previous checkpoint, the best one included",
        {"save_total_limit": 1, "eval_strategy": "steps", "config": "TrainingArguments",
         "load_best_model_at_end": False}, 1, [(1, 'evaluation is on: "steps"')])] if fires else [])


@pytest.mark.parametrize("passed_over", [
    'save_total_limit=2, eval_strategy="steps"',
    'save_total_limit=1, eval_strategy="steps", load_best_model_at_end=True',
    'save_total_limit=1, eval_strategy="steps", **extra',
    'save_total_limit=1, eval_strategy="no"',
])
def test_a_config_passed_over_does_not_end_the_best_checkpoint_check(passed_over):
    assert hits(check_best, _two(passed_over, 'save_total_limit=1, eval_strategy="steps"')) == [(
        "save_total_limit=1 with evaluation on (steps) and load_best_model_at_end=unset: each save deletes the "
        "previous checkpoint, the best one included",
        {"save_total_limit": 1, "eval_strategy": "steps", "config": "TrainingArguments",
         "load_best_model_at_end": False}, 2, [(2, 'evaluation is on: "steps"')])]


def test_kwargs_may_turn_evaluation_on_for_an_eval_dataset():
    assert hits(check_eval, trainer(", **extra")) == []


@pytest.mark.parametrize("first", [
    "Trainer(model=None, args=b, train_dataset=train)",  # no eval dataset
    "Trainer(model=None, args=a, train_dataset=train, eval_dataset=held_out)",  # evaluation on
])
def test_a_trainer_passed_over_does_not_end_the_eval_check(first):
    facts = script(f"""
        from transformers import Trainer, TrainingArguments
        a = TrainingArguments(output_dir="a", eval_strategy="steps")
        b = TrainingArguments(output_dir="b")
        first = {first}
        second = Trainer(model=None, args=b, train_dataset=train, eval_dataset=held_out)
        """)
    assert hits(check_eval, facts) == [(
        'Trainer gets eval_dataset=held_out but TrainingArguments has evaluation off (eval_strategy "no", the '
        "default): it is never evaluated",
        {"eval_strategy": "no", "trainer": "Trainer", "config": "TrainingArguments", "explicit": False}, 4,
        [(2, 'TrainingArguments without eval_strategy (HF default "no")')])]
    assert _places(check_eval, facts) == [(facts.path, [facts.path])]


def test_logging_steps_through_a_constant_against_max_steps_relate_it_in_the_script():
    facts = script("""
        from transformers import TrainingArguments
        LOG = 200
        args = TrainingArguments(output_dir="o", max_steps=100,
                                 logging_steps=LOG)
        """)
    assert hits(check_logging, facts) == [(
        "logging_steps=LOG (200) > max_steps=100 (100): the run ends before the first loss is logged",
        {"logging_steps": 200.0, "max_steps": 100.0, "config": "TrainingArguments"}, 3,
        [(2, "max_steps 100 set here"), (1, "LOG is assigned here")])]
    assert _places(check_logging, facts) == [(facts.path, [facts.path, facts.path])]


def test_logging_steps_through_a_constant_against_the_runs_length_are_found_on_the_keyword():
    facts = _planned_through("LOG", 11, "logging_steps")
    assert hits(check_logging, facts) == [(
        f"logging_steps=LOG > the run's {LENGTH}: the run ends before the first loss is logged",
        {"logging_steps": 11.0, "planned_steps": 10, "exact": False, "config": "TrainingArguments"}, 5,
        [(3, "LOG is assigned here")])]
    assert _places(check_logging, facts) == [(facts.path, [facts.path])]


def test_the_default_logging_interval_is_found_on_the_call_in_the_script():
    facts = args(max_steps="499")
    assert [line for _, _, line, _ in hits(check_logging, facts)] == [2]
    assert _places(check_logging, facts) == [(facts.path, [])]


@pytest.mark.parametrize("fired,message", [
    ("logging_steps=200, max_steps=100",
     "logging_steps=200 (200) > max_steps=100 (100): the run ends before the first loss is logged"),
    ("max_steps=499", "logging_steps unset (default 500) > the run's 499 steps (max_steps=499): the run ends before "
                      "the first loss is logged"),
])
def test_a_logging_finding_is_kept_beside_an_unknown_config(fired, message):
    assert [m for m, *_ in hits(check_logging, _two(fired, "logging_steps=L, max_steps=100"))] == [message]


def test_a_logging_interval_judged_against_the_planned_length_decides_the_check():
    # the default 500 against max_steps 500: not longer, and judged
    assert hits(check_logging, _two("max_steps=500", "logging_steps=L, max_steps=100")) == []
    # no max_steps and no dataset: nothing judged there, so the unknown interval beside it stands the check down
    assert skip(check_logging, _two("", "logging_steps=L, max_steps=100")) == (
        "not known without running the script: logging_steps=L")


@pytest.mark.parametrize("keywords,said", [
    ({"logging_steps": "L"}, "logging_steps=L"),  # no length either
    ({"max_steps": "M"}, "max_steps=M"),          # the default interval against an unknown length
])
def test_an_unknown_interval_or_length_without_the_other_stands_the_logging_check_down(keywords, said):
    assert skip(check_logging, args(**keywords)) == f"not known without running the script: {said}"
    assert hits(check_logging, args()) == []  # nothing written and no length: nothing left open to name


def test_the_logging_check_stands_down_on_an_unknown_max_steps():
    assert skip(check_logging, args(logging_steps="10", max_steps="M")) == \
        "not known without running the script: max_steps=M"
