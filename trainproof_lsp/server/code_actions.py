"""Quick fixes (textDocument/codeAction) from the fixes the rules attach to findings.

A finding with a mechanical fix (core.model.Fix: rename a removed keyword, fp16 -> bf16,
save_steps at eval_steps, ...) carries it in its diagnostic's `data["fix"]`, its edits
already in the client's ranges (to_fix_data, called where the diagnostic is made). A code
action is that fix as a WorkspaceEdit, preferred when the fix is safe; `source.fixAll.trainproof`
applies every safe fix of the document at once. The server computes nothing here: the
diagnostics the client holds are the whole truth, so a fix never outlives its finding.

Two dataset fixes need the rows' text, which the dataset rules never see: "drop the
duplicate of line N" is made here from the buffer's lines when the client asks (preferred
and in the fix-all only when the two lines are the same characters), and the field
mapping of a dataset in its own shape is an edit of the settings file the judge reads
(pyproject.toml), never preferred. judge/dataset_fixes.py makes both, as the CLI does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Sequence

from lsprotocol import types as lsp

from ..core.model import Fix, Span

FIX_ALL = "source.fixAll.trainproof"
KINDS = [lsp.CodeActionKind.QuickFix, FIX_ALL]

# (path, span) -> the client's range for it (diagnostics.lsp_range with the server's state)
RangeOf = Callable[[str, Span], lsp.Range]


def to_fix_data(fix: Fix, path: str, range_of: RangeOf) -> dict[str, Any]:
    """A finding's fix as it travels in a diagnostic's data: ranges in client units."""
    edits = []
    for e in fix.edits:
        r = range_of(path, e.span)
        edits.append({"range": {"start": {"line": r.start.line, "character": r.start.character},
                                "end": {"line": r.end.line, "character": r.end.character}},
                      "newText": e.new_text})
    return {"title": fix.title, "safe": fix.safe, "edits": edits}


def _fix_of(d: lsp.Diagnostic) -> dict[str, Any] | None:
    data = d.data if isinstance(d.data, dict) else None
    fix = data.get("fix") if data else None
    if not isinstance(fix, dict) or not isinstance(fix.get("edits"), list) or not fix["edits"]:
        return None
    return fix


def _text_edits(fix: dict[str, Any]) -> list[lsp.TextEdit] | None:
    out = []
    try:
        for e in fix["edits"]:
            r = e["range"]
            out.append(lsp.TextEdit(range=lsp.Range(
                start=lsp.Position(line=int(r["start"]["line"]), character=int(r["start"]["character"])),
                end=lsp.Position(line=int(r["end"]["line"]), character=int(r["end"]["character"]))),
                new_text=str(e["newText"])))
    except (KeyError, TypeError, ValueError):  # a client that mangled the data: no action
        return None
    return out


def _key(r: lsp.Range) -> tuple[int, int, int, int]:
    return (r.start.line, r.start.character, r.end.line, r.end.character)


def actions(uri: str, asked: Sequence[lsp.Diagnostic], everything: Sequence[lsp.Diagnostic],
            only: Sequence[str] | None) -> list[lsp.CodeAction]:
    """The quick fixes of the diagnostics `asked` about, and the fix-all of `everything`
    the document has (when the client asks for that kind, or for any)."""
    out: list[lsp.CodeAction] = []
    want_quick = not only or any(lsp.CodeActionKind.QuickFix.value.startswith(k) or k == "quickfix" for k in only)
    want_all = not only or any(FIX_ALL.startswith(k) for k in only)
    if want_quick:
        for d in asked:
            fix = _fix_of(d)
            edits = _text_edits(fix) if fix else None
            if fix is None or not edits:
                continue
            out.append(lsp.CodeAction(title=f"trainproof: {fix.get('title', 'fix')}", kind=lsp.CodeActionKind.QuickFix,
                                      diagnostics=[d], is_preferred=bool(fix.get("safe")),
                                      edit=lsp.WorkspaceEdit(changes={uri: edits})))
    if want_all:
        merged: list[lsp.TextEdit] = []
        fixed: list[lsp.Diagnostic] = []
        for d in everything:
            fix = _fix_of(d)
            edits = _text_edits(fix) if fix and fix.get("safe") else None
            if not edits:
                continue
            # edits that overlap one already taken are left for a second pass
            if any(not (_key(e.range)[2:] <= _key(m.range)[:2] or _key(m.range)[2:] <= _key(e.range)[:2])
                   for e in edits for m in merged):
                continue
            merged.extend(edits)
            fixed.append(d)
        if merged:
            merged.sort(key=lambda e: _key(e.range))
            out.append(lsp.CodeAction(title=f"trainproof: apply {len(fixed)} safe fix(es)", kind=FIX_ALL,
                                      diagnostics=fixed, edit=lsp.WorkspaceEdit(changes={uri: merged})))
    return out


async def code_action(ls: Any, params: lsp.CodeActionParams) -> list[lsp.CodeAction] | None:
    """textDocument/codeAction: the fixes of the diagnostics in the request's context; for
    the fix-all, every diagnostic the server holds for the document."""
    tp = ls.tp
    uri = params.text_document.uri
    asked: list[lsp.Diagnostic] = list(params.context.diagnostics)
    everything: list[lsp.Diagnostic] = list(asked)
    only = [str(k.value if hasattr(k, "value") else k) for k in (params.context.only or [])]
    if not only or any(FIX_ALL.startswith(k) for k in only):
        result = await tp.analyzer.current(uri) if uri in tp.documents else None
        held = (result.diagnostics if result is not None else []) + list(tp.extras.get(uri, []))
        seen = {(_key(d.range), str(d.code)) for d in everything}
        everything += [d for d in held if (_key(d.range), str(d.code)) not in seen]
    extra: list[lsp.CodeAction] = []
    doc = tp.documents.get(uri)
    if doc is not None and _jsonl(doc):
        asked = [_with_duplicate_fix(tp, doc, d) for d in asked]
        everything = [_with_duplicate_fix(tp, doc, d) for d in everything]
        if not only or any(lsp.CodeActionKind.QuickFix.value.startswith(k) for k in only):
            for d in asked:
                action = await _field_action(ls, doc, d)
                if action is not None:
                    extra.append(action)
    return actions(uri, asked, everything, only or None) + extra or None


# --- dataset fixes, made from the buffer (judge/dataset_fixes.py) -------------------------------

_DUPLICATES = ("TP-PRE-DUPLICATE-TEXT", "TP-PRE-NEAR-DUPLICATE")


def _client_range(span: Span, line_of: Callable[[int], "str | None"], encoding: str) -> lsp.Range:
    """A span (code-point columns) in the client's units; a line `line_of` does not give
    has the same columns in every unit (diagnostics.lsp_range does the same for findings)."""
    from ..core.positions import client_column

    def at(line: int, char: int) -> lsp.Position:
        text = line_of(line)
        return lsp.Position(line=line, character=char if text is None else client_column(text, char, encoding))

    return lsp.Range(start=at(span.start_line, span.start_char), end=at(span.end_line, span.end_char))


def _jsonl(doc: Any) -> bool:
    """A JSON Lines buffer: a JSON array's rows are not lines, so no line is dropped from it."""
    return not doc.head(4096).lstrip("\ufeff \t\r\n").startswith("[")


def _evidence(d: lsp.Diagnostic) -> dict[str, Any]:
    data = d.data if isinstance(d.data, dict) else {}
    evidence = data.get("evidence")
    return evidence if isinstance(evidence, dict) else {}


def _line_no(value: Any) -> int | None:
    return value - 1 if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else None


def _with_duplicate_fix(tp: Any, doc: Any, d: lsp.Diagnostic) -> lsp.Diagnostic:
    """A duplicate-row diagnostic with its fix in its data, made from the buffer's lines."""
    if str(d.code) not in _DUPLICATES or _fix_of(d) is not None:
        return d
    from ..judge.dataset_fixes import duplicate_fix

    evidence = _evidence(d)
    line, first = _line_no(evidence.get("line")), _line_no(evidence.get("first_line"))
    if line is None or first is None:
        return d
    count = doc.line_count()
    fix = duplicate_fix(str(d.code), line, first, lambda i: doc.line(i) if 0 <= i < count else None)
    if fix is None:
        return d
    encoding = tp.presentation.encoding
    data = {**(d.data if isinstance(d.data, dict) else {}),
            "fix": to_fix_data(fix, str(doc.path), lambda p, sp: _client_range(sp, doc.line, encoding))}
    return lsp.Diagnostic(range=d.range, message=d.message, severity=d.severity, code=d.code, source=d.source,
                          code_description=d.code_description, tags=d.tags,
                          related_information=d.related_information, data=data)


async def _field_action(ls: Any, doc: Any, d: lsp.Diagnostic) -> lsp.CodeAction | None:
    """The field mapping of a whole-file missing-keys finding, written into the settings
    file the judge reads (an edit of that file; never preferred: it changes how every row
    is read)."""
    import asyncio

    from ..judge.dataset_fixes import MISSING_KEYS, SAMPLE_ROWS, field_fix
    from .documents import path_to_uri, uri_to_path

    evidence = _evidence(d)
    line = _line_no(evidence.get("line"))
    if str(d.code) != MISSING_KEYS or line is None or evidence.get("rows") != evidence.get("records"):
        return None
    tp = ls.tp
    rows = [doc.line(i) for i in range(line, min(line + SAMPLE_ROWS, doc.line_count()))]
    config = await tp.configs.for_path(doc.path)
    workspace = ls.workspace  # its folders (watching.workspace_roots; imported here, it would make a cycle)
    roots = [uri_to_path(f.uri) for f in workspace.folders.values()] or \
        ([Path(workspace.root_path)] if workspace.root_path else [])
    made = await asyncio.to_thread(field_fix, rows, doc.path, config, tuple(roots))
    if made is None:
        return None
    target = path_to_uri(made.path)
    if made.exists:
        r = _client_range(made.span, lambda n: tp.line_text(str(made.path), n), tp.presentation.encoding)
        edit = lsp.WorkspaceEdit(changes={target: [lsp.TextEdit(range=r, new_text=made.new_text)]})
    else:  # a new settings file
        start = lsp.Position(line=0, character=0)
        edit = lsp.WorkspaceEdit(document_changes=[
            lsp.CreateFile(uri=target, options=lsp.CreateFileOptions(ignore_if_exists=True)),
            lsp.TextDocumentEdit(text_document=lsp.OptionalVersionedTextDocumentIdentifier(uri=target, version=None),
                                 edits=[lsp.TextEdit(range=lsp.Range(start=start, end=start),
                                                     new_text=made.new_text)])])
    return lsp.CodeAction(title=f"trainproof: {made.title}", kind=lsp.CodeActionKind.QuickFix, diagnostics=[d],
                          is_preferred=False, edit=edit)
