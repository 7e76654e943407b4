"""The JSON Schema `--json`'s help names (trainproof_lsp/output/outcome.schema.json,
package data: the wheel ships it) describes what every judging subcommand prints. A
small validator of the keywords the schema uses (no jsonschema dependency)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from trainproof_lsp import cli

REPO = Path(__file__).resolve().parent.parent
SCHEMA_PATH = REPO / cli.JSON_SCHEMA
F = REPO / "fixtures"
_TYPES = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}


def _is(value: Any, name: str) -> bool:
    if name == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if name == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, _TYPES[name])


def validate(value: Any, schema: dict[str, Any], root: dict[str, Any], where: str = "$") -> list[str]:
    """Every place `value` breaks `schema` (the keywords outcome.schema.json uses)."""
    if "$ref" in schema:
        target = root
        for part in schema["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        return validate(value, target, root, where)
    errors: list[str] = []
    if "const" in schema and value != schema["const"]:
        errors.append(f"{where}: {value!r} is not {schema['const']!r}")
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{where}: {value!r} not in {schema['enum']}")
    if "type" in schema:
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(_is(value, t) for t in types):
            return [*errors, f"{where}: {type(value).__name__} is not {types}"]
    if "pattern" in schema and isinstance(value, str) and not re.search(schema["pattern"], value):
        errors.append(f"{where}: {value!r} does not match {schema['pattern']}")
    if "minimum" in schema and _is(value, "number") and value < schema["minimum"]:
        errors.append(f"{where}: {value} < {schema['minimum']}")
    if isinstance(value, dict):
        errors += [f"{where}: no {k!r}" for k in schema.get("required", ()) if k not in value]
        props = schema.get("properties", {})
        for k, v in value.items():
            if k in props:
                errors += validate(v, props[k], root, f"{where}.{k}")
            elif isinstance(schema.get("additionalProperties"), dict):
                errors += validate(v, schema["additionalProperties"], root, f"{where}.{k}")
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            errors += validate(item, schema["items"], root, f"{where}[{i}]")
    return errors


SCHEMA = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))


def test_the_validator_finds_what_breaks_the_schema():
    good = {"schema_version": 1, "tool": {"name": "trainproof-lsp", "version": "0"}, "reports": [],
            "not_judged": [], "passed_over": [], "worst_verdict": "PASS", "error": ""}
    assert validate(good, SCHEMA, SCHEMA) == []
    bad = {**good, "worst_verdict": "OK", "reports": [{"artefact": {}, "verdict": "PASS"}]}
    assert validate(bad, SCHEMA, SCHEMA) == [
        "$.reports[0]: no 'reason'", "$.reports[0]: no 'findings'", "$.reports[0]: no 'checks'",
        "$.reports[0].artefact: no 'path'", "$.reports[0].artefact: no 'kind'", "$.reports[0].artefact: no 'format'",
        "$.reports[0].artefact: no 'sources'", "$.worst_verdict: 'OK' not in ['PASS', 'WARN', 'FAIL', 'NOT-CHECKED']"]


@pytest.mark.parametrize("args", [
    ["doctor", str(F)],
    ["compare", str(F / "hf_runs" / "healthy"), str(F / "hf_runs" / "lr_zero"), str(F / "logs" / "keras_csvlogger.csv")],
    ["preflight", str(F / "datasets"), "--tokenizer", str(F / "tokenizers" / "healthy_chatml")],
    ["epoch", str(F / "hf_runs" / "healthy")],  # refused: a folder
], ids=["doctor", "compare", "preflight", "epoch-refused"])
def test_every_json_output_fits_the_schema_the_help_names(args):
    proc = subprocess.run([sys.executable, "-m", "trainproof_lsp", *args, "--json"], cwd=REPO,
                          capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode in (0, 1, 2) and "Traceback" not in proc.stderr, proc.stderr
    out = json.loads(proc.stdout)
    assert validate(out, SCHEMA, SCHEMA) == []
    assert out["reports"] or out["error"]


def test_the_json_help_names_the_schema_and_the_package_data_holds_it():
    assert SCHEMA_PATH.is_file()
    parser = cli.build_parser()
    (sub,) = [a for a in parser._actions if a.dest == "command"]
    for name in ("doctor", "compare", "epoch", "preflight", "env"):
        (json_opt,) = [a for a in sub.choices[name]._actions if "--json" in a.option_strings]
        assert json_opt.help.endswith(f"(its JSON Schema: {cli.JSON_SCHEMA} in the installed package)")
    tomllib = pytest.importorskip("tomllib", reason="tomllib is in the standard library from Python 3.11")

    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    assert pyproject["tool"]["setuptools"]["package-data"]["trainproof_lsp"] == ["output/outcome.schema.json"]
