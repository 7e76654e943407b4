"""Quick fixes over LSP: a finding with a mechanical fix is offered as a code action at its
range; applying the action's edit to the buffer makes the finding go away on the next
check. The fix-all kind gathers the safe fixes only."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import pytest_asyncio
import pytest_lsp
from lsprotocol import types as lsp
from pytest_lsp import LanguageClient

from lsp_support import SERVER, WAIT_S, Session, by_code
from trainproof_lsp.server.code_actions import FIX_ALL, actions

FP16 = "TP-SCRIPT-FP16-ON-BF16-MODEL"
BEST = "TP-SCRIPT-BEST-NEVER-SAVED"
SCRIPT = """\
import json
from datasets import load_dataset
from transformers import AutoModelForCausalLM, TrainingArguments
model = AutoModelForCausalLM.from_pretrained("llama")
train = load_dataset("json", data_files="train.jsonl")
args = TrainingArguments(output_dir="out", fp16=True, eval_strategy="steps", eval_steps=20, load_best_model_at_end=True)
"""


@pytest_lsp.fixture(config=SERVER)
async def client(lsp_client: LanguageClient):
    yield


@pytest_asyncio.fixture(params=["vscode", "neovim-0.11"])
async def session(request, client: LanguageClient):
    s = Session(client, request.param)
    yield s
    await s.stop()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    # A Llama-3-style config.json (saved in bfloat16) and 400 rows: a 150-step run.
    (tmp_path / "llama").mkdir()
    (tmp_path / "llama" / "config.json").write_text('{"model_type": "llama", "torch_dtype": "bfloat16"}')
    (tmp_path / "train.jsonl").write_text("".join('{"text": "row %d"}\n' % i for i in range(400)))
    (tmp_path / "train.py").write_text(SCRIPT, encoding="utf-8")
    return tmp_path


async def _actions(s: Session, uri: str, d: lsp.Diagnostic, only: list[str] | None = None) -> list[lsp.CodeAction]:
    found = await asyncio.wait_for(s.client.text_document_code_action_async(lsp.CodeActionParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri), range=d.range,
        context=lsp.CodeActionContext(diagnostics=[d], only=only))), WAIT_S)
    return [a for a in found or [] if isinstance(a, lsp.CodeAction)]


@pytest.mark.asyncio
@pytest.mark.parametrize("rule,title,new_text", [
    (FP16, "trainproof: train in bf16 instead (bf16=True; needs an Ampere or newer GPU)", "bf16"),
    (BEST, "trainproof: set save_steps to 20 (= eval_steps, inside the 150-step run)", ", save_steps=20"),
])
async def test_the_fix_is_offered_at_the_finding_and_applying_it_clears_the_finding(session, project, rule, title,
                                                                                     new_text):
    await session.start(root=project)
    uri = session.open(project / "train.py", language_id="python")
    diagnostics = by_code(await session.diagnostics(uri))
    assert {FP16, BEST} <= set(diagnostics)
    d = diagnostics[rule]
    (action,) = await _actions(session, uri, d, [lsp.CodeActionKind.QuickFix])
    assert action.title == title and action.kind == lsp.CodeActionKind.QuickFix
    assert action.is_preferred is False  # changes what the run does: offered, not preferred
    (edit,) = action.edit.changes[uri]
    assert edit.new_text == new_text
    line = SCRIPT.splitlines()[5]
    if rule == FP16:  # the keyword's name is replaced, on the finding's line
        assert edit.range.start.line == d.range.start.line == 5
        assert line[edit.range.start.character:edit.range.end.character] == "fp16"
    # apply the edit to the buffer: the next check has no such finding, the other stays
    r = edit.range
    version = session.edit(uri, (r.start.line, r.start.character), (r.end.line, r.end.character), edit.new_text)
    after = by_code(await session.diagnostics(uri, version))
    assert rule not in after
    assert ({FP16, BEST} - {rule}) <= set(after)


def _diagnostic(code: str, safe: bool, line: int, start: int, end: int, text: str) -> lsp.Diagnostic:
    r = {"start": {"line": line, "character": start}, "end": {"line": line, "character": end}}
    return lsp.Diagnostic(range=lsp.Range(start=lsp.Position(line=line, character=start),
                                          end=lsp.Position(line=line, character=end)), message=code, code=code,
                          data={"id": code, "fix": {"title": f"fix {code}", "safe": safe,
                                                    "edits": [{"range": r, "newText": text}]}})


def test_fix_all_takes_the_safe_fixes_only_and_never_two_overlapping_edits():
    renames = [_diagnostic("TP-A", True, 3, 10, 29, "eval_strategy"), _diagnostic("TP-B", True, 4, 0, 7, "use_cpu"),
               _diagnostic("TP-C", False, 5, 0, 4, "bf16"), _diagnostic("TP-D", True, 3, 12, 14, "x")]
    (fix_all,) = actions("file:///t.py", [], renames, [FIX_ALL])
    assert fix_all.kind == FIX_ALL and [d.code for d in fix_all.diagnostics] == ["TP-A", "TP-B"]
    assert [e.new_text for e in fix_all.edit.changes["file:///t.py"]] == ["eval_strategy", "use_cpu"]
    quick = actions("file:///t.py", renames[:1], renames, None)
    assert [(a.kind, a.is_preferred) for a in quick] == [(lsp.CodeActionKind.QuickFix, True), (FIX_ALL, None)]


def test_an_env_findings_fix_survives_the_clis_json_into_a_preferred_quick_fix():
    """checkEnvironment runs the CLI and reads its JSON: the rename of a removed keyword
    reaches the editor as a preferred quick fix whose edit is the CLI's own."""
    from trainproof_lsp.core.model import Edit, Finding, Fix, Level, Location, Outcome, Report, Artefact, Span, Verdict
    from trainproof_lsp.output.render import to_json
    from trainproof_lsp.server.commands import reports_from_json
    from trainproof_lsp.server.diagnostics import Presentation, to_diagnostic
    import json

    line = 'args = TrainingArguments(output_dir="out", evaluation_strategy="epoch")'
    start = line.index("evaluation_strategy")
    span = Span(2, start, 2, start + len("evaluation_strategy"))
    finding = Finding(id="TP-SCRIPT-API-UNKNOWN-KEYWORD", level=Level.FAIL, message="m", evidence={},
                      location=Location(path="/p/train.py", span=span),
                      fix=Fix(title="rename evaluation_strategy to eval_strategy",
                              edits=(Edit(span=span, new_text="eval_strategy"),), safe=True))
    report = Report(artefact=Artefact(path="/p/train.py", kind="env", format="import-probe"), verdict=Verdict.FAIL,
                    findings=(finding,), checks=())
    (back,) = reports_from_json(json.loads(to_json(Outcome(reports=(report,)))))
    assert back.findings[0].fix == finding.fix
    how = Presentation(encoding="utf-16", related_information=True, code_description=False,
                       docs_href=lambda rule_id: None, roots=lambda: ())
    d = to_diagnostic(back.findings[0], lambda path, n: line if n == 2 else None, how)
    (action,) = actions("file:///p/train.py", [d], [d], [lsp.CodeActionKind.QuickFix])
    assert action.is_preferred is True and action.title == "trainproof: rename evaluation_strategy to eval_strategy"
    (edit,) = action.edit.changes["file:///p/train.py"]
    assert (edit.range.start.line, edit.range.start.character, edit.range.end.character, edit.new_text) == (
        2, start, start + len("evaluation_strategy"), "eval_strategy")
