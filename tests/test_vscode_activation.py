"""The VS Code extension starts where the tool has work, not for every JSON or Python
file in every workspace: package.json activates it on training artefacts, named by the
table of formats (trainproof_lsp/core/formats.py), and on its own languages; the server
gets any JSON, CSV or Python file only where the workspace holds such an artefact (or
the user asked), else only the files the tool owns. This checks the client's lists
(editors/vscode/src/common/constants.ts) against the table; the extension's mocha tests
(activation.test.ts) check package.json and the client against those lists.
"""

from __future__ import annotations

import json
import re
from fnmatch import fnmatchcase
from pathlib import Path

from trainproof_lsp.core import formats
from trainproof_lsp.core.formats import FORMATS

ROOT = Path(__file__).resolve().parent.parent
VSCODE = ROOT / "editors" / "vscode"
CONSTANTS = VSCODE / "src" / "common" / "constants.ts"
VERDICT_STREAM = "trainproof-verdict.jsonl"  # the training callbacks' verdict stream (docs/guardian.md)
# Names every kind of project has: no sign of a training run.
GENERIC_NAMES = frozenset({"config.json"})
# The editors' own languages: JSON Lines (.jsonl, .ndjson) and a tokenizer's chat template.
OWN_LANGUAGE_SUFFIXES = (".jsonl", ".ndjson", ".jinja")


def artefact_globs() -> list[str]:
    """What marks a workspace as holding training artefacts: the names and patterns of
    the table's metric logs and tokenizer/model configs (not `config.json`), the names
    and suffixes that mark a run folder, and the verdict stream; each once, in order."""
    named = [n for f in FORMATS if f.kind in ("metrics", "config") for n in (*f.names, *f.patterns)
             if n not in GENERIC_NAMES]
    marks = [*formats.RUN_MARKER_NAMES, *(f"*{s}" for s in formats.RUN_MARKER_SUFFIXES), VERDICT_STREAM]
    return [f"**/{n}" for n in dict.fromkeys([*named, *marks])]


def _ts_array(name: str) -> list[str]:
    body = re.search(rf"export const {name}: readonly string\[\] = \[(.*?)\];", CONSTANTS.read_text(encoding="utf-8"), re.S)
    assert body, name
    return re.findall(r"'([^']*)'", body.group(1))


def _owned_members() -> list[str]:
    source = CONSTANTS.read_text(encoding="utf-8")
    body = re.search(r"export const OWNED_DOCUMENT_PATTERN =\s*(.*?);", source, re.S)
    assert body
    pattern = "".join(re.findall(r"'([^']*)'", body.group(1)))
    assert pattern.startswith("**/{") and pattern.endswith("}"), pattern
    return pattern[len("**/{"):-1].split(",")


def test_the_artefacts_the_extension_activates_on_are_the_tables():
    assert _ts_array("ARTEFACT_GLOBS") == artefact_globs(), \
        "editors/vscode/src/common/constants.ts ARTEFACT_GLOBS drifted from core/formats.py"
    assert "**/trainer_state.json" in artefact_globs() and "**/events.out.tfevents.*" in artefact_globs()
    assert "**/metrics.csv" in artefact_globs() and "**/tokenizer_config.json" in artefact_globs()
    assert "**/config.json" not in artefact_globs()
    manifest = json.loads((VSCODE / "package.json").read_text(encoding="utf-8"))
    assert manifest["activationEvents"] == [*(f"workspaceContains:{g}" for g in artefact_globs()),
                                            "onLanguage:jsonl", "onLanguage:trainproof-log"]


def test_the_owned_documents_are_the_opened_artefacts_and_the_own_languages():
    """In a workspace without artefacts the server is sent exactly: every artefact name
    that is an opened format, and the files of the editors' own languages."""
    opened = formats.opened_extensions()
    names = [g[len("**/"):] for g in artefact_globs() if "*" not in g[len("**/"):]]
    want = [n for n in names if n.rsplit(".", 1)[-1] in opened]
    members = _owned_members()
    suffixes = [m for m in members if m.startswith("*.")]
    assert sorted(suffixes) == sorted(f"*{s}" for s in OWN_LANGUAGE_SUFFIXES)
    # every owned name once, the names covered by an own language's suffix left to it
    assert sorted(m for m in members if not m.startswith("*")) == \
        sorted(n for n in want if not any(fnmatchcase(n, s) for s in suffixes))
    for generic in ("config.json", "train.py", "package.json", "data.csv"):
        assert not any(fnmatchcase(generic, m) for m in members), generic
