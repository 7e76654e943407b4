"""The command line is a table of subcommands over one run/exit path (trainproof_lsp/cli.py):
every judging subcommand loads settings, refuses what it cannot judge and exits the same way."""

from __future__ import annotations

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


@pytest.mark.parametrize("name", ["doctor", "epoch", "compare", "preflight", "env"])
def test_a_bad_flag_value_is_refused_before_anything_is_judged(name, capsys):
    assert cli.main([*JUDGING[name], "--vocab-size", "1"]) == cli.EXIT_NOT_CHECKED
    out = capsys.readouterr().out
    assert "error: configuration: --vocab-size must be at least 2" in out and "Worst: NOT-CHECKED" in out


def test_rules_contracts_prints_the_generated_block(capsys):
    assert cli.main(["rules", "--contracts"]) == cli.EXIT_OK
    assert capsys.readouterr().out == render.contracts_rule_list()
