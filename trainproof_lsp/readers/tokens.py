"""Token lengths of dataset rows, counted with the run's own tokenizer (transformers).

    load_tokenizer(folder)                                        -> tokenizer
    count_tokens(path, tokenizer, lines=..., layout=..., data=...) -> TokenLengths
    render_rows(path, template, special, lines, layout=...)        -> TemplateRendered (no transformers:
                                                                      the chat template in the jinja2 sandbox)

The optional part of preflight (`preflight DATA --tokenizer DIR --max-len N`, extra
`trainproof-lsp[tokens]`). `transformers` is imported here, lazily, only when token counts
are asked for; nothing else in the package imports this module's heavy half. The tokenizer
is loaded from the folder's own files (`local_files_only`) and never runs code shipped in
the folder (`trust_remote_code=False`).

Like a reader, this module produces facts, never verdicts: per line of the file, how many
tokens the row is and how many of them come before the first token a trainer trains on.
rules/tokens.py compares them with `--max-len`.

What is counted per row — the tokens a trainer feeds the model, before truncation:

    text               tokenizer(text), with the special tokens the tokenizer adds itself (BOS...)
    prompt-completion  tokenizer(prompt + completion)           prompt part: tokenizer(prompt)
    chat / sharegpt    the chat template rendered, then tokenized without added special
                       tokens (exactly what apply_chat_template(tokenize=True) does)
                                                                prompt part: the turns before the
                                                                first assistant turn, rendered with
                                                                the generation prompt
    alpaca             instruction, input, output joined by newlines
                                                                prompt part: instruction + input
    preference         prompt + chosen and prompt + rejected    prompt part: the prompt (implicit:
                                                                the turns chosen and rejected share)

Conversations are rendered with transformers' own chat-template function, but in a
child process under CPU-time and memory limits (chat_template.Renderer, one child per
file), never in this process: apply_chat_template renders with no bound at all, and the
template is the tokenizer folder's, untrusted. A template past a limit raises
chat_template.TemplateUnusable: the file's tokens are then not counted, never guessed.

Message-list values of prompt/completion and preference rows are rendered like chat rows
(a string prompt beside them is one user turn). Without a chat template, conversations
count as their contents joined by newlines. Rows that cannot be read in their format
(non-string fields, content given as parts, bad JSON, unknown ShareGPT names) are not
counted: the dataset rules report them.

Rows are streamed from the file and tokenized in batches; per line the result is kept in
`array('i')`s (12 bytes a line), so memory stays flat in the number of rows.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from . import dataset as ds

# Rows per tokenizer call. Fast tokenizers encode a batch in parallel in Rust; a few
# hundred rows amortise the per-call cost while one batch's rendered texts stay small.
BATCH_ROWS = 512

NOT_COUNTED = -1  # in the per-line arrays: no row on the line, or the row was not counted

MISSING_TRANSFORMERS = ("token-length checks need the optional transformers package "
                        "(pip install 'trainproof-lsp[tokens]')")


class TokenizerUnavailable(Exception):
    """The tokenizer cannot be used for counting; the message is one line and says why."""


@dataclass(frozen=True, kw_only=True)
class TemplateError:
    """A row the tokenizer's chat template raised on."""

    line: int
    message: str


@dataclass(frozen=True, kw_only=True)
class TokenLengths:
    """Token counts of one dataset file, by line (0-based); NOT_COUNTED where no row was
    counted. `tokens` is the whole row (for a preference pair: prompt + chosen),
    `second` the other side of a pair (prompt + rejected), `prompt` the tokens before
    the first trained token (formats without a prompt part: NOT_COUNTED)."""

    path: str
    tokenizer: str  # the folder the tokenizer was loaded from
    rows: int  # rows counted
    templated: bool  # conversations were rendered with the tokenizer's chat template
    tokens: array[int]
    second: array[int]
    prompt: array[int]
    template_errors: tuple[TemplateError, ...] = ()
    # From the token map (readers/token_map.py): tokens each row trains on after masking
    # and truncation (NOT_COUNTED: not mapped, or judged by another rule); None when the
    # counts came without a map. TP-PRE-NO-TRAINABLE-TOKENS then reads it instead of
    # comparing the prompt part with --max-len.
    trained: array[int] | None = None
    before: array[int] | None = None  # trained tokens before truncation, likewise
    cause: str = ""  # why rows train on nothing, when the map knows (e.g. no generation blocks)
    # The map itself (readers/token_map.TokenMap), for rules/token_map.py; typed Any here
    # because token_map.py builds on this module (no import cycle).
    token_map: Any = None


def load_tokenizer(folder: Path | str) -> Any:
    """The folder's tokenizer via transformers.AutoTokenizer, from local files only.

    Raises TokenizerUnavailable when transformers is not installed or cannot load it."""
    path = Path(folder)
    if not path.is_dir():
        # A name that is not a folder would be looked up on the Hub: never.
        raise TokenizerUnavailable(f"{path}: not a tokenizer folder")
    try:
        from transformers import AutoTokenizer
    except ImportError:
        raise TokenizerUnavailable(MISSING_TRANSFORMERS) from None
    except Exception as e:  # a broken install (e.g. a torch it cannot load) is not a dataset fault
        raise TokenizerUnavailable(f"transformers cannot be imported ({type(e).__name__}: {_one_line(e)})") from None
    try:
        return AutoTokenizer.from_pretrained(str(path), local_files_only=True, trust_remote_code=False)
    except Exception as e:  # OSError, ValueError, KeyError, tokenizers' own errors...: one line, no traceback
        raise TokenizerUnavailable(f"{path}: transformers cannot load this tokenizer "
                                   f"({type(e).__name__}: {_one_line(e)})") from None


def _one_line(e: BaseException, limit: int = 200) -> str:
    text = " ".join(str(e).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


# --- rows with their lines ---------------------------------------------------------------

# --- what to tokenize for one row ------------------------------------------------------

TOTAL, SECOND, PROMPT = 0, 1, 2  # which count a text is for


@dataclass(frozen=True, slots=True)
class _Chat:
    messages: list[dict[str, Any]]
    generation_prompt: bool = False  # the prompt part: end with the assistant's header


Piece = str | _Chat


def _messages(value: Any, sharegpt: bool = False) -> list[dict[str, Any]] | None:
    """A message list normalised to {"role", "content"} with string contents; None when a
    turn cannot be rendered as text (the dataset rules say why). Turns without content
    (an assistant turn that only calls tools) keep their other keys for the template."""
    if not isinstance(value, list) or not value:
        return None
    out = []
    rk, ck = ("from", "value") if sharegpt else ("role", "content")
    for m in value:
        if not isinstance(m, dict):
            return None
        role, content = m.get(rk), m.get(ck)
        if sharegpt:
            role = ds.SHAREGPT_ROLES.get(role) if isinstance(role, str) else None
        if not isinstance(role, str) or not (content is None or isinstance(content, str)):
            return None
        out.append({**({} if sharegpt else m), "role": role, "content": content})
    return out


def _as_messages(value: Any, role: str) -> list[dict[str, Any]] | None:
    """A pair's part as messages: a string is one turn of `role`."""
    if isinstance(value, str):
        return [{"role": role, "content": value}]
    return _messages(value)


def _first_assistant(messages: Sequence[dict[str, Any]]) -> int | None:
    return next((i for i, m in enumerate(messages) if m["role"] == "assistant"), None)


def _shared_prefix(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> list[dict[str, Any]]:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return a[:n]


def _chat_pieces(full: list[dict[str, Any]], prompt: list[dict[str, Any]] | None) -> list[tuple[int, Piece]]:
    pieces: list[tuple[int, Piece]] = [(TOTAL, _Chat(full))]
    if prompt:
        pieces.append((PROMPT, _Chat(prompt, True)))
    return pieces


def row_pieces(obj: dict[str, Any]) -> list[tuple[int, Piece]] | None:
    """The texts (or conversations) whose token counts make a row's facts; None when the
    row cannot be counted."""
    fmt = ds.classify(obj)
    if fmt == ds.TEXT:
        text = obj.get("text")
        return [(TOTAL, text)] if isinstance(text, str) else None
    if fmt in ds.CONVERSATIONAL:
        msgs = _messages(obj.get("messages" if fmt == ds.CHAT else "conversations"), fmt == ds.SHAREGPT)
        if msgs is None:
            return None
        k = _first_assistant(msgs)
        return _chat_pieces(msgs, msgs[:k] if k else None)
    if fmt == ds.ALPACA:
        parts = [obj.get("instruction"), obj.get("input") or "", obj.get("output")]  # `input` is optional
        if not all(isinstance(p, str) for p in parts):
            return None
        prompt = "\n".join(p for p in parts[:2] if p)
        total: list[tuple[int, Piece]] = [(TOTAL, "\n".join(p for p in parts if p))]
        return total + [(PROMPT, prompt)] if prompt else total
    if fmt == ds.PROMPT_COMPLETION:
        return _pair_pieces(obj.get("prompt"), (obj.get("completion"),))
    if fmt == ds.PREFERENCE:
        return _pair_pieces(obj.get("prompt"), (obj.get("chosen"), obj.get("rejected")))
    return None


def _pair_pieces(prompt: Any, answers: tuple[Any, ...]) -> list[tuple[int, Piece]] | None:
    """prompt + each answer (TOTAL, then SECOND) and the prompt part."""
    slots = (TOTAL, SECOND)
    if all(isinstance(v, str) for v in answers) and (prompt is None or isinstance(prompt, str)):
        p = prompt or ""
        pieces: list[tuple[int, Piece]] = [(s, p + a) for s, a in zip(slots, answers)]
        return pieces + [(PROMPT, p)] if p else pieces
    maybe = [_as_messages(a, "assistant") for a in answers]
    convs = [c for c in maybe if c is not None]
    if len(convs) != len(maybe):
        return None
    if prompt is None:
        # An implicit prompt (TRL): the turns the answers share; the answers are whole conversations.
        head = _shared_prefix(convs[0], convs[-1]) if len(convs) > 1 else []
        pieces = [(s, _Chat(c)) for s, c in zip(slots, convs)]
        return pieces + [(PROMPT, _Chat(head, True))] if head else pieces
    head_or_none = _as_messages(prompt, "user")
    if head_or_none is None:
        return None
    head = head_or_none
    pieces = [(s, _Chat(head + c)) for s, c in zip(slots, convs)]
    return pieces + [(PROMPT, _Chat(head, True))]


# --- counting --------------------------------------------------------------------------


class _Batch:
    """Pieces of up to BATCH_ROWS rows, counted together."""

    def __init__(self, tok: Any, out: tuple[array[int], array[int], array[int]]) -> None:
        self.tok = tok
        self.out = out
        self.templated = bool(getattr(tok, "chat_template", None))
        self.items: list[tuple[int, int, Piece]] = []  # (line, slot, piece)
        self.rows: list[int] = []
        self.errors: list[TemplateError] = []
        self.renderer: Any = None  # chat_template.Renderer, started on the first conversation

    def add(self, line: int, pieces: list[tuple[int, Piece]]) -> None:
        self.rows.append(line)
        self.items.extend((line, slot, piece) for slot, piece in pieces)

    def flush(self) -> None:
        plain: list[tuple[int, int, str]] = []  # tokenized with the tokenizer's own special tokens
        chats: list[tuple[int, int, _Chat]] = []
        for line, slot, piece in self.items:
            if isinstance(piece, str):
                plain.append((line, slot, piece))
            elif self.templated:
                chats.append((line, slot, piece))
            else:
                plain.append((line, slot, "\n".join(m["content"] for m in piece.messages if m["content"])))
        failed: dict[int, str] = {}
        rendered = self._render(chats, failed)
        self._count(plain, True)
        # The rendered template carries its own special tokens: tokenized without adding any.
        self._count([(line, slot, text) for line, slot, text in rendered if line not in failed], False)
        for line, message in sorted(failed.items()):
            for counts in self.out:
                counts[line] = NOT_COUNTED
            self.errors.append(TemplateError(line=line, message=message))
        self.items.clear()
        self.rows.clear()

    def _render(self, chats: list[tuple[int, int, _Chat]], failed: dict[int, str]) -> list[tuple[int, int, str]]:
        """The conversations rendered with transformers' own chat-template function, in the
        bounded child (chat_template.Renderer, mode "transformers"), never in this process:
        apply_chat_template renders in-process with no time or memory bound. A row the
        template raises on is a failed row; a template past a limit raises TemplateUnusable."""
        if not chats:
            return []
        renderer = self._renderer()
        results = renderer.render_many((c.messages, c.generation_prompt) for _, _, c in chats)
        out: list[tuple[int, int, str]] = []
        for (line, slot, _), result in zip(chats, results):
            if isinstance(result, str):
                out.append((line, slot, result))
            else:  # worded as transformers raised it ("TemplateError: ...")
                failed.setdefault(line, str(result))
                out.append((line, slot, ""))
        return out

    def _renderer(self) -> Any:
        if self.renderer is None:
            from . import chat_template as ct

            template = _template_of(self.tok)
            variables = _plain(getattr(self.tok, "special_tokens_map", {}) or {})
            self.renderer = ct.Renderer(template, variables=variables, mode="transformers")
        return self.renderer

    def close(self) -> None:
        if self.renderer is not None:
            self.renderer.close()

    def _count(self, items: list[tuple[int, int, str]], special: bool) -> None:
        if not items:
            return
        ids = self.tok([t for _, _, t in items], add_special_tokens=special, return_attention_mask=False,
                       return_token_type_ids=False, verbose=False)["input_ids"]
        for (line, slot, _), row in zip(items, ids):
            self.out[slot][line] = len(row)


def _template_of(tok: Any) -> str:
    """The template apply_chat_template would use (the default of several named ones)."""
    pick = getattr(tok, "get_chat_template", None)
    template = pick() if callable(pick) else getattr(tok, "chat_template", None)
    return template if isinstance(template, str) else ""


def _plain(value: Any) -> Any:
    """Special tokens as JSON for the render child (AddedToken objects as their text)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value if value is None or isinstance(value, (str, int, float, bool)) else str(value)


def count_tokens(path: Path | str, tok: Any, *, lines: int, layout: str = "jsonl", data: bytes | None = None,
                 tokenizer_name: str = "") -> TokenLengths:
    """Stream the file's rows and count their tokens with `tok` (a transformers tokenizer),
    BATCH_ROWS rows per tokenizer call; conversations are rendered in one bounded child
    for the whole file (chat_template.Renderer). `lines` is the file's line count (the
    scan's). Raises chat_template.TemplateUnusable when the template cannot be rendered
    within the child's limits (the counts would be a guess: not counted at all)."""
    blank = array("i", [NOT_COUNTED]) * lines
    out = (blank, array("i", blank), array("i", blank))
    batch = _Batch(tok, out)
    rows = 0
    try:
        for line, obj in ds.iter_records(path, layout=layout, data=data):
            pieces = row_pieces(obj)
            if pieces is None or line >= lines:
                continue
            batch.add(line, pieces)
            rows += 1
            if len(batch.rows) >= BATCH_ROWS:
                batch.flush()
        batch.flush()
    finally:
        batch.close()
    return TokenLengths(path=str(path), tokenizer=tokenizer_name, rows=rows - len(batch.errors),
                        templated=batch.templated, tokens=out[TOTAL], second=out[SECOND], prompt=out[PROMPT],
                        template_errors=tuple(batch.errors))


# --- rows rendered in the sandbox (no transformers) --------------------------------------

# Distinct role sequences rendered per file. A template's refusal of a row that does not
# alternate depends on its roles, not its words, so one render per sequence decides every
# row with it; real datasets have a handful of sequences, 256 bounds a hostile file.
MAX_ROLE_SEQUENCES = 256


@dataclass(frozen=True, kw_only=True)
class TemplateRendered:
    """Rows of one file rendered with a chat template in the sandbox (chat_template.py),
    and those it refused; TP-PRE-CHAT-TEMPLATE-ERROR reads `template_errors`."""

    path: str
    rendered: int  # distinct role sequences rendered
    template_errors: tuple[TemplateError, ...] = ()
    note: str = ""  # why some rows were not rendered (sequence cap, template unusable)


def render_rows(path: Path | str, template: str, special: dict[str, str | None], wanted: Sequence[int], *,
                layout: str = "jsonl", data: bytes | None = None) -> TemplateRendered:
    """Render the rows on the `wanted` lines (0-based) with `template` in the jinja2
    sandbox, one render per distinct role sequence, all in one bounded child process.
    Raises chat_template.TemplateUnavailable without jinja2."""
    from . import chat_template as ct

    lines = set(wanted)
    last = max(lines, default=-1)
    verdicts: dict[tuple[str, ...], str | None] = {}
    errors: list[TemplateError] = []
    note = ""
    if not ct.available():
        raise ct.TemplateUnavailable(ct.MISSING_JINJA2)
    with ct.Renderer(template, variables=special) as renderer:  # one child for the file
        for line, obj in ds.iter_records(path, layout=layout, data=data):
            if line > last:
                break
            if line not in lines:
                continue
            for which, piece in row_pieces(obj) or ():
                if not isinstance(piece, _Chat) or which == PROMPT:
                    continue
                roles = tuple(m["role"] for m in piece.messages)
                if roles not in verdicts:
                    if len(verdicts) >= MAX_ROLE_SEQUENCES:
                        note = f"rows with more than {MAX_ROLE_SEQUENCES} distinct role sequences: the rest not rendered"
                        continue
                    try:
                        renderer.render(piece.messages)
                        verdicts[roles] = None
                    except ct.TemplateRejected as e:
                        verdicts[roles] = str(e)
                    except ct.TemplateUnusable as e:
                        return TemplateRendered(path=str(path), rendered=len(verdicts), template_errors=tuple(errors),
                                                note=str(e))
                if verdicts.get(roles):
                    errors.append(TemplateError(line=line, message=verdicts[roles] or ""))
                    break
    return TemplateRendered(path=str(path), rendered=len(verdicts), template_errors=tuple(errors), note=note)


__all__ = ["TokenLengths", "TemplateError", "TemplateRendered", "render_rows", "TokenizerUnavailable", "load_tokenizer", "count_tokens",
           "row_pieces", "NOT_COUNTED", "MISSING_TRANSFORMERS", "BATCH_ROWS"]
