"""Quick fixes (textDocument/codeAction) from the fixes the rules attach to findings.

A finding with a mechanical fix (core.model.Fix: rename a removed keyword, fp16 -> bf16,
save_steps at eval_steps, ...) carries it in its diagnostic's `data["fix"]`, its edits
already in the client's ranges (to_fix_data, called where the diagnostic is made). A code
action is that fix as a WorkspaceEdit, preferred when the fix is safe; `source.fixAll.trainproof`
applies every safe fix of the document at once. The server computes nothing here: the
diagnostics the client holds are the whole truth, so a fix never outlives its finding.
"""

from __future__ import annotations

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
    everything: list[lsp.Diagnostic] = list(params.context.diagnostics)
    only = [str(k.value if hasattr(k, "value") else k) for k in (params.context.only or [])]
    if not only or any(FIX_ALL.startswith(k) for k in only):
        result = await tp.analyzer.current(uri) if uri in tp.documents else None
        held = (result.diagnostics if result is not None else []) + list(tp.extras.get(uri, []))
        seen = {(_key(d.range), str(d.code)) for d in everything}
        everything += [d for d in held if (_key(d.range), str(d.code)) not in seen]
    return actions(uri, params.context.diagnostics, everything, only or None) or None
