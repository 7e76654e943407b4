"""Security rules (Rule.security) cannot be turned off by a settings file: only the
command line can (core/config.keep_security, cli.py). docs/ci.md, "The tree's own
settings in CI"."""

from __future__ import annotations

import dataclasses

import pytest

from trainproof_lsp import cli
from trainproof_lsp.core.config import Config, keep_security, with_ignored
from trainproof_lsp.rules import BY_ID, REGISTRY, SECURITY_IDS

PICKLE = "TP-CKPT-UNSAFE-PICKLE"


def test_the_security_rules_are_the_ones_that_keep_a_file_that_runs_code_from_passing():
    assert sorted(SECURITY_IDS) == ["TP-CKPT-BAD-HEADER", "TP-CKPT-UNSAFE-PICKLE", "TP-ENV-CKPT-UNREADABLE",
                                    "TP-NOT-CHECKED"]
    assert {r.id for r in REGISTRY if r.security} == SECURITY_IDS
    assert not BY_ID["TP-DIVERGE"].security


@pytest.mark.parametrize(("config", "enabled_after", "off"), [
    (Config(ignore=frozenset({PICKLE, "TP-NAN"})), {PICKLE}, (PICKLE,)),
    (Config(select=frozenset({"TP-NAN"})), set(SECURITY_IDS) | {"TP-NAN"}, tuple(sorted(SECURITY_IDS))),
    (Config(select=frozenset({"TP-NAN", PICKLE})), set(SECURITY_IDS) | {"TP-NAN"},
     tuple(sorted(SECURITY_IDS - {PICKLE}))),
    (Config(), set(BY_ID), ()),
])
def test_keep_security_turns_the_security_rules_back_on_and_names_them(config, enabled_after, off):
    kept, named = keep_security(config, SECURITY_IDS)
    assert named == off
    assert {r.id for r in REGISTRY if kept.enabled(r)} >= enabled_after
    assert not kept.enabled(BY_ID["TP-NAN"]) if "TP-NAN" in config.ignore else True
    if config.select is not None:  # select still leaves the ordinary rules it left out
        assert not kept.enabled(BY_ID["TP-DIVERGE"])
    assert dataclasses.replace(kept, select=config.select, ignore=config.ignore) == config


def test_an_ignore_on_the_command_line_turns_a_security_rule_off():
    config = with_ignored(Config(), [PICKLE])
    assert not config.enabled(BY_ID[PICKLE]) and config.enabled(BY_ID["TP-NAN"])


def test_an_unknown_rule_given_to_ignore_is_refused(capsys):
    assert cli.main(["epoch", "x.jsonl", "--ignore", "TP-NOPE"]) == cli.EXIT_NOT_CHECKED
    assert capsys.readouterr().out.splitlines() == [
        "error: configuration: --ignore: unknown rule(s) TP-NOPE (see `trainproof-lsp rules`)",
        "Nothing judged. Worst: NOT-CHECKED"]


def test_the_editor_keeps_the_security_rules_a_workspace_settings_file_turns_off(tmp_path):
    from trainproof_lsp.server.analysis import load_config
    from trainproof_lsp.server.settings import Settings

    (tmp_path / "pyproject.toml").write_text(
        f'[tool.trainproof]\nignore = ["{PICKLE}", "TP-NAN"]\n', encoding="utf-8")
    config, problems = load_config(tmp_path, Settings())
    assert config.enabled(BY_ID[PICKLE]) and not config.enabled(BY_ID["TP-NAN"])
    assert problems == [f"trainproof: {config.source} turns off security rule(s) {PICKLE}; they run anyway "
                        "(a settings file cannot turn them off)"]
