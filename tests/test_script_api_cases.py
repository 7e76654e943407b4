"""The three rules of rules/script_api.py with their whole findings and fixes, at the edges
tests/rule_cases/ does not reach: each reason the signature probes cannot be used, a rename
with and without its fix (the new name already passed, not in the installed signature, a
warmup_ratio outside [0, 1)), a removed keyword, a near miss on each side of the 0.8 cutoff,
**kwargs, values of a converting class and of one that takes any string, a value through a
constant, the list of allowed values cut at 8, and axolotl's rename fix."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from rule_cases.env import TRAINING_ARGUMENTS, axolotl, api
from rule_cases.script import script
from trainproof_lsp.readers.envcheck import ApiProbe, EnvFacts, Signature
from trainproof_lsp.rules import Context, Skip
from trainproof_lsp.rules.base import NoLimits
from trainproof_lsp.rules.script_api import check_ignored, check_keywords, check_values

WITH_WARMUP = dataclasses.replace(TRAINING_ARGUMENTS, params=TRAINING_ARGUMENTS.params + ("warmup_steps",))
TA = "TrainingArguments"
RAISES = "the call raises TypeError before training starts"


def facts_of(body: str, signature: Signature) -> EnvFacts:
    facts = script(body)
    return EnvFacts(path=facts.path, python="python3", imports_requested=True,
                    api=tuple(ApiProbe(call=c, path=facts.path, signature=signature) for c in facts.api_calls))


def found(check: Any, facts: EnvFacts) -> list[tuple[str, str, tuple[str, bool, list[str]] | None]]:
    """(message, replacement or closest, (fix title, safe, new texts) or None) per finding."""
    return [(h.message, h.evidence.get("replacement", h.evidence.get("closest")),
             (h.fix.title, h.fix.safe, [e.new_text for e in h.fix.edits]) if h.fix else None)
            for h in check(facts, NoLimits(), Context())]


def skip(check: Any, facts: EnvFacts) -> str:
    with pytest.raises(Skip) as skipped:
        list(check(facts, NoLimits(), Context()))
    return str(skipped.value)


# -- when the probes cannot be used


@pytest.mark.parametrize("change,why", [
    ({"imports_requested": False}, "no --entrypoint or --module given"),
    ({"api_error": "timed out after 30 s"}, "the library signatures could not be read: timed out after 30 s"),
    ({"entry_error": "no such file"}, "the script or the interpreter could not be used (see the env findings)"),
    ({"python_error": "not found"}, "the script or the interpreter could not be used (see the env findings)"),
    ({"cwd_missing": True}, "the script or the interpreter could not be used (see the env findings)"),
    ({"api": ()}, "the script calls no class of transformers, trl, peft, lightning, accelerate or bitsandbytes"),
])
@pytest.mark.parametrize("check", [check_keywords, check_values])
def test_each_reason_the_signatures_are_not_used(check, change, why):
    assert skip(check, dataclasses.replace(api("bogus=1"), **change)) == why


@pytest.mark.parametrize("signature,why", [
    (Signature(outcome="module-not-found", library="transformers", detail="No module named 'transformers'"),
     "no library class could be looked up (TrainingArguments: No module named 'transformers')"),
    (Signature(outcome="timeout", library="transformers"), "no library class could be looked up (TrainingArguments: timeout)"),
])
def test_a_class_that_could_not_be_looked_up_says_why(signature, why):
    assert skip(check_keywords, api("bogus=1", signature)) == why


def test_an_axolotl_config_is_the_ignored_key_rules_alone():
    facts = axolotl("base_model: x\nlora_alhpa: 16\n")
    assert skip(check_keywords, facts) == ("an axolotl config: its keys are TP-CONFIG-KEY-IGNORED's (axolotl ignores "
                                           "unknown keys)")
    assert skip(check_ignored, api("bogus=1")) == "no axolotl config given"


# -- unknown keywords


def test_a_renamed_keyword_is_named_and_renamed_safely():
    assert found(check_keywords, api("evaluation_strategy='steps'")) == [(
        f"{TA}(evaluation_strategy=...): transformers 5.25.0 {TA} takes no keyword 'evaluation_strategy' (renamed "
        f"eval_strategy); {RAISES}", "eval_strategy",
        ("rename evaluation_strategy to eval_strategy", True, ["eval_strategy"]))]


def test_a_rename_the_call_already_has_is_named_without_a_fix():
    ((_, replacement, fix),) = found(check_keywords, api("evaluation_strategy='steps', eval_strategy='steps'"))
    assert (replacement, fix) == ("eval_strategy", None)


@pytest.mark.parametrize("value,fixed", [("0.1", True), ("0", True), ("1.0", False), ("True", False), ("R", False)])
def test_warmup_ratio_becomes_warmup_steps_only_as_a_fraction(value, fixed):
    ((message, replacement, fix),) = found(check_keywords, api(f"warmup_ratio={value}", WITH_WARMUP))
    assert "(renamed warmup_steps)" in message and replacement == "warmup_steps"
    assert fix == (("rename warmup_ratio to warmup_steps", True, ["warmup_steps"]) if fixed else None)


def test_a_rename_the_installed_class_does_not_take_is_no_rename():
    assert found(check_keywords, api("warmup_ratio=0.1")) == [(
        f"{TA}(warmup_ratio=...): transformers 5.25.0 {TA} takes no keyword 'warmup_ratio'; {RAISES}", "", None)]


def test_a_removed_keyword_says_what_to_use_instead():
    assert found(check_keywords, api("logging_dir='runs'")) == [(
        f"{TA}(logging_dir=...): transformers 5.25.0 {TA} takes no keyword 'logging_dir' (removed: use the "
        f"TENSORBOARD_LOGGING_DIR environment variable); {RAISES}", "", None)]


def test_a_typo_gets_the_closest_keyword_and_an_unsafe_rename():
    assert found(check_keywords, api("learnig_rate=1e-5")) == [(
        f"{TA}(learnig_rate=...): transformers 5.25.0 {TA} takes no keyword 'learnig_rate' (did you mean "
        f"learning_rate?); {RAISES}", "learning_rate", ("rename learnig_rate to learning_rate", False, ["learning_rate"]))]
    ((_, replacement, fix),) = found(check_keywords, api("learnig_rate=1e-5, learning_rate=1e-5"))
    assert (replacement, fix) == ("learning_rate", None)


@pytest.mark.parametrize("typo,close", [("save_strat", True), ("save_str", False)])
def test_a_near_miss_is_named_from_a_ratio_of_08(typo, close):
    # difflib's ratio to save_strategy: 2 x 10 / 23 = 0.87 for save_strat, 2 x 8 / 21 = 0.76 for save_str
    ((_, replacement, _),) = found(check_keywords, api(f"{typo}='steps'"))
    assert replacement == ("save_strategy" if close else "")


def test_a_class_that_takes_kwargs_takes_any_keyword():
    assert found(check_keywords, api("bogus=1", dataclasses.replace(TRAINING_ARGUMENTS, var_keyword=True))) == []


# -- values


def test_a_value_outside_the_enum_gets_the_closest_one():
    assert found(check_values, api("eval_strategy='step'")) == [(
        f"{TA}(eval_strategy='step'): transformers 5.25.0 {TA} accepts 'no', 'steps', 'epoch' for eval_strategy "
        "(closest: 'steps'); the call raises ValueError before training starts", "steps",
        ("use 'steps'", False, ["'steps'"]))]
    assert found(check_values, api("eval_strategy='zzz'")) == [(
        f"{TA}(eval_strategy='zzz'): transformers 5.25.0 {TA} accepts 'no', 'steps', 'epoch' for eval_strategy; the "
        "call raises ValueError before training starts", "", None)]
    assert found(check_values, api("eval_strategy='epoch'")) == []


def test_a_value_through_a_constant_is_found_without_a_fix():
    facts = facts_of("""
        from transformers import TrainingArguments
        S = "step"
        args = TrainingArguments(output_dir="out", eval_strategy=S)
        """, TRAINING_ARGUMENTS)
    ((message, closest, fix),) = found(check_values, facts)
    assert message.startswith(f"{TA}(eval_strategy=S): transformers 5.25.0 {TA} accepts") and closest == "steps"
    assert fix is None


def test_the_allowed_values_are_cut_at_eight():
    many = tuple(f"opt_{c}" for c in "abcdefghi")
    signature = dataclasses.replace(TRAINING_ARGUMENTS, params=("optim",), choices=(("optim", many, False),))
    ((message, _, _),) = found(check_values, api("optim='sgd'", signature))
    assert ("accepts 'opt_a', 'opt_b', 'opt_c', 'opt_d', 'opt_e', 'opt_f', 'opt_g', 'opt_h', ... for optim;"
            in message)
    exact = dataclasses.replace(signature, choices=(("optim", many[:8], False),))
    assert "'opt_h' for optim;" in found(check_values, api("optim='sgd'", exact))[0][0]


LORA = Signature(outcome="ok", library="peft", version="0.18.0", qualname="peft.tuners.lora.config.LoraConfig",
                 params=("r", "bias"), choices=(("bias", ("none", "all", "lora_only"), True),))


def test_a_field_that_also_takes_any_string_is_judged_only_where_the_class_converts_it():
    lora = """
        from peft import LoraConfig
        c = LoraConfig(r=8, bias="nonee")
        """
    assert found(check_values, facts_of(lora, LORA)) == []
    strict = dataclasses.replace(LORA, choices=(("bias", ("none", "all", "lora_only"), False),))
    assert [c for _, c, _ in found(check_values, facts_of(lora, strict))] == ["none"]
    # TrainingArguments converts its `Enum | str` fields: any string there is still judged
    loose = dataclasses.replace(TRAINING_ARGUMENTS, choices=(("eval_strategy", ("no", "steps", "epoch"), True),))
    assert [c for _, c, _ in found(check_values, api("eval_strategy='step'", loose))] == ["steps"]


@pytest.mark.parametrize("keywords", ["eval_strategy=S", "eval_strategy=3", "learning_rate='x'"])
def test_values_the_check_cannot_read_or_has_no_choice_for_are_passed_over(keywords):
    assert found(check_values, api(keywords)) == []


# -- axolotl


def test_an_axolotl_typo_gets_an_unsafe_rename_unless_the_key_is_there():
    ((message, closest, fix),) = found(check_ignored, axolotl("base_model: x\nlora_alhpa: 16\n"))
    assert closest == "lora_alpha" and fix == ("rename lora_alhpa to lora_alpha", False, ["lora_alpha"])
    assert message.endswith("(did you mean lora_alpha?); axolotl ignores it, so the setting never takes effect")
    ((_, closest, fix),) = found(check_ignored, axolotl("base_model: x\nlora_alhpa: 16\nlora_alpha: 8\n"))
    assert (closest, fix) == ("lora_alpha", None)
