"""The three rules of rules/script_api.py with their whole findings and fixes, at the edges
tests/rule_cases/ does not reach: each reason the signature probes cannot be used, a rename
with and without its fix (the new name already passed, not in the installed signature, a
warmup_ratio outside [0, 1)), a removed keyword, a near miss on each side of the 0.8 cutoff,
**kwargs, values of a converting class and of one that takes any string, a value through a
constant, the list of allowed values cut at 8, and axolotl's rename fix. Then whole findings
(file, spans, fix edits) of a script, a LLaMA-Factory and an axolotl config, a class called by its
module path, a version-less install, a **kwargs class first, and 0.8 against difflib's own 0.6."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from rule_cases.env import TRAINING_ARGUMENTS, axolotl, api
from rule_cases.script import script
from trainproof_lsp.core.model import Edit, Fix, Hit, Location, Span
from trainproof_lsp.readers.envcheck import ApiProbe, EnvFacts, Signature
from trainproof_lsp.readers.script import ApiCall
from trainproof_lsp.readers.yaml_api import ATTR, CLASSES, MODULE, read_yaml_config
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


# -- whole findings: location, fix edits, the installed name, the class a dotted call names

SFT = "configs/sft.yaml"
LLAMAFACTORY = Signature(
    outcome="ok", library="llamafactory", version="0.9.4", qualname=f"{MODULE} ({', '.join(CLASSES)})",
    params=("model_name_or_path", "stage", "finetuning_type", "lora_rank", "dataset", "output_dir", "eval_strategy"),
    choices=(("finetuning_type", ("lora", "freeze", "full"), False),))
LF_ARGS = "ModelArguments, DataArguments, TrainingArguments, FinetuningArguments, GeneratingArguments"
LF_RAISES = "`llamafactory-cli train` raises ValueError (keys not used by the HfArgumentParser) before training starts"
AX_SCHEMA = "axolotl.utils.schemas.config.AxolotlInputConfig"
AX_IGNORED = "axolotl ignores it, so the setting never takes effect"


def hits(check: Any, facts: EnvFacts) -> list[Hit]:
    return list(check(facts, NoLimits(), Context()))


def on(line: int, start: int, text: str) -> Span:
    """The span of `text` written at `start` of a 0-based line."""
    return Span(line, start, line, start + len(text))


def keyword_evidence(keyword: str, replacement: str, signature: Signature = TRAINING_ARGUMENTS) -> dict[str, Any]:
    return {"keyword": keyword, "class": signature.qualname, "library": signature.library,
            "version": signature.version, "replacement": replacement}


def llamafactory(text: str) -> EnvFacts:
    """`env --entrypoint configs/sft.yaml` on a LLaMA-Factory config, its keys bound to the
    merged argument classes as readers/yaml_api.py collect_yaml binds them."""
    config = read_yaml_config(Path(SFT), data=text.encode("utf-8"))
    call = ApiCall(written="sft.yaml", module=MODULE, attr=ATTR, span=Span(0, 0, 0, 0), keywords=config.keys)
    return EnvFacts(path=SFT, python="python3", imports_requested=True,
                    api=(ApiProbe(call=call, path=SFT, signature=LLAMAFACTORY),))


# api() writes `args = TrainingArguments(output_dir="out", <keywords>)` on line 2: the
# keywords start at character 43
@pytest.mark.parametrize("keyword,value,hint,replacement,safe", [  # safe: the fix's, None for no fix
    ("evaluation_strategy", "'steps'", " (renamed eval_strategy)", "eval_strategy", True),
    ("learnig_rate", "1e-5", " (did you mean learning_rate?)", "learning_rate", False),
    ("logging_dir", "'runs'", " (removed: use the TENSORBOARD_LOGGING_DIR environment variable)", "", None),
    ("bogus", "1", "", "", None),
])
def test_an_unknown_keyword_is_located_on_its_name_in_the_script_and_the_fix_replaces_that_name(
        keyword, value, hint, replacement, safe):
    facts = api(f"{keyword}={value}")
    name = on(2, 43, keyword)
    assert hits(check_keywords, facts) == [Hit(
        message=f"{TA}({keyword}=...): transformers 5.25.0 {TA} takes no keyword {keyword!r}{hint}; {RAISES}",
        evidence=keyword_evidence(keyword, replacement), location=Location(path=facts.path, span=name),
        fix=None if safe is None else Fix(title=f"rename {keyword} to {replacement}",
                                          edits=(Edit(span=name, new_text=replacement),), safe=safe))]


@pytest.mark.parametrize("version,installed", [("5.25.0", "transformers 5.25.0"), ("", "transformers")])
def test_the_installed_library_is_named_with_its_version_only_when_it_has_one(version, installed):
    signature = dataclasses.replace(TRAINING_ARGUMENTS, version=version)
    (hit,) = hits(check_keywords, api("bogus=1", signature))
    assert (hit.message, hit.evidence) == (f"{TA}(bogus=...): {installed} {TA} takes no keyword 'bogus'; {RAISES}",
                                           keyword_evidence("bogus", "", signature))


PEFT = dataclasses.replace(LORA, params=("r", "lora_alpha", "bias"))


@pytest.mark.parametrize("keyword,hint,replacement", [
    ("lora_alhpa", " (did you mean lora_alpha?)", "lora_alpha"),
    ("use_rslora_x", "", ""),
])
def test_a_library_with_no_renamed_or_removed_keywords_is_judged_by_its_signature_alone(keyword, hint, replacement):
    facts = facts_of(f"""
        from peft import LoraConfig
        c = LoraConfig(r=8, {keyword}=16)
        """, PEFT)
    name = on(1, 20, keyword)
    assert hits(check_keywords, facts) == [Hit(
        message=f"LoraConfig({keyword}=...): peft 0.18.0 LoraConfig takes no keyword {keyword!r}{hint}; {RAISES}",
        evidence=keyword_evidence(keyword, replacement, PEFT), location=Location(path=facts.path, span=name),
        fix=Fix(title=f"rename {keyword} to {replacement}", edits=(Edit(span=name, new_text=replacement),))
        if replacement else None)]


def test_a_class_that_takes_kwargs_does_not_stop_the_calls_after_it():
    facts = script("""
        from transformers import BitsAndBytesConfig, TrainingArguments
        q = BitsAndBytesConfig(load_in_4bit=True, bnb_anything=1)
        args = TrainingArguments(output_dir="out", bogus=1)
        """)
    takes_any = Signature(outcome="ok", library="transformers", version="5.25.0", var_keyword=True,
                          qualname="transformers.utils.quantization_config.BitsAndBytesConfig",
                          params=("load_in_4bit",))
    signatures = iter((takes_any, TRAINING_ARGUMENTS))
    facts = EnvFacts(path=facts.path, python="python3", imports_requested=True,
                     api=tuple(ApiProbe(call=c, path=facts.path, signature=next(signatures)) for c in facts.api_calls))
    assert [(h.message, h.location.span) for h in hits(check_keywords, facts)] == [
        (f"{TA}(bogus=...): transformers 5.25.0 {TA} takes no keyword 'bogus'; {RAISES}", on(2, 43, "bogus"))]


@pytest.mark.parametrize("module,written,signature,keyword,message", [
    # one dot between the module and the class
    ("transformers", "transformers.training_args.TrainingArguments", TRAINING_ARGUMENTS, "evaluation_strategy",
     f"transformers.training_args.{TA}(evaluation_strategy=...): transformers 5.25.0 {TA} takes no keyword "
     f"'evaluation_strategy' (renamed eval_strategy); {RAISES}"),
    # two: lightning's Trainer through its subpackages
    ("lightning", "lightning.pytorch.trainer.Trainer",
     Signature(outcome="ok", library="lightning", version="2.5.0", qualname="lightning.pytorch.trainer.trainer.Trainer",
               params=("accelerator", "devices")), "gpus",
     "lightning.pytorch.trainer.Trainer(gpus=...): lightning 2.5.0 Trainer takes no keyword 'gpus' (removed: use "
     f'accelerator="gpu", devices=N); {RAISES}'),
])
def test_a_class_called_through_its_module_path_is_named_by_its_last_name(module, written, signature, keyword,
                                                                           message):
    facts = facts_of(f"""
        import {module}
        x = {written}({keyword}=2)
        """, signature)
    assert [h.message for h in hits(check_keywords, facts)] == [message]


@pytest.mark.parametrize("module,written,signature,cls", [
    ("transformers", "transformers.training_args.TrainingArguments", TRAINING_ARGUMENTS, TA),
    ("trl", "trl.trainer.sft_config.SFTConfig", dataclasses.replace(TRAINING_ARGUMENTS, library="trl"), "SFTConfig"),
])
def test_a_value_of_a_class_called_through_its_module_path_names_the_class_by_its_last_name(module, written,
                                                                                            signature, cls):
    facts = facts_of(f"""
        import {module}
        x = {written}(eval_strategy="step")
        """, signature)
    assert [h.message for h in hits(check_values, facts)] == [
        f'{written}(eval_strategy="step"): {signature.library} 5.25.0 {cls} accepts \'no\', \'steps\', \'epoch\' for '
        "eval_strategy (closest: 'steps'); the call raises ValueError before training starts"]


@pytest.mark.parametrize("value,closest", [("'step'", "steps"), ("'zzz'", "")])
def test_a_refused_value_after_an_accepted_one_is_located_on_the_value_and_the_fix_replaces_it(value, closest):
    # eval_strategy's value is accepted; save_strategy's, after it, is not
    facts = api(f"eval_strategy='steps', save_strategy={value}")
    where = on(2, 43 + len("eval_strategy='steps', save_strategy="), value)
    assert hits(check_values, facts) == [Hit(
        message=f"{TA}(save_strategy={value}): transformers 5.25.0 {TA} accepts 'no', 'steps', 'epoch', 'best' for "
                f"save_strategy{f' (closest: {closest!r})' if closest else ''}; the call raises ValueError before "
                "training starts",
        evidence={"keyword": "save_strategy", "value": value.strip("'"), "class": TRAINING_ARGUMENTS.qualname,
                  "library": "transformers", "version": "5.25.0", "closest": closest},
        location=Location(path=facts.path, span=where),
        fix=Fix(title=f"use {closest!r}", edits=(Edit(span=where, new_text=repr(closest)),)) if closest else None)]


def test_a_value_through_a_constant_is_located_on_the_name_at_the_call_with_no_fix_at_all():
    facts = facts_of("""
        from transformers import TrainingArguments
        S = "step"
        args = TrainingArguments(output_dir="out", eval_strategy=S)
        """, TRAINING_ARGUMENTS)
    assert hits(check_values, facts) == [Hit(
        message=f"{TA}(eval_strategy=S): transformers 5.25.0 {TA} accepts 'no', 'steps', 'epoch' for eval_strategy "
                "(closest: 'steps'); the call raises ValueError before training starts",
        evidence={"keyword": "eval_strategy", "value": "step", "class": TRAINING_ARGUMENTS.qualname,
                  "library": "transformers", "version": "5.25.0", "closest": "steps"},
        location=Location(path=facts.path, span=on(2, 57, "S")), fix=None)]


# -- a LLaMA-Factory config


def test_a_llamafactory_config_key_is_named_against_the_merged_argument_classes_in_the_config_file():
    facts = llamafactory("stage: sft\nmodel_name_or_path: Qwen/Qwen2.5-0.5B\nevaluation_strategy: steps\n"
                         "lora_rnak: 8\nreport_too: none\n")
    renamed, typo, unknown = on(2, 0, "evaluation_strategy"), on(3, 0, "lora_rnak"), on(4, 0, "report_too")
    assert hits(check_keywords, facts) == [
        Hit(message=f"sft.yaml: 'evaluation_strategy' is no argument of llamafactory 0.9.4's training arguments "
                    f"({LF_ARGS}) (renamed eval_strategy); {LF_RAISES}",
            evidence=keyword_evidence("evaluation_strategy", "eval_strategy", LLAMAFACTORY),
            location=Location(path=SFT, span=renamed),
            fix=Fix(title="rename evaluation_strategy to eval_strategy",
                    edits=(Edit(span=renamed, new_text="eval_strategy"),), safe=True)),
        Hit(message=f"sft.yaml: 'lora_rnak' is no argument of llamafactory 0.9.4's training arguments ({LF_ARGS}) "
                    f"(did you mean lora_rank?); {LF_RAISES}",
            evidence=keyword_evidence("lora_rnak", "lora_rank", LLAMAFACTORY), location=Location(path=SFT, span=typo),
            fix=Fix(title="rename lora_rnak to lora_rank", edits=(Edit(span=typo, new_text="lora_rank"),))),
        Hit(message=f"sft.yaml: 'report_too' is no argument of llamafactory 0.9.4's training arguments ({LF_ARGS}); "
                    f"{LF_RAISES}",
            evidence=keyword_evidence("report_too", "", LLAMAFACTORY), location=Location(path=SFT, span=unknown)),
    ]


def test_a_llamafactory_config_value_outside_a_literal_is_located_on_the_value_in_the_config_file():
    facts = llamafactory("stage: sft\nmodel_name_or_path: Qwen/Qwen2.5-0.5B\nfinetuning_type: lroa\n")
    where = on(2, 17, "lroa")
    assert hits(check_values, facts) == [Hit(
        message="sft.yaml: finetuning_type: lroa: llamafactory 0.9.4 accepts 'lora', 'freeze', 'full' for "
                "finetuning_type (closest: 'lora'); the run stops on it before training starts",
        evidence={"keyword": "finetuning_type", "value": "lroa", "class": LLAMAFACTORY.qualname,
                  "library": "llamafactory", "version": "0.9.4", "closest": "lora"},
        location=Location(path=SFT, span=where),
        fix=Fix(title="use 'lora'", edits=(Edit(span=where, new_text="'lora'"),)))]


# -- axolotl, whole


@pytest.mark.parametrize("key,closest", [
    ("lora_alhpa", "lora_alpha"),  # ratio 0.90
    ("micro_batch", "micro_batch_size"),  # 2 x 11 / 27 = 0.81: at or above 0.8
    ("micro_batc", ""),  # 2 x 10 / 26 = 0.77: below 0.8, above difflib's own cutoff of 0.6
    ("warmup", ""),
])
def test_an_ignored_axolotl_key_is_located_on_its_name_in_the_config_and_renamed_to_a_close_field(key, closest):
    name = on(1, 0, key)
    assert hits(check_ignored, axolotl(f"base_model: x\n{key}: 16\n")) == [Hit(
        message=f"config.yml: {key!r} is no key of axolotl 0.19.0's config schema"
                f"{f' (did you mean {closest}?)' if closest else ''}; {AX_IGNORED}",
        evidence={"key": key, "schema": AX_SCHEMA, "library": "axolotl", "version": "0.19.0", "closest": closest},
        location=Location(path="config.yml", span=name),
        fix=Fix(title=f"rename {key} to {closest}", edits=(Edit(span=name, new_text=closest),), safe=False)
        if closest else None)]
