"""The command line is a table of subcommands over one run/exit path (trainproof_lsp/cli.py):
every judging subcommand loads settings, refuses what it cannot judge and exits the same way."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from trainproof_lsp import cli
from trainproof_lsp.output import render

ROOT = Path(__file__).resolve().parents[1]
LOG = ROOT / "fixtures" / "logs" / "nan_at_step_40.jsonl"

# One argument list per subcommand that reads settings: each would judge something real
# (the FAIL log) if its settings could be used.
JUDGING = {
    "doctor": ["doctor", str(LOG)],
    "epoch": ["epoch", str(LOG)],
    "compare": ["compare", str(LOG), str(LOG)],
    "preflight": ["preflight", str(LOG)],
    "env": ["env", "--entrypoint", str(LOG)],
    "watch": ["watch", str(LOG), "--interval", "1"],
}


def test_every_subcommand_in_the_table_is_offered_and_nothing_else():
    parser = cli.build_parser()
    (sub,) = [a for a in parser._actions if a.dest == "command"]
    assert list(sub.choices) == list(cli.COMMANDS) == ["doctor", "compare", "epoch", "env", "preflight", "rules",
                                                         "watch", "serve"]
    assert set(JUDGING) | {"rules", "serve"} == set(cli.COMMANDS)


@pytest.mark.parametrize("name", JUDGING)
def test_a_bad_settings_file_is_one_line_not_checked_exit_2_in_every_subcommand(name, tmp_path, capsys):
    config = tmp_path / "pyproject.toml"
    config.write_text('[tool.trainproof]\nselect = ["TP-NOPE"]\n', encoding="utf-8")
    assert cli.main([*JUDGING[name], "--config", str(config), "--json"]) == cli.EXIT_NOT_CHECKED
    out = json.loads(capsys.readouterr().out)
    assert out["reports"] == [] and out["worst_verdict"] == "NOT-CHECKED"
    assert out["error"] == f"configuration: {config}: select names unknown rule(s) TP-NOPE (see `trainproof-lsp rules`)"


@pytest.mark.parametrize("name", ["doctor", "epoch", "compare"])
def test_a_bad_flag_value_is_refused_before_anything_is_judged(name, capsys):
    assert cli.main([*JUDGING[name], "--vocab-size", "1"]) == cli.EXIT_NOT_CHECKED
    # A usage error: the error and the verdict, no "0 report(s): none".
    assert capsys.readouterr().out.splitlines() == ["error: configuration: --vocab-size must be at least 2",
                                                    "Nothing judged. Worst: NOT-CHECKED"]


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    (sub,) = [a for a in cli.build_parser()._actions if a.dest == "command"]
    return dict(sub.choices)


def test_every_positional_and_option_of_every_subcommand_has_help():
    parsers = {"trainproof-lsp": cli.build_parser(), **_subparsers()}
    missing = [f"{name} {action.dest}" for name, parser in parsers.items() for action in parser._actions
               if not action.help]
    assert missing == []


def _options(name: str) -> set[str]:
    return {o for a in _subparsers()[name]._actions for o in a.option_strings if o.startswith("--")}


SHARED = {"--help", "--json", "--sarif", "--config", "--no-config", "--ignore", "--allow-config-to-disable-security",
          "--verbose"}
LOG_FACTS = {"--vocab-size", "--num-classes", "--column"}  # what the log rules use


def test_preflight_and_env_offer_only_the_options_they_use():
    assert _options("preflight") == SHARED | {"--eval", "--tokenizer", "--max-len", "--jobs", "--dask",
                                              "--field",  # the dataset's own field names
                                              # the trained-tokens map's masking and its quick look
                                              "--train-config", "--loss", "--truncation", "--response-template",
                                              "--collator-masks-pad", "--sample",
                                              "--batch"}  # the objective checks on one saved batch
    assert _options("env") == SHARED | {"--entrypoint", "--module", "--cwd", "--python", "--timeout",
                                        "--run-entrypoint", "--required-gb", "--checkpoint-gb", "--keep",
                                        "--output-dir", "--checkpoint"}
    for name in ("doctor", "compare", "epoch"):
        assert SHARED | LOG_FACTS <= _options(name), name


def test_max_len_says_which_extra_it_needs():
    (max_len,) = [a for a in _subparsers()["preflight"]._actions if "--max-len" in a.option_strings]
    assert max_len.help == ("context length for token-length checks and the token map (tokenizer.json read with "
                            "`tokenizers`; without one, counted with transformers: pip install 'trainproof-lsp[tokens]')")


def test_epoch_on_a_folder_points_at_doctor(tmp_path, capsys):
    assert cli.main(["epoch", str(tmp_path)]) == cli.EXIT_NOT_CHECKED
    assert capsys.readouterr().out.splitlines() == [
        f"error: {tmp_path} is a folder; epoch judges one log file: `trainproof-lsp doctor {tmp_path}` judges a "
        "run folder",
        "Nothing judged. Worst: NOT-CHECKED"]


def test_rules_contracts_prints_the_generated_block(capsys):
    assert cli.main(["rules", "--contracts"]) == cli.EXIT_OK
    assert capsys.readouterr().out == render.contracts_rule_list()
