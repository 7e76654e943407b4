"""Chat templates rendered in a sandbox, for facts the tokenizer and dataset rules judge.

    render(template, messages, special=...)            -> str   (TemplateRejected, TemplateUnusable)
    assistant_end(template, special=..., markers=...)  -> AssistantEnd
    available()                                        -> bool  (jinja2 is installed)

A chat template is Jinja code from the tokenizer folder: untrusted input. It is rendered
the way transformers renders it (`apply_chat_template`: trim_blocks, lstrip_blocks, a
`raise_exception` function, the special tokens as variables) but only in jinja2's
`ImmutableSandboxedEnvironment`, with no loader (no `{% include %}`, no files), no
network, no access to Python internals, and within bounds of time and output size (the
limits below). jinja2 is the optional extra `trainproof-lsp[templates]` (it comes with
torch and transformers); without it the callers fall back to reading the template as
text, or say the check could not run.

Like a reader, this module produces facts, never verdicts.
"""

from __future__ import annotations

import functools
import re
import sys
import threading
import time
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, Mapping, Sequence

# Real chat templates are a few kilobytes (the longest common ones, with tool calling,
# are under 20k characters); a template far past that is not a chat template, and
# compiling it would cost more than the check is worth.
MAX_TEMPLATE_CHARS = 200_000
# A two-turn conversation renders to a few hundred characters with any real template;
# 200k characters in one value or in the output means a loop or a string blown up on
# purpose. (Rendering a dataset row raises both bounds to a few times the row's size.)
MAX_OUTPUT_CHARS = 200_000
# Characters a render may build in all (every `~`, `*`, filter and method result counted):
# real templates build a few times their output; this keeps a template that builds
# large values in a loop to some tens of megabytes before the time limit would stop it.
MAX_WORK_CHARS = 20_000_000
# Real templates render a short conversation in well under 10 ms; two seconds leaves room
# for a machine under load and still stops a template that loops.
MAX_SECONDS = 2.0
# Largest exponent allowed for `**` in a template: no template needs more, and
# 10 ** (10 ** 9) would run in C, beyond the time limit's reach.
MAX_EXPONENT = 64

MISSING_JINJA2 = "jinja2 is not installed (pip install 'trainproof-lsp[templates]')"

# The turns rendered to see how the template ends the assistant's turn: text that no
# template writes on its own, so finding it in the output is unambiguous.
USER_TEXT = "trainproof-user-turn-7d1f"
ASSISTANT_TEXT = "trainproof-assistant-turn-7d1f"


class TemplateUnavailable(Exception):
    """jinja2 is missing; the message says how to install it."""


class TemplateRejected(Exception):
    """The template refused the conversation (its `raise_exception`, or an error raised
    while rendering it); the message is the template's own words, on one line."""


class TemplateUnusable(Exception):
    """The template could not be rendered within the bounds, or does not compile."""


def available() -> bool:
    try:
        import jinja2.sandbox  # noqa: F401
    except ImportError:
        return False
    return True


def _one_line(e: BaseException, limit: int = 200) -> str:
    text = " ".join(str(e).split()) or type(e).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"


@lru_cache(maxsize=1)
def _environment() -> Any:
    """The sandbox, built once (jinja2 imported here, on first use)."""
    try:
        from jinja2.exceptions import SecurityError
        from jinja2.nodes import EvalContext
        from jinja2.runtime import Context
        from jinja2.sandbox import ImmutableSandboxedEnvironment
    except ImportError:
        raise TemplateUnavailable(MISSING_JINJA2) from None

    class Sandbox(ImmutableSandboxedEnvironment):
        # Route these operators through call_binop so a template cannot build a
        # gigabyte string or a huge integer in one C call the time limit cannot stop.
        intercepted_binops = frozenset({"*", "**", "+", "%"})
        # `joined` below: the compiled template's str.join (set on the instance)
        bounded_join: Callable[[Any], str]

        def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
            if operator == "**" and isinstance(right, int) and abs(right) > MAX_EXPONENT:
                raise SecurityError(f"exponent {right} is above {MAX_EXPONENT}")
            if operator == "*":
                for seq, n in ((left, right), (right, left)):
                    if isinstance(seq, (str, list, tuple)) and isinstance(n, int) and len(seq) * n > _bounds.value_chars:
                        raise SecurityError(f"a repetition of {len(seq) * n} items is above {_bounds.value_chars}")
            if operator == "+" and isinstance(left, (str, list)) and isinstance(right, (str, list)) \
                    and len(left) + len(right) > _bounds.value_chars:
                raise SecurityError(f"a value of {len(left) + len(right)} characters is above {_bounds.value_chars}")
            if operator == "%" and isinstance(left, str):
                widths = right if isinstance(right, tuple) else (right,)
                if re.search(r"%[-+ #0]*\d{7,}", left) or any(
                        isinstance(w, int) and w > _bounds.value_chars for w in widths):
                    raise SecurityError("a format width above the value bound")
            return _after(super().call_binop(context, operator, left, right))

        def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:
            # Methods reached from a template (`s.ljust(n)`, `s.replace(a, b)`, `s.format(...)`)
            # are checked before the call (a size argument, a widening format or
            # replacement) and their result after it.
            method = getattr(__obj, "__wrapped__", __obj)  # the sandbox wraps str.format
            _before(getattr(method, "__self__", None), getattr(method, "__name__", ""), args, kwargs)
            return _after(super().call(__context, __obj, *args, **kwargs))

    def _before(owner: Any, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        for a in (*args, *kwargs.values()):
            if isinstance(a, int) and not isinstance(a, bool) and a > _bounds.value_chars:
                raise SecurityError(f"a size argument {a} is above {_bounds.value_chars}")
        if not isinstance(owner, str):
            return
        if name == "format" and re.search(r"\d{7,}", owner):
            raise SecurityError("a format width above a million characters")
        if name == "replace" and len(args) >= 2 and isinstance(args[0], str) and isinstance(args[1], str):
            grown = len(owner) + (owner.count(args[0]) if args[0] else len(owner) + 1) * len(args[1])
            if grown > _bounds.value_chars:
                raise SecurityError(f"a replacement of up to {grown} characters is above {_bounds.value_chars}")
        if name == "expandtabs" and owner.count("\t") * (args[0] if args and isinstance(args[0], int) else 8) \
                > _bounds.value_chars:
            raise SecurityError(f"expanded tabs above {_bounds.value_chars} characters")

    def _after(result: Any) -> Any:
        if isinstance(result, (str, list, tuple)):
            if len(result) > _bounds.value_chars:
                raise SecurityError(f"a value of {len(result)} items is above {_bounds.value_chars}")
            _bounds.work_left -= len(result)
            if _bounds.work_left < 0:
                raise SecurityError("the template built more characters in all than its work bound")
        return result

    def joined(parts: Any) -> str:
        # `~`, and the bodies of macros and call blocks: joined only when the result fits.
        parts = [p if isinstance(p, str) else str(p) for p in parts]
        if sum(map(len, parts)) > _bounds.value_chars:
            raise SecurityError(f"a value above {_bounds.value_chars} characters")
        text = "".join(parts)
        _after(text)
        return text

    from jinja2.ext import Extension

    class Generation(Extension):
        """`{% generation %}...{% endgeneration %}` (transformers marks the assistant's
        trained tokens with it): rendered as its body."""

        tags = {"generation"}

        def parse(self, parser: Any) -> Any:
            next(parser.stream)
            return parser.parse_statements(("name:endgeneration",), drop_needle=True)

    # As transformers renders templates: loop controls ({% break %}) and the generation tag.
    env = Sandbox(trim_blocks=True, lstrip_blocks=True, loader=None, autoescape=False,
                  extensions=["jinja2.ext.loopcontrols", Generation])
    env.concat = joined  # type: ignore[method-assign]
    env.bounded_join = joined  # read by _compile

    def raise_exception(message: Any = "") -> None:
        raise TemplateRejected(str(message))

    def strftime_now(fmt: str) -> str:
        # Templates put "today" in system prompts; a fixed date keeps reports deterministic.
        import datetime

        return datetime.datetime(2024, 1, 1).strftime(str(fmt)[:100])

    def tojson(value: Any, indent: Any = None, **_: Any) -> str:
        import json

        # An indent is a few spaces; a large one would multiply the output by itself.
        width = indent if isinstance(indent, int) and 0 <= indent <= 16 else None
        return json.dumps(value, ensure_ascii=False, indent=width, sort_keys=False, default=str)

    def guarded(name: str, original: Any) -> Any:
        @functools.wraps(original)  # keeps jinja's pass_context/pass_eval_context marks
        def filt(*args: Any, **kwargs: Any) -> Any:
            values = [a for a in args if not isinstance(a, (EvalContext, Context))]
            owner = values[0] if values else None
            _before(owner, name, tuple(values[1:]), kwargs)
            return _after(original(*args, **kwargs))
        return filt

    env.globals.update(raise_exception=raise_exception, strftime_now=strftime_now)
    env.filters["tojson"] = tojson
    env.filters.update({name: guarded(name, f) for name, f in env.filters.items()})
    return env


@lru_cache(maxsize=16)
def _compile(template: str) -> Any:
    if len(template) > MAX_TEMPLATE_CHARS:
        raise TemplateUnusable(f"the chat template is {len(template)} characters (limit {MAX_TEMPLATE_CHARS})")
    env = _environment()
    from jinja2 import TemplateError

    try:
        compiled = env.from_string(template)
    except TemplateError as e:
        raise TemplateUnusable(f"the chat template does not compile ({_one_line(e)})") from None
    except (RecursionError, SyntaxError, MemoryError):
        # Python's own compiler limits (e.g. "too many statically nested blocks")
        raise TemplateUnusable("the chat template nests too deeply to compile") from None
    # `~` compiles to a call of the module-level `str_join` of the template's code: bound it.
    compiled.root_render_func.__globals__["str_join"] = env.bounded_join
    return compiled


class _OutOfTime(Exception):
    pass


class _Bounds(threading.local):
    """The bounds of the render running on this thread (the sandbox is shared)."""

    value_chars = MAX_OUTPUT_CHARS
    work_left = MAX_WORK_CHARS


_bounds = _Bounds()


def render(template: str, messages: Sequence[Mapping[str, Any]], *, special: Mapping[str, str | None],
           add_generation_prompt: bool = False) -> str:
    """The template rendered on `messages`, the way `apply_chat_template(tokenize=False)`
    renders it. TemplateRejected when the template raises on the conversation;
    TemplateUnusable when it does not compile or exceeds the bounds; TemplateUnavailable
    without jinja2."""
    compiled = _compile(template)
    from jinja2.exceptions import SecurityError, TemplateError

    given = sum(len(v) for m in messages for v in m.values() if isinstance(v, str))
    _bounds.value_chars = max(MAX_OUTPUT_CHARS, 4 * given)
    _bounds.work_left = max(MAX_WORK_CHARS, 50 * given)

    variables: dict[str, Any] = {k: v for k, v in special.items() if v is not None}
    variables.update(messages=[dict(m) for m in messages], add_generation_prompt=add_generation_prompt)
    deadline = time.monotonic() + MAX_SECONDS

    # Jinja compiles a template to Python code whose frames carry the file name
    # "<template>": a line-level trace on those frames (and only those) stops a template
    # that loops without writing anything, which an output-size bound alone would not.
    def local(frame: Any, event: str, arg: Any) -> Any:
        if time.monotonic() > deadline:
            raise _OutOfTime()
        return local

    def calls(frame: Any, event: str, arg: Any) -> Any:
        return local if frame.f_code.co_filename == "<template>" else None

    previous = sys.gettrace()
    sys.settrace(calls)
    out: list[str] = []
    size = 0
    try:
        for chunk in compiled.generate(**variables):
            size += len(chunk)
            if size > _bounds.value_chars:
                raise TemplateUnusable(f"the chat template wrote more than {_bounds.value_chars} characters")
            out.append(chunk)
    except _OutOfTime:
        raise TemplateUnusable(f"the chat template did not finish rendering within {MAX_SECONDS:g} s") from None
    except (TemplateRejected, TemplateUnusable):
        raise
    except SecurityError as e:
        raise TemplateUnusable(f"the sandbox stopped the chat template ({_one_line(e)})") from None
    except TemplateError as e:
        raise TemplateRejected(_one_line(e)) from None
    except RecursionError:
        raise TemplateUnusable("the chat template recursed too deeply") from None
    except MemoryError:
        raise TemplateUnusable("the chat template ran out of memory") from None
    except Exception as e:  # the template's own code failed on the conversation (a KeyError, a TypeError...)
        raise TemplateRejected(f"{type(e).__name__}: {_one_line(e)}") from None
    finally:
        sys.settrace(previous)
    return "".join(out)


@dataclass(frozen=True, kw_only=True)
class AssistantEnd:
    """What the template writes after the assistant's content in a user/assistant
    exchange (the rest of the output: the assistant turn is the last one)."""

    tail: str
    marker: str | None  # the first stop marker found in the tail, if any
    system: bool  # a system turn had to come first for the template to render


def assistant_end(template: str, *, special: Mapping[str, str | None], markers: Sequence[str]) -> AssistantEnd:
    """Render a user/assistant exchange (with a system turn first when the template
    insists on one) and return what follows the assistant's content. TemplateRejected /
    TemplateUnusable / TemplateUnavailable when it cannot be rendered, TemplateUnusable
    when the output does not hold the assistant's content."""
    turns = [{"role": "user", "content": USER_TEXT}, {"role": "assistant", "content": ASSISTANT_TEXT}]
    system = False
    try:
        text = render(template, turns, special=special)
    except TemplateRejected as first:
        system = True
        try:
            text = render(template, [{"role": "system", "content": "trainproof-system-turn-7d1f"}, *turns],
                          special=special)
        except TemplateRejected:
            raise first from None
    at = text.rfind(ASSISTANT_TEXT)
    if at < 0:
        raise TemplateUnusable("the rendered conversation does not contain the assistant's content")
    tail = text[at + len(ASSISTANT_TEXT):]
    found = sorted((tail.find(m), m) for m in markers if m and m in tail)
    return AssistantEnd(tail=tail, marker=found[0][1] if found else None, system=system)


__all__ = ["render", "assistant_end", "available", "AssistantEnd", "TemplateRejected", "TemplateUnusable",
           "TemplateUnavailable", "MISSING_JINJA2", "MAX_OUTPUT_CHARS", "MAX_SECONDS"]
