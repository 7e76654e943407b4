"""The registry is the single source of rule documentation: docs/rules.md, CONTRACTS.md,
SARIF metadata and the rules command must agree with it, in both directions."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from trainproof_lsp.output import render
from trainproof_lsp.core.model import Level
from trainproof_lsp.rules import BY_ID, REGISTRY

ROOT = Path(__file__).resolve().parents[1]
DOC_PARTS = ("What it flags:", "Why it matters:", "What it does not mean:")


def test_docs_rules_md_is_generated_from_the_registry():
    on_disk = (ROOT / "docs" / "rules.md").read_text(encoding="utf-8")
    assert on_disk == render.rules_markdown(), (
        "docs/rules.md drifted from the registry: run "
        "`python -m trainproof_lsp rules --markdown > docs/rules.md`"
    )


def test_contracts_lists_exactly_the_registry_ids():
    text = (ROOT / "CONTRACTS.md").read_text(encoding="utf-8")
    block = text.split("<!-- rule-ids:start -->")[1].split("<!-- rule-ids:end -->")[0]
    listed = re.findall(r"`(TP-[A-Z0-9-]+)`", block)
    assert listed == [r.id for r in REGISTRY]


def test_contracts_rule_list_is_generated_from_the_registry():
    text = (ROOT / "CONTRACTS.md").read_text(encoding="utf-8")
    assert render.contracts_rule_list() in text, (
        "CONTRACTS.md's rule list drifted from the registry: run `make docs` "
        "(it writes `python -m trainproof_lsp rules --contracts` between the markers)"
    )
    assert render.splice_contracts(text) == text


def test_splicing_the_contracts_list_replaces_only_the_block():
    rules = REGISTRY[:2]
    old = f"head\n{render.CONTRACTS_START}\n- `TP-GONE` FAIL\n{render.CONTRACTS_END}\ntail\n"
    new = render.splice_contracts(old, rules)
    assert new == f"head\n{render.contracts_rule_list(rules)}tail\n"
    assert render.splice_contracts(new, rules) == new  # the note above the block is kept once
    assert f"- `{REGISTRY[0].id}` {REGISTRY[0].level.value}\n" in new and "TP-GONE" not in new


def test_ids_are_unique_and_upper_kebab():
    ids = [r.id for r in REGISTRY]
    assert len(ids) == len(set(ids))
    for rule_id in ids:
        assert re.fullmatch(r"TP(-[A-Z0-9]+)+", rule_id), rule_id


@pytest.mark.parametrize("rule", REGISTRY, ids=lambda r: r.id)
def test_every_rule_doc_has_summary_and_the_three_parts(rule):
    doc = rule.doc.strip()
    summary = doc.splitlines()[0]
    assert summary.endswith(".") and len(summary) < 100
    for part in DOC_PARTS:
        assert part in doc, f"{rule.id} doc lacks {part!r}"


@pytest.mark.parametrize("rule", REGISTRY, ids=lambda r: r.id)
def test_every_limit_has_a_default_and_a_reason_comment(rule):
    if not dataclasses.is_dataclass(rule.limits) or not dataclasses.fields(rule.limits):
        return
    import inspect

    source = inspect.getsource(rule.limits)
    defaults = rule.limits()
    for field in dataclasses.fields(rule.limits):
        assert getattr(defaults, field.name) is not None
        # A comment on the field's line or the lines just above it says why.
        lines = source.splitlines()
        idx = next(i for i, line in enumerate(lines) if re.match(rf"\s+{field.name}\s*:", line))
        context = "\n".join(lines[max(0, idx - 3) : idx + 1])
        assert "#" in context, f"{rule.id}.{field.name} has no comment saying why"


def test_sarif_rule_table_matches_registry():
    from trainproof_lsp.core.model import Outcome

    sarif = json.loads(render.to_sarif(Outcome(reports=())))
    table = sarif["runs"][0]["tool"]["driver"]["rules"]
    assert [r["id"] for r in table] == [r.id for r in REGISTRY]
    for entry in table:
        rule = BY_ID[entry["id"]]
        assert entry["shortDescription"]["text"] == rule.summary
        assert entry["properties"]["trainproof-level"] == rule.level.value


def test_rules_command_prints_the_registry_doc(capsys):
    from trainproof_lsp.cli import main

    assert main(["rules", "TP-DIVERGE"]) == 0
    out = capsys.readouterr().out
    assert out.strip() == render.rule_markdown(BY_ID["TP-DIVERGE"]).strip()


def test_levels_are_known():
    assert {r.level for r in REGISTRY} <= set(Level)
