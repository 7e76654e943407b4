"""The live guardian in real training loops: a real tiny HF Trainer and a real Lightning
fit, stopped (or not) by the registry's verdict, with the verdict stream they write."""

from __future__ import annotations

import io
import itertools
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from trainproof_lsp.core.config import Config
from trainproof_lsp.guardian.core import Guardian
from trainproof_lsp.guardian.stream import STREAM_NAME, current_verdict, read_stream

ROOT = Path(__file__).resolve().parents[1]
HF_RUNS = ROOT / "fixtures" / "hf_runs"


def test_guardian_modules_import_without_torch_transformers_or_lightning():
    code = """
import sys
for name in ("torch", "transformers", "accelerate", "lightning", "pytorch_lightning"):
    sys.modules[name] = None  # any import of them now raises ImportError
import trainproof_lsp.guardian
import trainproof_lsp.guardian.hf as hf
import trainproof_lsp.guardian.lightning as pl
import trainproof_lsp.guardian.watch
import trainproof_lsp.guardian.incremental
for mod in (hf, pl):
    try:
        mod.TrainproofCallback
    except ImportError as e:
        print("ImportError:", e)
    else:
        raise SystemExit("built without its framework")
print("ok")
"""
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("ImportError:") == 2 and "needs transformers" in done.stdout
    assert "needs lightning" in done.stdout and done.stdout.strip().endswith("ok")


# --- a real HF Trainer --------------------------------------------------------------------

@pytest.fixture(autouse=True)
def one_torch_thread():
    """Tiny models gain nothing from threads, and on a shared 2-core machine busy
    intra-op threads make a seconds-long run take a minute."""
    torch = sys.modules.get("torch")
    if torch is None:
        try:
            import torch
        except ImportError:
            yield
            return
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _hf_run(tmp_path: Path, *, lr: float, max_steps: int, policy: str = "stop_on_fail"):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    sys.path.insert(0, str(HF_RUNS))
    try:
        import make_hf_runs as recipe  # the fixtures' own tiny-Trainer recipe
    finally:
        sys.path.remove(str(HF_RUNS))
    from transformers import Trainer

    from trainproof_lsp.guardian.hf import TrainproofCallback

    out = tmp_path / "out"
    args = recipe.common_args(
        str(out), learning_rate=lr, warmup_steps=10, lr_scheduler_type="constant_with_warmup",
        max_grad_norm=1e9, max_steps=max_steps, logging_steps=1, logging_nan_inf_filter=False)
    callback = TrainproofCallback(policy, config=Config(), echo=False)
    trainer = Trainer(model=recipe.tiny_gpt2(10), args=args,
                      train_dataset=recipe.TokenDataset(recipe.pattern_sequences(512, seed=1)),
                      callbacks=[callback])
    trainer.train()
    return trainer, callback, out


def test_hf_stop_on_fail_stops_a_diverging_run_early_and_says_why(tmp_path):
    trainer, callback, out = _hf_run(tmp_path, lr=1.0, max_steps=300)
    assert callback.stop is not None
    assert trainer.state.global_step < 300 // 5, trainer.state.global_step
    assert trainer.state.global_step == callback.stop.step
    assert callback.stop.rule_ids and all(r.startswith("TP-") for r in callback.stop.rule_ids)
    assert callback.stop.rule_ids[0] in callback.stop.reason
    events = read_stream(out / STREAM_NAME)
    assert events[-1]["event"] == "stop" and events[-1]["step"] == trainer.state.global_step
    assert events[-1]["rule_ids"] == list(callback.stop.rule_ids)
    verdict = current_verdict(events)
    assert verdict is not None and verdict["verdict"] == "FAIL" and verdict["schema_version"] == 1
    assert verdict["source"] == "hf-trainer"
    first = verdict["findings"][0]
    assert {"id", "level", "message", "evidence"} <= set(first) and first["level"] == "FAIL"
    # One line per change: no two consecutive verdict events say the same thing.
    said = [(e["verdict"], tuple(sorted({f["id"] for f in e["findings"] if f["level"] in ("FAIL", "WARN")})))
            for e in events if e["event"] == "verdict"]
    assert all(a != b for a, b in itertools.pairwise(said))
    # The guardian's FAIL is the CLI's FAIL on the same log (trainer_state.json's log_history).
    from trainproof_lsp.judge.engine import judge_file

    trainer.state.save_to_json(str(out / "trainer_state.json"))
    trainer.model.config.save_pretrained(str(out))  # config.json: vocab_size for ln(V), as live
    cli = judge_file(out / "trainer_state.json", Config())
    assert cli.verdict.value == "FAIL"
    assert set(callback.stop.rule_ids) <= {f.id for f in cli.findings}


def test_hf_healthy_run_is_not_stopped(tmp_path):
    trainer, callback, out = _hf_run(tmp_path, lr=3e-3, max_steps=120)
    assert callback.stop is None
    assert trainer.state.global_step == 120
    events = read_stream(out / STREAM_NAME)
    verdicts = [e for e in events if e["event"] == "verdict"]
    # Too short to judge the curve at first (never a bare PASS), then judged and fine.
    assert [e["verdict"] for e in verdicts] == ["NOT-CHECKED", "PASS"]
    assert "the trend checks need at least 7, up to 10 as the loss's own noise requires" in verdicts[0]["reason"]
    assert not any(e["event"] == "stop" for e in events)


def test_hf_warn_policy_reports_the_fail_but_never_stops(tmp_path):
    trainer, callback, out = _hf_run(tmp_path, lr=1.0, max_steps=40, policy="warn")
    assert callback.stop is None and trainer.state.global_step == 40
    verdict = current_verdict(read_stream(out / STREAM_NAME))
    assert verdict is not None and verdict["verdict"] == "FAIL"


# --- a real Lightning fit -------------------------------------------------------------------

def _lightning_fit(tmp_path: Path, *, lr: float, max_epochs: int = 20):
    torch = pytest.importorskip("torch")
    L = pytest.importorskip("lightning")
    from lightning.pytorch.loggers import CSVLogger

    from trainproof_lsp.guardian.lightning import TrainproofCallback

    class Regressor(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))

        def training_step(self, batch, _):
            x, y = batch
            loss = torch.nn.functional.mse_loss(self.net(x), y)
            self.log("train_loss", loss)
            return loss

        def validation_step(self, batch, _):
            x, y = batch
            self.log("val_loss", torch.nn.functional.mse_loss(self.net(x), y))

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=lr)

    torch.manual_seed(0)
    x = torch.randn(512, 4)
    y = x @ torch.tensor([[1.0], [2.0], [-1.0], [0.5]]) + 0.01 * torch.randn(512, 1)
    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=32)
    callback = TrainproofCallback("stop_on_fail", config=Config(), echo=False)
    trainer = L.Trainer(max_epochs=max_epochs, logger=CSVLogger(str(tmp_path), name="run", version=0),
                        log_every_n_steps=2, enable_progress_bar=False, enable_model_summary=False,
                        enable_checkpointing=False, callbacks=[callback], accelerator="cpu")
    trainer.fit(Regressor(), data, data)
    return trainer, callback, tmp_path / "run" / "version_0"


def test_lightning_stop_on_fail_stops_a_diverging_fit(tmp_path):
    trainer, callback, folder = _lightning_fit(tmp_path, lr=0.6)
    max_steps = 20 * 16
    assert callback.stop is not None, "an SGD step of 0.6 on this net must diverge"
    assert trainer.global_step < max_steps // 2, trainer.global_step
    events = read_stream(folder / STREAM_NAME)
    (stop,) = [e for e in events if e["event"] == "stop"]
    assert stop["source"] == "lightning" and stop["rule_ids"][0] in stop["reason"]
    # After the stop only the settled verdict at the fit's end may follow (the records
    # Lightning logged while ending the step): still a FAIL.
    after = events[events.index(stop) + 1:]
    assert all(e["event"] == "verdict" for e in after)
    assert current_verdict(events)["verdict"] == "FAIL"


def test_lightning_healthy_fit_is_not_stopped(tmp_path):
    trainer, callback, folder = _lightning_fit(tmp_path, lr=0.05, max_epochs=5)
    assert callback.stop is None and trainer.global_step == 5 * 16
    verdict = current_verdict(read_stream(folder / STREAM_NAME))
    assert verdict is not None and verdict["verdict"] in ("PASS", "WARN")


# --- the guardian without a framework ---------------------------------------------------------

def _feed(guardian: Guardian, losses, start: int = 1) -> list[bool]:
    return [guardian.log(start + i, {"loss": v, "lr": 1e-3}) for i, v in enumerate(losses)]


def diverging(n: int, at: int) -> list[float]:
    return [(0.8 + 3 / math.sqrt(1 + i / 10)) * (1 + max(0, i - at) / 5) for i in range(n)]


def test_stop_waits_for_the_fail_to_stand_confirm_points(tmp_path):
    g = Guardian(source="test", policy="stop_on_fail", config=Config(), confirm_points=7, echo=False)
    g.begin(tmp_path)
    stops = _feed(g, diverging(200, at=60))
    first_stop = stops.index(True)
    events = read_stream(tmp_path / STREAM_NAME)
    first_fail = next(e for e in events if e["event"] == "verdict" and e["verdict"] == "FAIL")
    assert first_stop + 1 == first_fail["step"] + 7
    assert all(stops[first_stop:])  # once stopped, it keeps saying stop


def test_the_stream_is_byte_identical_for_the_same_run_and_time_only_when_asked(tmp_path):
    def stream(folder: Path, wall_time: bool) -> bytes:
        g = Guardian(source="test", policy="stop_on_fail", config=Config(), echo=False, wall_time=wall_time)
        g.begin(folder)
        _feed(g, diverging(150, at=50))
        return (folder / STREAM_NAME).read_bytes()

    a, b = stream(tmp_path / "a", False), stream(tmp_path / "b", False)
    a = a.replace(str(tmp_path / "a").encode(), b"X")
    b = b.replace(str(tmp_path / "b").encode(), b"X")
    assert a == b and b"wall_time" not in a
    timed = stream(tmp_path / "c", True)
    assert all("wall_time" in json.loads(line) for line in timed.splitlines())


def test_odd_values_are_read_past_and_a_bad_config_stands_the_guardian_down(tmp_path):
    out = io.StringIO()
    g = Guardian(source="test", config=Config(), out=out)
    g.begin(tmp_path)
    for i in range(30):
        assert g.log(i, {"loss": ["not", "a", "number"] if i == 3 else ("nan" if i == 5 else 3.0 - i * 0.05),
                         "lr": None}) is False
    assert g.report is not None and "TP-NAN" in {f.id for f in g.report.findings}
    bad = tmp_path / "bad.toml"
    bad.write_text("[tool.trainproof]\nselect = ['TP-NOPE']\n", encoding="utf-8")
    g2 = Guardian(source="test", config=bad, out=out)
    g2.begin(tmp_path / "two")
    assert g2.log(1, {"loss": 1.0}) is False
    events = read_stream(tmp_path / "two" / STREAM_NAME)
    assert events[0]["verdict"] == "NOT-CHECKED" and "TP-NOPE" in events[0]["reason"]
    assert "stands down" in out.getvalue() and "Traceback" not in out.getvalue()
