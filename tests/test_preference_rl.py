"""Preference (DPO) and RL (GRPO) runs judged by their own metrics, on logs their real
trainers wrote.

TRL 1.x's DPOTrainer and GRPOTrainer train a tiny Llama (one layer, hidden size 16: a few
thousand parameters) with a word-level tokenizer built by the `tokenizers` library, on CPU,
for a handful of steps each. Every run is made once per test session (a module fixture)
and writes its `trainer_state.json`; the faults are the settings that make them:

- DPO, healthy: beta 0.1, learning rate 1e-2, clear pairs ("good w1" over "bad w2");
- DPO, reference = policy: `sync_ref_model` with mixup alpha 1 every step;
- DPO, beta 1e-6;
- DPO, shuffled pairs: chosen and rejected swapped at random (half the pairs);
- GRPO, healthy: a reward that counts the word "good";
- GRPO, a reward function that returns a constant;
- GRPO, max_completion_length 4, with a model whose completions run hundreds of tokens
  (a 200-word vocabulary: end of sequence is 1 token in 200);
- GRPO, a learning rate of 1.0 with beta 0.04: the KL explodes and the entropy collapses;
- GRPO, a reward that pays for length: the completions grow to the cap.

The timing rules (TP-STEP-CLIFF, TP-THROUGHPUT, TP-LOADER-BOUND) read wall-clock step times,
which a busy test machine distorts, so the judge runs without them here.
"""

from __future__ import annotations

import copy
import json
import math
import random
from pathlib import Path
from typing import Any

import pytest

from trainproof_lsp.core import objectives as ob
from trainproof_lsp.core.config import Config
from trainproof_lsp.core.model import Level, Report, Verdict
from trainproof_lsp.judge.engine import judge_file
from trainproof_lsp.readers.metrics import OBJECTIVE_ALIASES, read_metrics_jsonl
from trainproof_lsp.readers.trainer_state import read_trainer_state

CONFIG = Config(ignore=frozenset({"TP-STEP-CLIFF", "TP-THROUGHPUT", "TP-LOADER-BOUND"}))
GRPO_STEPS_STOPPED = 20  # max_steps of the guarded (constant-reward) run; it must stop well before


def _tokenizer(words: int) -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    names = ["good", "bad"] + [f"w{i}" for i in range(words - 5)]
    vocab = {"<pad>": 0, "<eos>": 1, "<unk>": 2, **{w: i + 3 for i, w in enumerate(names)}}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece(prefix="##")
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>")


def _model(vocab: int, folder: Path) -> Any:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=512, pad_token_id=0,
                      eos_token_id=1, bos_token_id=None, tie_word_embeddings=False)
    model = LlamaForCausalLM(cfg)
    model.save_pretrained(folder)
    _tokenizer(vocab).save_pretrained(folder)
    return model


# No checkpoints, no reports, fp32 without gradient checkpointing (bf16 matmuls are slow on CPU).
_COMMON = dict(logging_steps=1, report_to=[], save_strategy="no", use_cpu=True, seed=0, disable_tqdm=True,
               bf16=False, gradient_checkpointing=False, dataloader_num_workers=0)


def _dpo(root: Path, name: str, *, beta: float = 0.1, shuffled: bool = False, **args: Any) -> Path:
    from datasets import Dataset
    from trl import DPOConfig, DPOTrainer

    model = _model(24, root / "m24")
    rng = random.Random(0)
    words = [f"w{i}" for i in range(19)]
    rows = []
    for _ in range(48):
        chosen, rejected = " good w1", " bad w2"
        if shuffled and rng.random() < 0.5:
            chosen, rejected = rejected, chosen
        rows.append({"prompt": " ".join(rng.choice(words) for _ in range(3)), "chosen": chosen, "rejected": rejected})
    data = Dataset.from_list(rows)
    config = DPOConfig(output_dir=str(root / name / "out"), max_steps=12, per_device_train_batch_size=4,
                       learning_rate=1e-2, beta=beta, eval_strategy="steps", eval_steps=4,
                       per_device_eval_batch_size=4, **_COMMON, **args)
    trainer = DPOTrainer(model=model, ref_model=copy.deepcopy(model), args=config, train_dataset=data,
                         eval_dataset=data.select(range(8)), processing_class=_tokenizer(24))
    trainer.train()
    path = root / name / "trainer_state.json"
    trainer.state.save_to_json(str(path))
    return path


def _reward_good(completions: list[str], **_: Any) -> list[float]:
    return [float(c.split().count("good")) for c in completions]


def _reward_constant(completions: list[str], **_: Any) -> list[float]:
    return [1.0 for _ in completions]


def _reward_length(completions: list[str], **_: Any) -> list[float]:
    return [float(len(c.split())) for c in completions]


def _grpo(root: Path, name: str, reward: Any, *, vocab: int = 24, steps: int = 6, cap: int = 64,
          lr: float = 1e-2, beta: float = 0.0, callbacks: list[Any] | None = None) -> tuple[Path, Any]:
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    folder = root / f"g{vocab}"
    _model(vocab, folder)
    data = Dataset.from_list([{"prompt": f"w{i} w{i + 1}"} for i in range(16)])
    config = GRPOConfig(output_dir=str(root / name / "out"), max_steps=steps, per_device_train_batch_size=8,
                        num_generations=4, max_completion_length=cap, learning_rate=lr, beta=beta, **_COMMON)
    trainer = GRPOTrainer(model=str(folder), reward_funcs=reward, args=config, train_dataset=data,
                          processing_class=_tokenizer(vocab), callbacks=callbacks)
    trainer.train()
    path = root / name / "trainer_state.json"
    trainer.state.save_to_json(str(path))
    return path, trainer


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    pytest.importorskip("trl")
    torch = pytest.importorskip("torch")
    from trainproof_lsp.guardian.hf import TrainproofCallback

    root = tmp_path_factory.mktemp("pref_rl")
    threads = torch.get_num_threads()
    # One thread: a tiny model gains nothing from two, and on a busy machine the threads'
    # spin-waits make each step ten times slower.
    torch.set_num_threads(1)
    patch = pytest.MonkeyPatch()
    patch.setenv("HF_HUB_OFFLINE", "1")  # every model and tokenizer is a local folder: never the network
    try:
        out: dict[str, Any] = {
            "dpo_healthy": _dpo(root, "dpo_healthy"),
            "dpo_ref_is_policy": _dpo(root, "dpo_ref_is_policy", sync_ref_model=True, ref_model_mixup_alpha=1.0,
                                      ref_model_sync_steps=1),
            "dpo_beta_1e-6": _dpo(root, "dpo_beta_1e-6", beta=1e-6),
            "dpo_shuffled": _dpo(root, "dpo_shuffled", shuffled=True),
            "grpo_healthy": _grpo(root, "grpo_healthy", _reward_good, steps=8)[0],
            "grpo_cap4": _grpo(root, "grpo_cap4", _reward_good, vocab=200, cap=4)[0],
            "grpo_kl": _grpo(root, "grpo_kl", _reward_good, steps=8, lr=1.0, beta=0.04)[0],
            "grpo_length": _grpo(root, "grpo_length", _reward_length, steps=10, lr=0.1)[0],
            # The same reward at a learning rate 100x lower: it learns less than that baseline.
            "grpo_length_slow": _grpo(root, "grpo_length_slow", _reward_length, steps=10, lr=1e-3)[0],
        }
        guard = TrainproofCallback(policy="stop_on_fail", config=CONFIG, confirm_points=2, stream=False,
                                   echo=False)
        # The constant-reward run is the guarded one: the guardian stops it, and its log is judged.
        path, trainer = _grpo(root, "grpo_constant", _reward_constant, steps=GRPO_STEPS_STOPPED, callbacks=[guard])
        out["grpo_constant"] = path
        out["guard"] = guard
        out["guarded_steps"] = trainer.state.global_step
    finally:
        torch.set_num_threads(threads)
        patch.undo()
    return out


def _judge(path: Path) -> Report:
    return judge_file(path, CONFIG)


def _ids(report: Report, level: Level | None = None) -> list[str]:
    return [f.id for f in report.findings if level is None or f.level is level]


def _skip_reason(report: Report, rule_id: str) -> str:
    check = next(c for c in report.checks if c.group == rule_id)
    assert not check.ran
    return check.reason


# --- DPO -------------------------------------------------------------------------------------

def test_healthy_dpo_run_passes_with_the_preference_rules_run(runs: dict[str, Any]) -> None:
    report = _judge(runs["dpo_healthy"])
    assert report.verdict is Verdict.PASS, [f.message for f in report.findings]
    ran = {c.group for c in report.checks if c.ran}
    assert {"TP-PREF-AT-LN2", "TP-PREF-MARGINS-FLAT", "TP-PREF-ACC-AT-CHANCE", "TP-PREF-DISPLACEMENT",
            "TP-REWARD-NONFINITE", "TP-DIVERGE", "TP-NAN"} <= ran
    # The loss rules that assume a cross-entropy over classes stand down, and say why.
    for rule_id in ("TP-DEAD-RUN", "TP-FLAT", "TP-AT-CHANCE", "TP-LOSS-COLLAPSE"):
        assert _skip_reason(report, rule_id).startswith("a preference run (DPO family: rewards/margins logged)")


@pytest.mark.parametrize("name", ["dpo_ref_is_policy", "dpo_beta_1e-6"])
def test_dpo_whose_policy_never_leaves_the_reference_is_at_ln2(runs: dict[str, Any], name: str) -> None:
    report = _judge(runs[name])
    assert report.verdict is Verdict.FAIL
    assert _ids(report) == ["TP-PREF-AT-LN2"]
    finding = report.findings[0]
    assert finding.evidence["points"] == 11 and finding.evidence["at_ln2"] == 11
    assert abs(finding.evidence["median_loss"] - math.log(2)) < 1e-5  # type: ignore[operator]
    if name == "dpo_ref_is_policy":
        assert finding.evidence["max_abs_margin"] == 0.0  # the reference is the policy, exactly
    else:
        assert 0.0 < finding.evidence["max_abs_margin"] < 1e-4  # type: ignore[operator]
    # Located at the second logged step (the first is at ln 2 by construction).
    assert finding.location.span is not None
    assert json.loads(runs[name].read_text())["log_history"][1]["step"] == 2
    assert "DPO loss stays at ln 2 = 0.6931" in finding.message and "11 of 11 logged steps" in finding.message


def test_dpo_on_shuffled_pairs_has_flat_margins_and_chance_accuracy(runs: dict[str, Any]) -> None:
    report = _judge(runs["dpo_shuffled"])
    assert report.verdict is Verdict.FAIL
    assert _ids(report) == ["TP-PREF-MARGINS-FLAT", "TP-PREF-ACC-AT-CHANCE"]
    flat, acc = report.findings
    assert flat.level is Level.FAIL and acc.level is Level.WARN
    assert flat.evidence["trend_z"] < 1.0  # type: ignore[operator]
    assert abs(acc.evidence["mean_accuracy"] - 0.5) <= acc.evidence["band"]  # type: ignore[operator]


def test_nan_rewards_and_logps_at_one_eval_fail_as_reward_nonfinite(runs: dict[str, Any], tmp_path: Path) -> None:
    # The real shape: one of the evals is NaN in its loss, rewards and log-probs (HF
    # writes bare NaN). Made from the healthy run's own log, its 2nd eval entry overwritten.
    state = json.loads(runs["dpo_healthy"].read_text())
    evals = [e for e in state["log_history"] if "eval_loss" in e]
    for key in list(evals[1]):
        if key.startswith(("eval_loss", "eval_rewards/", "eval_logps/")):
            evals[1][key] = math.nan
    path = tmp_path / "trainer_state.json"
    path.write_text(json.dumps(state, indent=2, sort_keys=True))
    report = _judge(path)
    assert report.verdict is Verdict.FAIL
    assert _ids(report, Level.FAIL) == ["TP-REWARD-NONFINITE", "TP-NAN-EVAL"]  # the preference rule leads
    finding = report.findings[0]
    assert finding.evidence["first_step"] == evals[1]["step"] == 8
    assert finding.evidence["points"] == 6
    assert finding.evidence["first_series"] == "eval_logps/chosen"  # same entry: named in alphabetical order


def test_chosen_logps_falling_with_rejected_is_displacement(tmp_path: Path) -> None:
    # A metric JSONL of the shape TRL logs (chosen and rejected both pushed down, the rejected
    # faster): built here, as no few-step tiny run shows displacement.
    lines = []
    for step in range(1, 21):
        chosen = -20.0 - 0.5 * step + 0.1 * ((step * 7) % 3)
        rejected = -20.0 - 1.5 * step
        lines.append(json.dumps({"step": step, "loss": 0.69 - 0.02 * step, "rewards/margins": 0.1 * step,
                                 "logps/chosen": chosen, "logps/rejected": rejected}))
    path = tmp_path / "metrics.jsonl"
    path.write_text("\n".join(lines) + "\n")
    report = _judge(path)
    assert _ids(report) == ["TP-PREF-DISPLACEMENT"]
    finding = report.findings[0]
    assert finding.level is Level.WARN and report.verdict is Verdict.WARN
    assert finding.evidence["share_below_start"] == 1.0
    assert finding.location.span is not None and finding.location.span.start_line == 19


# --- GRPO ------------------------------------------------------------------------------------

def test_healthy_grpo_run_passes_and_its_loss_rules_stand_down(runs: dict[str, Any]) -> None:
    report = _judge(runs["grpo_healthy"])
    assert report.verdict is Verdict.PASS, [f.message for f in report.findings]
    ran = {c.group for c in report.checks if c.ran}
    assert {"TP-RL-NO-SIGNAL", "TP-RL-REWARD-CONSTANT", "TP-RL-CLIPPED", "TP-RL-ENTROPY-COLLAPSE",
            "TP-RL-LENGTH-HACKING", "TP-REWARD-NONFINITE", "TP-NAN"} <= ran
    for rule_id in ("TP-FLAT", "TP-DEAD-RUN", "TP-DIVERGE", "TP-ZERO-LOSS", "TP-NEGATIVE-LOSS", "TP-LOSS-SPIKE"):
        assert _skip_reason(report, rule_id).startswith(
            "an RL run (GRPO/PPO family: reward and frac_reward_zero_std logged): its loss is a policy-gradient "
            "surrogate near 0 by construction")
    assert _skip_reason(report, "TP-RL-KL-BLOWUP") == "no kl series in the log"  # beta 0: TRL logs no KL


def test_grpo_with_a_constant_reward_has_no_signal(runs: dict[str, Any]) -> None:
    report = _judge(runs["grpo_constant"])
    assert report.verdict is Verdict.FAIL
    # The RL rules lead the report; the zero gradient the generic rule sees follows them.
    assert _ids(report) == ["TP-RL-NO-SIGNAL", "TP-RL-REWARD-CONSTANT", "TP-ZERO-GRAD"]
    no_signal, constant, _ = report.findings
    steps = runs["guarded_steps"]  # the guardian stopped it (below): every logged step had no signal
    assert no_signal.evidence["stretch_points"] == steps and no_signal.evidence["median_frac_reward_zero_std"] == 1.0
    assert no_signal.evidence["saturated"] is False
    assert constant.evidence["value"] == 1.0 and constant.evidence["spread"] == 0.0
    assert f"reward is constant at 1 over {steps} logged steps" in constant.message


def test_grpo_capped_at_four_tokens_is_clipped(runs: dict[str, Any]) -> None:
    report = _judge(runs["grpo_cap4"])
    clipped = next(f for f in report.findings if f.id == "TP-RL-CLIPPED")
    assert clipped.level is Level.WARN
    assert clipped.evidence["cap"] == 4.0 and clipped.evidence["clipped_level"] >= 0.9  # type: ignore[operator]
    assert "end at the length cap of 4 tokens" in clipped.message
    # Every cut answer scores 0 ("good" is 1 token in 200): no signal either, named as such.
    assert {"TP-RL-NO-SIGNAL", "TP-RL-REWARD-CONSTANT"} <= set(_ids(report, Level.FAIL))


def test_grpo_with_a_huge_learning_rate_blows_up_kl_and_collapses_entropy(runs: dict[str, Any]) -> None:
    report = _judge(runs["grpo_kl"])
    assert report.verdict is Verdict.FAIL
    assert _ids(report) == ["TP-RL-KL-BLOWUP", "TP-RL-ENTROPY-COLLAPSE"]
    kl, entropy = report.findings
    assert kl.evidence["first_value"] == 0.0 and kl.evidence["end_level"] >= 1.0  # type: ignore[operator]
    assert entropy.level is Level.WARN
    assert entropy.evidence["collapsed_value"] <= entropy.evidence["bound"]  # type: ignore[operator]


def test_grpo_paid_for_length_grows_to_the_cap(runs: dict[str, Any]) -> None:
    report = _judge(runs["grpo_length"])
    assert "TP-RL-LENGTH-HACKING" in _ids(report, Level.WARN)
    hit = next(f for f in report.findings if f.id == "TP-RL-LENGTH-HACKING")
    assert hit.evidence["cap"] == 64.0
    assert hit.evidence["end_level"] >= 0.9 * 64  # type: ignore[operator]
    assert hit.evidence["end_level"] >= 1.25 * hit.evidence["start_level"]  # type: ignore[operator]


def test_guardian_stops_a_grpo_run_without_signal(runs: dict[str, Any]) -> None:
    guard = runs["guard"]
    assert guard.stop is not None
    assert "TP-RL-NO-SIGNAL" in guard.stop.rule_ids
    # TP-RL-NO-SIGNAL needs 5 logged steps in a row (min_stretch); the FAIL (its zero gradients
    # may show first) is confirmed 2 logs after it appears: stopped once both hold.
    assert 5 <= guard.stop.step == runs["guarded_steps"] < GRPO_STEPS_STOPPED
    # The live verdict is the one `epoch` gives on the log the trainer wrote.
    assert sorted(guard.stop.rule_ids) == sorted(_ids(_judge(runs["grpo_constant"]), Level.FAIL))


# --- key names --------------------------------------------------------------------------------

# Every canonical series TRL 1.x writes into log_history, and the trainer that writes it.
DPO_KEYS = (*ob.PREFERENCE_SERIES, *ob.EVAL_PREFERENCE_SERIES, ob.ENTROPY)
GRPO_KEYS = (ob.REWARD, ob.REWARD_STD, ob.FRAC_REWARD_ZERO_STD, ob.ENTROPY, ob.COMPLETION_MEAN_LENGTH,
             ob.COMPLETION_MAX_LENGTH, ob.COMPLETION_CLIPPED_RATIO)


@pytest.mark.parametrize(("name", "keys", "renamed"), [
    ("dpo_healthy", DPO_KEYS, {}),
    ("grpo_healthy", GRPO_KEYS, {ob.CLIP_RATIO: "clip_ratio/region_mean"}),
    ("grpo_kl", (*GRPO_KEYS, ob.KL), {ob.CLIP_RATIO: "clip_ratio/region_mean"}),
])
def test_every_trl_key_is_read_under_its_canonical_name(runs: dict[str, Any], name: str,
                                                        keys: tuple[str, ...], renamed: dict[str, str]) -> None:
    history = json.loads(runs[name].read_text())["log_history"]
    run = read_trainer_state(runs[name])
    for series in (*keys, *renamed):
        key = renamed.get(series, series)
        holding = [e for e in history if key in e]
        assert holding, f"{name} logs no {key}"
        got = run.series[series]
        assert got.source_name == key
        assert list(got.steps) == [e["step"] for e in holding]
        assert list(got.values) == pytest.approx([e[key] for e in holding])


def test_wandb_spelling_of_the_same_log_maps_onto_the_same_series(runs: dict[str, Any], tmp_path: Path) -> None:
    # HF's W&B callback logs `train/<key>` and `eval/<key>` for `eval_<key>`.
    history = json.loads(runs["dpo_healthy"].read_text())["log_history"]
    rows = []
    for e in history:
        row: dict[str, Any] = {"train/global_step": e["step"]}
        for k, v in e.items():
            if k != "step":
                row[f"eval/{k[5:]}" if k.startswith("eval_") else f"train/{k}"] = v
        rows.append(json.dumps(row))
    path = tmp_path / "wandb.jsonl"
    path.write_text("\n".join(rows) + "\n")
    run = read_metrics_jsonl(path)
    for series in (*ob.PREFERENCE_SERIES, *ob.EVAL_PREFERENCE_SERIES):
        spelled = f"eval/{series[5:]}" if series.startswith("eval_") else f"train/{series}"
        assert run.series[series].source_name == spelled
    assert _judge(path).verdict is Verdict.PASS


@pytest.mark.parametrize(("key", "series"), [
    ("critic/score/mean", ob.REWARD), ("actor/entropy", ob.ENTROPY), ("actor/kl_loss", ob.KL),
    ("response_length/mean", ob.COMPLETION_MEAN_LENGTH), ("response_length/clip_ratio", ob.COMPLETION_CLIPPED_RATIO),
    ("response_length/max", ob.COMPLETION_MAX_LENGTH), ("actor/pg_clipfrac", ob.CLIP_RATIO),
    ("objective/kl", ob.KL), ("chosen_reward", ob.REWARDS_CHOSEN), ("reject_reward", ob.REWARDS_REJECTED),
    ("eval/rewards/margins", ob.EVAL_PREFIX + ob.REWARDS_MARGINS), ("completion_length", ob.COMPLETION_MEAN_LENGTH),
])
def test_other_stacks_keys_map_onto_the_canonical_series(tmp_path: Path, key: str, series: str) -> None:
    assert key in OBJECTIVE_ALIASES[series]
    path = tmp_path / "log.jsonl"
    path.write_text("".join(json.dumps({"step": s, "loss": 1.0 / s, key: 0.5 + s}) + "\n" for s in range(1, 4)))
    got = read_metrics_jsonl(path).series[series]
    assert got.source_name == key and list(got.values) == [1.5, 2.5, 3.5]


# --- compare and the HTML page ---------------------------------------------------------------------

def test_compare_of_grpo_runs_is_made_on_the_reward(runs: dict[str, Any]) -> None:
    from trainproof_lsp.judge.compare import compare

    outcome = compare(runs["grpo_length"], [runs["grpo_length_slow"]], CONFIG)
    (report,) = outcome.reports
    assert report.artefact.kind == "comparison"
    assert _ids(report) == ["TP-CMP-REWARD-BELOW"] and report.verdict is Verdict.WARN
    finding = report.findings[0]
    assert finding.evidence["series"] == "reward"
    assert finding.evidence["shortfall"] > 0.25 * finding.evidence["baseline_gain"]  # type: ignore[operator]
    assert report.comparison["compared_series"] == "reward" and report.comparison["common_to"] == 10
    # The loss comparison rules are skipped, and say why.
    for rule_id in ("TP-FLOOR-RATIO", "TP-END-RATIO", "TP-IMPROVE-DEFICIT"):
        assert _skip_reason(report, rule_id).startswith("the run is an RL run (GRPO/PPO family): its loss is near 0")


def test_compare_of_dpo_runs_adds_the_margins_to_the_loss(runs: dict[str, Any]) -> None:
    from trainproof_lsp.judge.compare import compare

    (report,) = compare(runs["dpo_healthy"], [runs["dpo_shuffled"]], CONFIG).reports
    below = next(f for f in report.findings if f.id == "TP-CMP-REWARD-BELOW")
    assert below.evidence["series"] == "rewards/margins" and below.level is Level.WARN
    assert report.comparison["margins_compared_series"] == "rewards/margins"
    assert "TP-IMPROVE-DEFICIT" in _ids(report, Level.FAIL)  # the loss comparison still runs
    # A run against itself: nothing below.
    (same,) = compare(runs["dpo_healthy"], [runs["dpo_healthy"]], CONFIG).reports
    assert "TP-CMP-REWARD-BELOW" not in _ids(same)
    assert next(c for c in same.checks if c.group == "TP-CMP-REWARD-BELOW").ran


def _figures(page: str) -> dict[str, str]:
    import re

    return {m.group(1): m.group(0) for m in re.finditer(r'<figure data-series="([^"]+)">.*?</figure>', page, re.S)}


def test_html_page_draws_the_reward_margins_and_kl_panels(runs: dict[str, Any]) -> None:
    from trainproof_lsp.judge.compare import doctor_with_runs
    from trainproof_lsp.output.html import to_html

    dpo = _figures(to_html(*doctor_with_runs([runs["dpo_healthy"]], CONFIG)))
    assert {"loss", "rewards/margins", "rewards/accuracies"} <= set(dpo) and "kl" not in dpo
    grpo = _figures(to_html(*doctor_with_runs([runs["grpo_kl"]], CONFIG)))
    assert {"loss", "reward", "frac_reward_zero_std", "kl", "entropy", "completions/mean_length"} <= set(grpo)
    assert "TP-RL-KL-BLOWUP" in grpo["kl"] and "TP-RL-ENTROPY-COLLAPSE" in grpo["entropy"]
    assert "TP-RL-KL-BLOWUP" not in grpo["loss"]


def test_watch_applies_the_rl_rules_to_a_growing_grpo_log(runs: dict[str, Any], tmp_path: Path) -> None:
    # The constant-reward run's log, written as a metric JSONL one entry at a time: `watch`
    # reads it with the same alias table and judges it with the same rules.
    import io

    from trainproof_lsp.guardian.watch import Watch, WatchOptions

    history = [e for e in json.loads(runs["grpo_constant"].read_text())["log_history"] if "reward" in e]
    log = tmp_path / "metrics.jsonl"
    log.write_text("", encoding="utf-8")
    w = Watch(log, CONFIG, WatchOptions(until_fail=True, confirm=1), out=io.StringIO(), err=io.StringIO())
    for n, entry in enumerate(history, 1):
        with log.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(entry) + "\n")
        w.poll_once()
        report = w.logs[str(log)].report
        assert ("TP-RL-NO-SIGNAL" in _ids(report, Level.FAIL)) == (n >= 5)  # min_stretch: 5 logged steps
    assert w.failed is not None


# --- each side of the limits (logs of the shape TRL writes, built here) -----------------------------

def _jsonl(tmp_path: Path, rows: list[dict[str, Any]]) -> Report:
    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return _judge(path)


def _grpo_rows(n: int, **series: Any) -> list[dict[str, Any]]:
    """n GRPO-shaped rows: a varying reward unless given; each keyword a list or a function of the step."""
    rows = []
    for step in range(1, n + 1):
        row: dict[str, Any] = {"step": step, "loss": 0.01 * ((-1) ** step), "reward": 0.3 + 0.01 * (step % 3),
                               "reward_std": 0.4, "frac_reward_zero_std": 0.2}
        for key, v in series.items():
            row[key.replace("__", "/")] = v(step) if callable(v) else v[step - 1]
        rows.append(row)
    return rows


@pytest.mark.parametrize(("stretch", "fires"), [(4, False), (5, True)])
def test_no_signal_needs_five_steps_in_a_row(tmp_path: Path, stretch: int, fires: bool) -> None:
    frac = [0.2] * 5 + [0.95] * stretch + [0.2] * 3
    report = _jsonl(tmp_path, _grpo_rows(len(frac), frac_reward_zero_std=frac))
    assert ("TP-RL-NO-SIGNAL" in _ids(report)) is fires
    if fires:
        (f,) = report.findings
        assert f.evidence["first_step"] == 6 and f.evidence["last_step"] == 10 and f.level is Level.FAIL


@pytest.mark.parametrize(("level", "fires"), [(0.89, False), (0.9, True)])
def test_no_signal_is_at_ninety_percent_of_groups(tmp_path: Path, level: float, fires: bool) -> None:
    report = _jsonl(tmp_path, _grpo_rows(8, frac_reward_zero_std=[level] * 8))
    assert ("TP-RL-NO-SIGNAL" in _ids(report)) is fires


def test_no_signal_after_the_reward_rose_is_saturation(tmp_path: Path) -> None:
    # The reward climbs to 1.0 and then every group scores it: solved, not broken.
    reward = [0.1, 0.12, 0.11, 0.4, 0.7, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]
    frac = [0.1, 0.1, 0.1, 0.3, 0.6, 0.95, 1.0, 1.0, 1.0, 1.0, 1.0]
    report = _jsonl(tmp_path, _grpo_rows(11, reward=reward, frac_reward_zero_std=frac))
    assert _ids(report) == ["TP-RL-SATURATED"] and report.verdict is Verdict.WARN
    f = report.findings[0]
    assert f.evidence["saturated"] is True and f.evidence["first_step"] == 6 and f.evidence["reward_level"] == 1.0


def test_a_reward_that_moves_by_a_hair_is_not_constant(tmp_path: Path) -> None:
    same = _jsonl(tmp_path, _grpo_rows(6, reward=[0.5] * 6, reward_std=[0.0] * 6))
    assert "TP-RL-REWARD-CONSTANT" in _ids(same)
    moved = _jsonl(tmp_path, _grpo_rows(6, reward=[0.5] * 5 + [0.5001], reward_std=[0.0] * 6))
    assert "TP-RL-REWARD-CONSTANT" not in _ids(moved)
    spread = _jsonl(tmp_path, _grpo_rows(6, reward=[0.5] * 6, reward_std=[0.0] * 5 + [0.3]))
    assert "TP-RL-REWARD-CONSTANT" not in _ids(spread)  # varies within its batches


@pytest.mark.parametrize(("end", "fires"), [(0.99, False), (1.0, True)])
def test_kl_blowup_is_from_one_nat_per_token(tmp_path: Path, end: float, fires: bool) -> None:
    kl = [0.0, 0.01, 0.05, end, end, end]
    report = _jsonl(tmp_path, _grpo_rows(6, kl=kl))
    assert ("TP-RL-KL-BLOWUP" in _ids(report)) is fires


def test_kl_that_starts_high_in_a_resumed_log_has_not_grown(tmp_path: Path) -> None:
    report = _jsonl(tmp_path, _grpo_rows(6, kl=[1.5, 1.6, 1.5, 1.6, 1.5, 1.6]))
    assert "TP-RL-KL-BLOWUP" not in _ids(report)


def test_non_finite_kl_fails_at_its_first_point(tmp_path: Path) -> None:
    report = _jsonl(tmp_path, _grpo_rows(6, kl=[0.0, 0.01, math.inf, math.nan, 0.02, 0.02]))
    f = next(f for f in report.findings if f.id == "TP-RL-KL-BLOWUP")
    assert f.evidence == {"step": 3, "nonfinite_points": 2, "points": 6}
    assert f.location.span is not None and f.location.span.start_line == 2


@pytest.mark.parametrize(("level", "fires"), [(0.875, False), (0.9, True)])
def test_clipped_is_from_ninety_percent_of_completions(tmp_path: Path, level: float, fires: bool) -> None:
    report = _jsonl(tmp_path, _grpo_rows(8, completions__clipped_ratio=[0.1] * 5 + [level] * 3))
    assert ("TP-RL-CLIPPED" in _ids(report)) is fires


@pytest.mark.parametrize(("late", "fires"), [(False, True), (True, False)])
def test_entropy_collapse_counts_only_in_the_first_half(tmp_path: Path, late: bool, fires: bool) -> None:
    at = 6 if late else 3  # the point (1-based) where the entropy drops to 0.01
    entropy = [3.0 if i < at else 0.01 for i in range(1, 11)]
    report = _jsonl(tmp_path, _grpo_rows(10, entropy=entropy))
    assert ("TP-RL-ENTROPY-COLLAPSE" in _ids(report)) is fires


@pytest.mark.parametrize(("cap", "fires"), [(64, True), (80, False)])
def test_length_hacking_needs_the_lengths_at_the_cap(tmp_path: Path, cap: int, fires: bool) -> None:
    lengths = [12, 14, 20, 30, 41, 50, 58, 60, 61, 62]
    report = _jsonl(tmp_path, _grpo_rows(10, completions__mean_length=lengths,
                                        completions__max_length=[cap] * 10))
    assert ("TP-RL-LENGTH-HACKING" in _ids(report)) is fires  # 61/64 is 95% of the cap; 61/80 is 76%


def _dpo_rows(losses: list[float], margins: list[float]) -> list[dict[str, Any]]:
    return [{"step": i, "loss": lv, "rewards/margins": m} for i, (lv, m) in enumerate(zip(losses, margins), 1)]


@pytest.mark.parametrize(("strays", "fires"), [(1, True), (2, False)])
def test_at_ln2_holds_at_ninety_percent_of_the_steps(tmp_path: Path, strays: int, fires: bool) -> None:
    # 11 steps after the first: one strayed point leaves 10 of 11 (91%), two leave 9 of 11 (82%).
    margins = [0.0] * 12
    for i in range(1, strays + 1):
        margins[-i] = 0.2
    report = _jsonl(tmp_path, _dpo_rows([math.log(2)] * 12, margins))
    assert ("TP-PREF-AT-LN2" in _ids(report)) is fires


def test_at_ln2_is_not_another_loss_that_stays_flat(tmp_path: Path) -> None:
    report = _jsonl(tmp_path, _dpo_rows([0.7] * 12, [0.0] * 12))  # 0.007 from ln 2: outside the band
    assert "TP-PREF-AT-LN2" not in _ids(report)


def test_margins_that_rise_beyond_their_noise_are_not_flat(tmp_path: Path) -> None:
    noise = [0.03, -0.02, 0.01, -0.03, 0.02, 0.0, -0.01, 0.03, -0.02, 0.01, 0.0, -0.01]
    flat = _jsonl(tmp_path, _dpo_rows([0.69] * 12, [0.05 + n for n in noise]))
    assert _ids(flat) == ["TP-PREF-MARGINS-FLAT"]
    rising = _jsonl(tmp_path, _dpo_rows([0.69] * 12, [0.05 + 0.02 * i + n for i, n in enumerate(noise)]))
    assert "TP-PREF-MARGINS-FLAT" not in _ids(rising)


@pytest.mark.parametrize(("accuracy", "fires"), [(0.55, True), (0.65, False)])
def test_accuracy_at_chance_is_within_its_band_of_one_half(tmp_path: Path, accuracy: float, fires: bool) -> None:
    rows = [{"step": i, "loss": 0.69 - 0.01 * i, "rewards/margins": 0.05 * i, "rewards/accuracies": accuracy}
            for i in range(1, 13)]
    report = _jsonl(tmp_path, rows)
    assert ("TP-PREF-ACC-AT-CHANCE" in _ids(report)) is fires  # constant: the band is its floor, 0.05


def test_entropy_and_kl_of_runs_that_are_not_rl_are_not_judged_as_rl(tmp_path: Path) -> None:
    # TRL's SFTTrainer logs a token entropy, and KTO a `kl` of another meaning: neither is an RL run.
    rows = [{"step": i, "loss": 2.0 / i, "entropy": 3.0 if i < 3 else 0.01, "kl": 0.1 * i * i}
            for i in range(1, 13)]
    report = _jsonl(tmp_path, rows)
    assert "TP-RL-ENTROPY-COLLAPSE" not in _ids(report) and "TP-RL-KL-BLOWUP" not in _ids(report)
    assert _skip_reason(report, "TP-RL-ENTROPY-COLLAPSE").startswith("the entropy is judged for RL runs")
    assert _skip_reason(report, "TP-RL-KL-BLOWUP").startswith("the KL is judged for RL runs")
