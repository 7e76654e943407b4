"""Cases for the script family: training scripts written here (with the model folders and
datasets they name, when a rule reads them), read with ast by the reader
(readers/script.read_script) and never run."""

from __future__ import annotations

import json
import re
import tempfile
import textwrap
from pathlib import Path

from trainproof_lsp.readers.script import ScriptFacts, read_script
from trainproof_lsp.rules import Context

from . import Expect, FamilyCases, Fires, Quiet, RuleCases
from .checkpoint import _folder


def script(body: str, files: dict[str, str | bytes] | None = None) -> ScriptFacts:
    """train.py holding `body` (dedented) in a fresh folder beside `files`."""
    folder = Path(tempfile.mkdtemp(dir=_folder()))
    for name, content in (files or {}).items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    path = folder / "train.py"
    path.write_text(textwrap.dedent(body).lstrip())
    return read_script(path)


def args(**kwargs: object) -> ScriptFacts:
    """A script whose TrainingArguments call has these keywords (values as Python source)."""
    given = "".join(f"\n{' ' * 12}{k}={v}," for k, v in kwargs.items())
    return script(f"""
        from transformers import TrainingArguments

        args = TrainingArguments(
            output_dir="out",{given}
        )
        """)


def trainer(config: str, *, evaluate: bool = False) -> ScriptFacts:
    return script(f"""
        from transformers import Trainer, TrainingArguments

        args = TrainingArguments(output_dir="out", max_steps=100{config})
        trainer = Trainer(model=None, args=args, train_dataset=train, eval_dataset=held_out)
        trainer.train()
        {"trainer.evaluate()" if evaluate else ""}
        """)


def config_json(model_type: str, **extra: object) -> str:
    return json.dumps({"model_type": model_type, **extra})


def with_model(body: str, model_type: str, **extra: object) -> ScriptFacts:
    return script(body, {"model/config.json": config_json(model_type, **extra)})


LORA = """
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained("./model")
    lora = LoraConfig(r=8, target_modules={targets})
    """


def lora(targets: str) -> ScriptFacts:
    return with_model(LORA.format(targets=targets), "llama")


FP16_MODEL = """
    from transformers import AutoModelForSeq2SeqLM, TrainingArguments

    model = AutoModelForSeq2SeqLM.from_pretrained("./model")
    args = TrainingArguments(output_dir="out", {precision}=True)
    """

HALF_WEIGHTS = """
    import torch
    from transformers import AutoModelForCausalLM, TrainingArguments

    model = AutoModelForCausalLM.from_pretrained("./model", torch_dtype=torch.float16)
    args = TrainingArguments(output_dir="out", fp16=True)
{more}
    """


def context(_: ScriptFacts) -> Context:
    return Context()


def normalize(text: str) -> str:
    return re.sub(re.escape(str(_folder())) + r"/[^/\s]+", "<tmp>", text)


CASES: dict[str, RuleCases] = {
    "TP-SCRIPT-ZERO-LR": RuleCases(
        fires=Fires(subject=lambda: args(learning_rate=0.0, max_steps=100), hits=(Expect(message='TrainingArguments(learning_rate=0.0) is 0: the optimizer will not move the weights',
                           evidence={'learning_rate': 0.0, 'config': 'TrainingArguments', 'via': ''}, line=4),),
                    family=('TP-SCRIPT-ZERO-LR', 'TP-SCRIPT-LOGGING-EXCEEDS-RUN', 'TP-SCRIPT-NO-CHECKPOINT-SAVED')),
        quiet=(Quiet(subject=lambda: args(learning_rate="2e-5", max_steps=100)),
               Quiet(subject=lambda: script("print('no config here')\n"), skip="no TrainingArguments")),
    ),
    "TP-SCRIPT-WARMUP-EXCEEDS-RUN": RuleCases(
        fires=Fires(subject=lambda: args(max_steps=100, warmup_steps=150), hits=(Expect(message='warmup_steps=150 (150) >= max_steps=100 (100): the learning rate is still warming up when training ends',
                           evidence={'warmup_steps': 150.0, 'max_steps': 100.0, 'config': 'TrainingArguments'}, line=5),),
                    family=('TP-SCRIPT-WARMUP-EXCEEDS-RUN', 'TP-SCRIPT-LOGGING-EXCEEDS-RUN', 'TP-SCRIPT-NO-CHECKPOINT-SAVED')),
        quiet=Quiet(subject=lambda: args(max_steps=100, warmup_steps=10)),
    ),
    "TP-SCRIPT-FP16-BF16": RuleCases(
        fires=Fires(subject=lambda: args(max_steps=100, fp16=True, bf16=True), hits=(Expect(message='fp16 and bf16 are both on (fp16=True on line 6; bf16=True on line 7): TrainingArguments raises ValueError before training starts',
                           evidence={'fp16': True, 'bf16': True, 'config': 'TrainingArguments'}, line=6),),
                    family=('TP-SCRIPT-FP16-BF16', 'TP-SCRIPT-LOGGING-EXCEEDS-RUN', 'TP-SCRIPT-NO-CHECKPOINT-SAVED')),
        quiet=Quiet(subject=lambda: args(max_steps=100, bf16=True)),
    ),
    "TP-SCRIPT-BEST-CKPT-DELETED": RuleCases(
        fires=Fires(subject=lambda: args(max_steps=1000, eval_strategy='"steps"', save_total_limit=1), hits=(Expect(message='save_total_limit=1 with evaluation on (steps) and load_best_model_at_end=unset: each save deletes the previous checkpoint, the best one included',
                           evidence={'save_total_limit': 1, 'eval_strategy': 'steps', 'config': 'TrainingArguments', 'load_best_model_at_end': False}, line=6),),
                    family=('TP-SCRIPT-BEST-CKPT-DELETED',)),
        quiet=(Quiet(subject=lambda: args(max_steps=1000, eval_strategy='"steps"', save_total_limit=1,
                                          load_best_model_at_end=True)),
               Quiet(subject=lambda: args(max_steps=1000, save_total_limit=1))),
    ),
    "TP-SCRIPT-EVAL-DISABLED": RuleCases(
        fires=Fires(subject=lambda: trainer(""), hits=(Expect(message='Trainer gets eval_dataset=held_out but TrainingArguments has evaluation off (eval_strategy "no", the default): it is never evaluated',
                           evidence={'eval_strategy': 'no', 'trainer': 'Trainer', 'config': 'TrainingArguments', 'explicit': False}, line=3),),
                    family=('TP-SCRIPT-EVAL-DISABLED', 'TP-SCRIPT-LOGGING-EXCEEDS-RUN', 'TP-SCRIPT-NO-CHECKPOINT-SAVED')),
        quiet=(Quiet(subject=lambda: trainer(', eval_strategy="steps", eval_steps=10')),
               Quiet(subject=lambda: trainer("", evaluate=True), skip="calls .evaluate() itself")),
    ),
    "TP-SCRIPT-LOGGING-EXCEEDS-RUN": RuleCases(
        fires=Fires(subject=lambda: args(max_steps=100, logging_steps=200), hits=(Expect(message='logging_steps=200 (200) > max_steps=100 (100): the run ends before the first loss is logged',
                           evidence={'logging_steps': 200.0, 'max_steps': 100.0, 'config': 'TrainingArguments'}, line=5),),
                    family=('TP-SCRIPT-LOGGING-EXCEEDS-RUN', 'TP-SCRIPT-NO-CHECKPOINT-SAVED')),
        quiet=Quiet(subject=lambda: args(max_steps=100, logging_steps=10)),
    ),
    "TP-SCRIPT-BEST-STRATEGY-MISMATCH": RuleCases(
        fires=Fires(subject=lambda: args(max_steps=1000, load_best_model_at_end=True, eval_strategy='"epoch"'), hits=(Expect(message='TrainingArguments(load_best_model_at_end=True) needs the save and eval strategies to match: save_strategy unset (HF default \'steps\'), eval_strategy="epoch"; TrainingArguments raises ValueError before training starts',
                           evidence={'save_strategy': 'steps', 'eval_strategy': 'epoch', 'config': 'TrainingArguments'}, line=5),),
                    family=('TP-SCRIPT-BEST-STRATEGY-MISMATCH',)),
        quiet=Quiet(subject=lambda: args(max_steps=1000, load_best_model_at_end=True, eval_strategy='"steps"',
                                          save_strategy='"steps"', eval_steps=100, save_steps=200)),
    ),
    "TP-SCRIPT-NO-CHECKPOINT-SAVED": RuleCases(
        fires=Fires(subject=lambda: args(max_steps=300, logging_steps=10), hits=(Expect(message='save_steps unset (default 500) but the run is 300 steps (max_steps=300): no checkpoint is saved before the last step: a crash before then loses the whole run',
                           evidence={'save_steps': 500.0, 'planned_steps': 300, 'exact': True, 'config': 'TrainingArguments'}, line=2),),
                    family=('TP-SCRIPT-NO-CHECKPOINT-SAVED',)),
        quiet=Quiet(subject=lambda: args(max_steps=300, logging_steps=10, save_steps=100)),
    ),
    "TP-SCRIPT-BEST-NEVER-SAVED": RuleCases(
        fires=Fires(subject=lambda: args(max_steps=300, logging_steps=10, eval_strategy='"steps"', eval_steps=50,
                                         save_strategy='"steps"', load_best_model_at_end=True), hits=(Expect(message='load_best_model_at_end=True but save_steps unset (default 500) and the run is 300 steps (max_steps=300): no checkpoint is saved before the last step, so the best model by eval is never kept (load_best_model_at_end can only load the final state)',
                           evidence={'save_steps': 500.0, 'planned_steps': 300, 'exact': True, 'config': 'TrainingArguments'}, line=9),),
                    family=('TP-SCRIPT-BEST-NEVER-SAVED',)),
        quiet=Quiet(subject=lambda: args(max_steps=300, logging_steps=10, eval_strategy='"steps"', eval_steps=50,
                                         save_strategy='"steps"', save_steps=100, load_best_model_at_end=True)),
    ),
    "TP-SCRIPT-EVAL-NEVER-RUN": RuleCases(
        fires=Fires(subject=lambda: args(max_steps=300, logging_steps=10, save_steps=100, eval_strategy='"steps"', eval_steps=400),
                    hits=(Expect(message='eval_strategy "steps" with eval_steps=400 but the run is 300 steps (max_steps=300): it never evaluates during training (at most once, at the last step)',
                           evidence={'eval_steps': 400.0, 'planned_steps': 300, 'exact': True, 'config': 'TrainingArguments'}, line=8),),
                    family=('TP-SCRIPT-EVAL-NEVER-RUN',)),
        quiet=Quiet(subject=lambda: args(max_steps=300, logging_steps=10, save_steps=100, eval_strategy='"steps"', eval_steps=100)),
    ),
    "TP-SCRIPT-FP16-ON-BF16-MODEL": RuleCases(
        fires=Fires(subject=lambda: with_model(FP16_MODEL.format(precision="fp16"), "t5"), hits=(Expect(message="fp16=True but the model ./model was pretrained in bfloat16 (t5 models are pretrained in bfloat16): fp16's range (max 65504) overflows where bf16's did not, the loss can turn NaN",
                           evidence={'config': 'TrainingArguments', 'model': './model', 'torch_dtype': '', 'model_type': 't5'}, line=3),),
                    family=('TP-SCRIPT-FP16-ON-BF16-MODEL',)),
        quiet=(Quiet(subject=lambda: with_model(FP16_MODEL.format(precision="bf16"), "t5")),
               Quiet(subject=lambda: with_model(FP16_MODEL.format(precision="fp16"), "bart", torch_dtype="float32"))),
    ),
    "TP-SCRIPT-FP16-WEIGHTS-FULL-TRAIN": RuleCases(
        fires=Fires(subject=lambda: with_model(HALF_WEIGHTS.format(more=""), "llama"), hits=(Expect(message='./model is loaded in float16 and trained in full with fp16=True: the fp16 gradient scaler raises ValueError ("Attempting to unscale FP16 gradients") at the first optimizer step',
                           evidence={'config': 'TrainingArguments', 'model': './model', 'load_dtype': 'float16'}, line=3),),
                    family=('TP-SCRIPT-FP16-WEIGHTS-FULL-TRAIN',)),
        quiet=(Quiet(subject=lambda: with_model(HALF_WEIGHTS.format(more="").replace("fp16=True", "bf16=True"), "llama")),
               Quiet(subject=lambda: with_model(HALF_WEIGHTS.format(more="    from peft import LoraConfig\n    lora = LoraConfig(r=8)"),
                                                "llama"), skip="the script sets up adapters")),
    ),
    "TP-SCRIPT-LORA-TARGETS-NOT-FOUND": RuleCases(
        fires=Fires(subject=lambda: lora('["c_attn", "c_proj"]'), hits=(Expect(message="target_modules 'c_attn', 'c_proj' match no module in ./model (the llama architecture's known layers)",
                           evidence={'missing': 'c_attn, c_proj', 'targets': 'c_attn, c_proj', 'model': './model', 'model_type': 'llama', 'source': "the llama architecture's known layers"}, line=4),),
                    family=('TP-SCRIPT-LORA-TARGETS-NOT-FOUND',)),
        quiet=Quiet(subject=lambda: lora('["q_proj", "v_proj"]')),
    ),
    "TP-SCRIPT-LORA-TARGETS-PARTIAL": RuleCases(
        fires=Fires(subject=lambda: lora('["q_proj", "v_proj", "c_fc"]'), hits=(Expect(message="target_modules 'c_fc' match no module (the others do) in ./model (the llama architecture's known layers)",
                           evidence={'missing': 'c_fc', 'targets': 'q_proj, v_proj, c_fc', 'model': './model', 'model_type': 'llama', 'source': "the llama architecture's known layers"}, line=4),),
                    family=('TP-SCRIPT-LORA-TARGETS-PARTIAL',)),
        quiet=(Quiet(subject=lambda: lora('["q_proj", "v_proj"]')), Quiet(subject=lambda: lora('["c_attn"]'))),
    ),
}

FAMILY = FamilyCases(cases=CASES, context=context, normalize=normalize)
