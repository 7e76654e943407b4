"""Canonical names of the series preference and RL trainers log, beside the loss.

A DPO/KTO/ORPO run (TRL's `DPOTrainer`, OpenRLHF's DPO) and a GRPO/PPO run (TRL's
`GRPOTrainer`, verl, OpenRLHF's PPO) are judged by what their own metrics mean, not by the
loss alone (docs/preference-rl.md). Readers map each stack's key onto these names
(readers/metrics.py, the alias table); the names are TRL 1.x's own keys, as its trainers
write them into `trainer_state.json`'s `log_history`:

    DPO:  {"loss": 0.69, "rewards/chosen": 0.05, "rewards/rejected": -0.04,
           "rewards/accuracies": 1.0, "rewards/margins": 0.09, "logps/chosen": -8.5,
           "logps/rejected": -9.3, ..., "step": 2}
          {"eval_loss": 0.68, "eval_rewards/margins": 0.1, ..., "step": 5}
    GRPO: {"loss": 0.01, "reward": 0.25, "reward_std": 0.46, "frac_reward_zero_std": 0.5,
           "kl": 0.002, "entropy": 4.2, "completions/mean_length": 26.5,
           "completions/max_length": 32.0, "completions/clipped_ratio": 0.6,
           "clip_ratio/region_mean": 0.0, ..., "step": 3}
"""

from __future__ import annotations

# --- preference optimisation (DPO family: DPO, IPO, KTO, ORPO, SimPO...) ----------------
# beta * (policy log-prob - reference log-prob) of the chosen / rejected completion
REWARDS_CHOSEN = "rewards/chosen"
REWARDS_REJECTED = "rewards/rejected"
# chosen minus rejected reward, batch mean (the quantity the DPO loss pushes up)
REWARDS_MARGINS = "rewards/margins"
# share of pairs whose chosen reward exceeds the rejected one
REWARDS_ACCURACIES = "rewards/accuracies"
# the policy's summed log-probability of the chosen / rejected completion
LOGPS_CHOSEN = "logps/chosen"
LOGPS_REJECTED = "logps/rejected"

PREFERENCE_SERIES = (REWARDS_CHOSEN, REWARDS_REJECTED, REWARDS_MARGINS, REWARDS_ACCURACIES,
                     LOGPS_CHOSEN, LOGPS_REJECTED)
# The same measured on the eval set: TRL prefixes `eval_` (W&B shows them as `eval/...`).
EVAL_PREFIX = "eval_"
EVAL_PREFERENCE_SERIES = tuple(EVAL_PREFIX + s for s in PREFERENCE_SERIES)

# --- RL from rewards (GRPO/PPO/RLOO family) --------------------------------------------
REWARD = "reward"  # mean reward of the step's completions
REWARD_STD = "reward_std"  # its spread
# share of prompt groups whose completions all got the same reward: their advantages are
# 0, so they give no gradient
FRAC_REWARD_ZERO_STD = "frac_reward_zero_std"
KL = "kl"  # per-token KL of the policy from the reference
ENTROPY = "entropy"  # mean per-token entropy of the policy on its completions
COMPLETION_MEAN_LENGTH = "completions/mean_length"
COMPLETION_MAX_LENGTH = "completions/max_length"
# share of completions cut at the maximum completion length (no end-of-sequence token)
COMPLETION_CLIPPED_RATIO = "completions/clipped_ratio"
# share of tokens whose policy ratio the PPO-style objective clipped
CLIP_RATIO = "clip_ratio"

RL_SERIES = (REWARD, REWARD_STD, FRAC_REWARD_ZERO_STD, KL, ENTROPY, COMPLETION_MEAN_LENGTH,
             COMPLETION_MAX_LENGTH, COMPLETION_CLIPPED_RATIO, CLIP_RATIO)
EVAL_RL_SERIES = tuple(EVAL_PREFIX + s for s in (REWARD, REWARD_STD, FRAC_REWARD_ZERO_STD, KL))

OBJECTIVE_SERIES = PREFERENCE_SERIES + EVAL_PREFERENCE_SERIES + RL_SERIES + EVAL_RL_SERIES
