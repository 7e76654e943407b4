"""Composite losses: the named parts of a loss are read from every metric table and from
trainer_state.json, and TP-LOSS-PART-STALLED reports the part that carries the task when
it stands still while the total (or another part) falls.

The logs are written by the real writers: Lightning's CSVLogger and transformers'
TrainerState.save_to_json (a Trainer subclass that logs its parts with `self.log`)."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest

from conftest import run_cli
from trainproof_lsp.core.model import LOSS_PART
from trainproof_lsp.readers.metrics import is_loss_part, map_columns, normalise_name
from trainproof_lsp.rules.loss_parts import pct, role


@pytest.mark.parametrize("names,parts", [
    (["step", "loss", "recon_loss", "kl_loss"], ["recon_loss", "kl_loss"]),
    (["step", "train/loss", "train/loss_ce", "train/aux_loss"], ["train/loss_ce", "train/aux_loss"]),
    # Lightning's per-step and per-epoch copies: the per-step one is the part
    (["step", "train_loss_step", "train_recon_loss_step", "train_recon_loss_epoch"], ["train_recon_loss_step"]),
    # a KL term named without the word "loss"
    (["epoch", "step", "train_kld", "train_loss", "train_recon_loss"], ["train_kld", "train_recon_loss"]),
    # not parts: held-out losses, the fp16 loss scale, a total, a smoothed copy, a weight
    (["step", "loss", "val_recon_loss", "loss_scale", "total_loss", "avg_loss", "kl_loss_weight"], []),
])
def test_which_columns_are_parts_of_the_loss(names, parts):
    chosen, _ = map_columns(names)
    assert sorted(k[len(LOSS_PART):] for k in chosen if k.startswith(LOSS_PART)) == sorted(parts)
    assert all(is_loss_part(normalise_name(p), {normalise_name(n): n for n in names}) for p in parts)


@pytest.mark.parametrize("column,kind", [
    ("recon_loss", "task"), ("train/loss_ce", "task"), ("mel_loss", "task"), ("lm_loss", "task"),
    ("kl_loss", "regulariser"), ("train_kld", "regulariser"), ("aux_loss", "regulariser"),
    ("router_z_loss", "regulariser"), ("commitment_loss", "regulariser"),
    ("gen_loss", "adversarial"), ("loss_disc", "adversarial"),
    ("foo_loss", "unknown"),
])
def test_the_role_of_a_part_is_read_from_its_name(column, kind):
    assert role(column) == kind


@pytest.mark.parametrize("change,text", [(-0.196, "-19.6%"), (0.01, "+1.0%"), (0.0, "+0.0%"),
                                         # rounded before the sign is written: never "-0.0%"
                                         (-0.0004, "+0.0%")])
def test_changes_are_written_with_their_sign(change, text):
    assert pct(change) == text


def _vae_csv(folder: Path, *, recon_fall: float) -> Path:
    """A VAE's Lightning CSVLogger log of 60 steps: the KL term collapses from 0.8 to ~0.01
    (posterior collapse); the reconstruction falls by `recon_fall` over the run, with batch
    noise of 0.5%."""
    from lightning.pytorch.loggers import CSVLogger

    rng = random.Random(7)
    logger = CSVLogger(str(folder), name="vae", version=0)
    for i in range(60):
        recon = 2.0 * (1 - recon_fall * i / 59) * (1 + rng.gauss(0, 0.005))
        kld = 0.8 * math.exp(-i / 8) + 0.01
        logger.log_metrics({"train_loss": recon + kld, "train_recon_loss": recon, "train_kld": kld}, step=i)
    logger.save()
    return folder / "vae" / "version_0" / "metrics.csv"


def test_posterior_collapse_in_a_lightning_log_is_reported_at_its_last_point(tmp_path):
    path = _vae_csv(tmp_path, recon_fall=0.0)
    code, out, _ = run_cli("epoch", str(path))
    assert code == 0
    lines = [line for line in out.splitlines() if " TP-" in line]
    assert len(lines) == 1, out
    # the header, then one row per step: step 59 is on line 61
    assert lines[0] == (
        f"{path}:61:1: WARN TP-LOSS-PART-STALLED train_recon_loss does not fall: 2.002 -> 2.002 (+0.0%; its level "
        "noise 0.002131, trend z 0.1) over steps 0-59, while the total loss falls 2.594 -> 2.013 (-22.4%); the fall "
        "is carried by train_kld (0.5964 -> 0.011, -98.2%); judged on the loss part train_recon_loss per logged "
        "step, points 1-60 of 60 (steps 0-59); levels are window medians at each end")


def test_a_vae_whose_reconstruction_learns_passes(tmp_path):
    path = _vae_csv(tmp_path, recon_fall=0.2)
    code, out, _ = run_cli("epoch", str(path))
    assert (code, out.splitlines()[-1]) == (0, "1 report(s): 1 PASS. Worst: PASS"), out


def _trainer_state(folder: Path, *, ce_fall: float) -> Path:
    """trainer_state.json as transformers writes it for a Trainer subclass that logs the
    parts of an MoE loss (`loss_ce`, `aux_loss`) beside `loss`: 40 entries; the balancing
    loss falls from 1.5 to 0.05, the cross-entropy by `ce_fall`."""
    from transformers import TrainerState

    state = TrainerState(max_steps=400, logging_steps=10, global_step=400)
    for i in range(40):
        ce = 2.4 * (1 - ce_fall * i / 39) + 0.004 * ((i * 7) % 5 - 2)
        aux = 0.05 + 1.45 * math.exp(-i / 6)
        state.log_history.append({"loss": round(ce + aux, 4), "loss_ce": round(ce, 4), "aux_loss": round(aux, 4),
                                  "grad_norm": 1.0, "learning_rate": 2e-5, "epoch": (i + 1) / 40,
                                  "step": 10 * (i + 1)})
    path = folder / "trainer_state.json"
    state.save_to_json(str(path))
    return path


def test_a_standing_cross_entropy_under_a_falling_moe_loss_is_reported_at_its_entry(tmp_path):
    path = _trainer_state(tmp_path, ce_fall=0.0)
    code, out, _ = run_cli("epoch", str(path))
    assert code == 0
    lines = [line for line in out.splitlines() if " TP-" in line]
    assert len(lines) == 1, out
    text = path.read_text(encoding="utf-8").splitlines()
    # the finding sits on the log entry of step 400, the last one
    line = int(lines[0].split(":")[1])
    assert text[line - 1].strip() == "{" and '"step": 400' in "\n".join(text[line - 1:line + 9])
    assert lines[0] == (
        f"{path}:{line}:5: WARN TP-LOSS-PART-STALLED loss_ce does not fall: 2.4 -> 2.402 (+0.1%; its level noise "
        "0.00428, trend z 0.4) over steps 10-400, while the total loss falls 3.587 -> 2.455 (-31.6%); the fall is "
        "carried by aux_loss (1.183 -> 0.0539, -95.4%); judged on the loss part loss_ce per logged step, points "
        "1-40 of 40 (steps 10-400); levels are window medians at each end")


def test_a_moe_run_whose_cross_entropy_falls_passes(tmp_path):
    path = _trainer_state(tmp_path, ce_fall=0.25)
    code, out, _ = run_cli("epoch", str(path))
    assert (code, out.splitlines()[-1]) == (0, "1 report(s): 1 PASS. Worst: PASS"), out
