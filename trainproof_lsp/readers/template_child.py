"""The process that renders chat templates: jinja2's sandbox, inside CPU-time and memory limits.

A chat template is Jinja code from the tokenizer folder: untrusted input. Jinja's sandbox
keeps it away from Python internals and files, and the bounds below stop the templates
that loop or blow a string up in traced template code — but a template can also spend its
time in C or in jinja's own helpers, where no trace or size check reaches before the
result exists (`3**64**64**64**64**64`, `lipsum(100000)`, `'{:{w}}'.format(x,
w='999999999')`, `'%(a)999999999s' % d`). So rendering never happens in the language
server's or the command line's process: chat_template.py starts this file as a child

    python -I .../template_child.py          (working folder "/", nothing of the workspace
                                              on sys.path, stderr discarded)

which first lowers its own limits (RLIMIT_AS, a per-render RLIMIT_CPU, no core files, no
file writes), then speaks JSON, one object a line, over stdin/stdout:

    parent -> child   {"template": "...", "variables": {"bos_token": "<s>", ...},
                       "mode": "sandbox" | "transformers", "spans": false}
    child  -> parent  {"ok": true} | {"unusable": "why"} | {"unavailable": "why"}
    parent -> child   {"renders": [{"messages": [...], "add_generation_prompt": false}, ...]}
    child  -> parent  one line per render, in order:
                      {"text": "..."} | {"rejected": "the template's words"} | {"unusable": "why"}
                      (with "spans": true, in the sandbox: {"text": "...", "spans": [[start, end], ...]}
                      — the {% generation %} blocks' characters — or "spans": null when unknown)

A render past RLIMIT_CPU ends the process (SIGXCPU), one past RLIMIT_AS raises
MemoryError here; the parent also kills a child that does not answer within a wall-clock
timeout. Mode "transformers" renders with transformers' own `render_jinja_template` (what
`apply_chat_template` runs), for token counts that match the trainer's exactly; it falls
back to the sandbox when that function is not there.

This file imports only the standard library at the top (it runs with nothing of the
package importable) and jinja2/transformers in the child, on first use. The parent
imports it for the limits, the exceptions and, in benchmarks, the in-process render.
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
import signal
import sys
import threading
import time
from typing import Any, Callable, Mapping, Sequence

# --- the child's limits (read by chat_template.py: the one place for each number) -------

# Real templates render a two-turn conversation in well under 10 ms of CPU; 2 s leaves
# room for a slow machine and stops a template that spends its time in C (a big-integer
# power, lipsum) where the line trace below cannot reach. RLIMIT_CPU counts whole seconds:
# each render gets at least this much and less than one second more.
MAX_CPU_SECONDS = 2
# Address space of the whole child. The interpreter with jinja2 takes ~25 MiB (with
# transformers' chat-template module ~185 MiB); a real render needs a few MiB more. 512 MiB
# stops a gigabyte string built in one C call (a format width) with room to spare.
MAX_MEMORY_MIB = 512
# CPU seconds for the child's start-up (the interpreter, jinja2 or transformers' chat
# template module: ~0.1 s and ~1 s) before the first template is touched.
STARTUP_CPU_SECONDS = 20

# --- the sandbox's own bounds (in traced template code, they stop a template early with
# a precise reason; the limits above catch what they cannot) ------------------------------

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
# for a machine under load and still stops a template that loops in template code (with
# its own message, and without losing the child).
MAX_SECONDS = 2.0
# Largest exponent allowed for `**` in a template: no template needs more, and
# 10 ** (10 ** 9) would run in C, beyond the time limit's reach.
MAX_EXPONENT = 64

MISSING_JINJA2 = "jinja2 is not installed (pip install 'trainproof-lsp[templates]')"
OUT_OF_MEMORY = f"the chat template render exceeded {MAX_MEMORY_MIB} MiB memory"


class TemplateUnavailable(Exception):
    """jinja2 is missing; the message says how to install it."""


class TemplateRejected(Exception):
    """The template refused the conversation (its `raise_exception`, or an error raised
    while rendering it); the message is the template's own words, on one line."""


class TemplateUnusable(Exception):
    """The template could not be rendered within the bounds, or does not compile."""


def one_line(e: BaseException, limit: int = 200) -> str:
    text = " ".join(str(e).split()) or type(e).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"


def too_long(template: str) -> str | None:
    """Why the template is not even sent to a child, or None."""
    if len(template) > MAX_TEMPLATE_CHARS:
        return f"the chat template is {len(template)} characters (limit {MAX_TEMPLATE_CHARS})"
    return None


class _Bounds:
    """The bounds of the render running now (a child renders one thing at a time)."""

    value_chars = MAX_OUTPUT_CHARS
    work_left = MAX_WORK_CHARS
    mark_generation = False  # setup "spans": generation blocks are written between markers
    generation_blocks = 0  # blocks marked in the render running now


# Written around each {% generation %} body when the caller asks for the spans (setup
# "spans": true), then taken out: private-use characters no template or row writes by
# chance. A row that writes them itself makes more markers than blocks: no spans then.
GENERATION_OPEN = "\ue000tp-generation-open\ue000"
GENERATION_CLOSE = "\ue000tp-generation-close\ue000"


def generation_spans(text: str, blocks: int) -> tuple[str, list[list[int]] | None]:
    """The text without the markers, and the [start, end) character span of each
    generation block in it (None when the markers do not pair up with the blocks)."""
    if GENERATION_OPEN not in text:
        return text, ([] if blocks == 0 else None)
    out: list[str] = []
    spans: list[list[int]] = []
    at = size = 0
    while True:
        start = text.find(GENERATION_OPEN, at)
        if start < 0:
            out.append(text[at:])
            break
        end = text.find(GENERATION_CLOSE, start)
        if end < 0:
            return text.replace(GENERATION_OPEN, "").replace(GENERATION_CLOSE, ""), None
        out.append(text[at:start])
        size += start - at
        body = text[start + len(GENERATION_OPEN):end]
        if GENERATION_OPEN in body:  # nested or forged
            return text.replace(GENERATION_OPEN, "").replace(GENERATION_CLOSE, ""), None
        spans.append([size, size + len(body)])
        out.append(body)
        size += len(body)
        at = end + len(GENERATION_CLOSE)
    clean = "".join(out)
    if len(spans) != blocks or GENERATION_CLOSE in clean:
        return clean.replace(GENERATION_CLOSE, ""), None
    return clean, spans


_bounds = _Bounds()


@functools.lru_cache(maxsize=1)
def _environment() -> Any:
    """The sandbox, built once (jinja2 imported here, on first use)."""
    try:
        from jinja2.exceptions import SecurityError
        from jinja2.ext import Extension
        from jinja2.nodes import EvalContext
        from jinja2.runtime import Context
        from jinja2.sandbox import ImmutableSandboxedEnvironment
    except ImportError:
        raise TemplateUnavailable(MISSING_JINJA2) from None

    class Sandbox(ImmutableSandboxedEnvironment):
        # Route these operators through call_binop so a template cannot build a
        # gigabyte string or a huge integer in one C call without a check first.
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

    class Generation(Extension):
        """`{% generation %}...{% endgeneration %}` (transformers marks the assistant's
        trained tokens with it): rendered as its body; between GENERATION_OPEN and
        GENERATION_CLOSE when the caller asked for the spans (the token map)."""

        tags = {"generation"}

        def parse(self, parser: Any) -> Any:
            from jinja2 import nodes

            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return nodes.CallBlock(self.call_method("_mark", []), [], [], body).set_lineno(lineno)

        def _mark(self, caller: Any) -> str:
            text = str(caller())
            if not _bounds.mark_generation:
                return text
            _bounds.generation_blocks += 1
            return GENERATION_OPEN + text + GENERATION_CLOSE

    # As transformers renders templates: loop controls ({% break %}) and the generation tag.
    env = Sandbox(trim_blocks=True, lstrip_blocks=True, loader=None, autoescape=False,
                  extensions=["jinja2.ext.loopcontrols", Generation])
    env.concat = joined  # type: ignore[method-assign]
    env.bounded_join = joined  # read by compile_template

    def raise_exception(message: Any = "") -> None:
        raise TemplateRejected(str(message))

    def strftime_now(fmt: str) -> str:
        # Templates put "today" in system prompts; a fixed date keeps reports deterministic.
        import datetime

        return datetime.datetime(2024, 1, 1).strftime(str(fmt)[:100])

    def tojson(value: Any, ensure_ascii: Any = False, indent: Any = None, separators: Any = None,
               sort_keys: Any = False, **_: Any) -> str:
        # transformers' tojson options. An indent is a few spaces and a separator a few
        # characters; larger ones would multiply the output by themselves.
        width = indent if isinstance(indent, int) and 0 <= indent <= 16 else None
        seps = tuple(separators) if isinstance(separators, (list, tuple)) and len(separators) == 2 \
            and all(isinstance(s, str) and len(s) <= 8 for s in separators) else None
        return json.dumps(value, ensure_ascii=bool(ensure_ascii), indent=width, separators=seps,
                          sort_keys=bool(sort_keys), default=str)

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


def compile_template(template: str) -> Any:
    """The template compiled in the sandbox. TemplateUnusable when it does not compile,
    TemplateUnavailable without jinja2."""
    why = too_long(template)
    if why is not None:
        raise TemplateUnusable(why)
    env = _environment()
    from jinja2 import TemplateError

    try:
        compiled = env.from_string(template)
    except TemplateError as e:
        raise TemplateUnusable(f"the chat template does not compile ({one_line(e)})") from None
    except (RecursionError, SyntaxError):
        # Python's own compiler limits (e.g. "too many statically nested blocks")
        raise TemplateUnusable("the chat template nests too deeply to compile") from None
    except MemoryError:
        raise TemplateUnusable(OUT_OF_MEMORY) from None
    # `~` compiles to a call of the module-level `str_join` of the template's code: bound it.
    compiled.root_render_func.__globals__["str_join"] = env.bounded_join
    return compiled


class _OutOfTime(BaseException):
    """A render past MAX_SECONDS (a BaseException: no `except Exception` on the way out
    catches it)."""


class _Alarm:
    """The render's time bound as a timer signal, in the child (see use_alarm)."""

    installed = False
    armed = False  # a render is running: the signal stops it


# Once a render is past MAX_SECONDS, the timer signal comes again every this many seconds
# until it lands in the template's own code (see _on_alarm).
ALARM_RETRY_SECONDS = 0.01


def _on_alarm(signum: int, frame: Any) -> None:
    # Raised only in the frames of the template's compiled code (jinja names their file
    # "<template>"), where the line trace raised it too: never in the middle of jinja's
    # runtime or of the sandbox's own checks. Elsewhere the next signal tries again.
    if _Alarm.armed and frame is not None and frame.f_code.co_filename == "<template>":
        _Alarm.armed = False
        raise _OutOfTime()


def use_alarm() -> bool:
    """Bound each render's time with SIGALRM instead of the line trace: the same bound
    at the same places (the template's own frames, between two of their bytecodes),
    where the trace put a Python call on every line and every call of the render (two
    thirds of its time). Only where signals reach: the main thread of a process with
    setitimer (the child; not Windows); elsewhere the trace stays."""
    if not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        return False
    signal.signal(signal.SIGALRM, _on_alarm)
    _Alarm.installed = True
    return True


def render_sandboxed(compiled: Any, messages: Sequence[Mapping[str, Any]], variables: Mapping[str, Any],
                     add_generation_prompt: bool = False) -> str:
    """`compiled` rendered on `messages` in this process, within the sandbox's bounds (the
    child's limits are the caller's business). TemplateRejected when the template raises
    on the conversation, TemplateUnusable past a bound."""
    from jinja2.exceptions import SecurityError, TemplateError

    given = sum(len(v) for m in messages for v in m.values() if isinstance(v, str))
    _bounds.value_chars = max(MAX_OUTPUT_CHARS, 4 * given)
    _bounds.work_left = max(MAX_WORK_CHARS, 50 * given)
    # As apply_chat_template: no tools or documents given, the special tokens as variables.
    names: dict[str, Any] = {"tools": None, "documents": None}
    names.update((k, v) for k, v in variables.items() if v is not None)
    names.update(messages=[dict(m) for m in messages], add_generation_prompt=add_generation_prompt)
    deadline = time.monotonic() + MAX_SECONDS

    # A template that loops without writing anything is stopped by time, which an
    # output-size bound alone would not do: by SIGALRM in the child (use_alarm), else by
    # a line-level trace on the frames of the template's compiled code (jinja gives them
    # the file name "<template>"), and only those.
    def local(frame: Any, event: str, arg: Any) -> Any:
        if time.monotonic() > deadline:
            raise _OutOfTime()
        return local

    def calls(frame: Any, event: str, arg: Any) -> Any:
        return local if frame.f_code.co_filename == "<template>" else None

    alarm = _Alarm.installed
    previous = sys.gettrace()
    out: list[str] = []
    size = 0
    try:
        if alarm:
            _Alarm.armed = True
            signal.setitimer(signal.ITIMER_REAL, MAX_SECONDS, ALARM_RETRY_SECONDS)
        else:
            sys.settrace(calls)
        try:
            # (Template.generate less its wrapper: the same code, the same exceptions)
            for chunk in compiled.root_render_func(compiled.new_context(names)):
                size += len(chunk)
                if size > _bounds.value_chars:
                    raise TemplateUnusable(f"the chat template wrote more than {_bounds.value_chars} characters")
                out.append(chunk)
        finally:
            # (a signal due here does nothing: this frame is not the template's)
            if alarm:
                _Alarm.armed = False
                signal.setitimer(signal.ITIMER_REAL, 0)
            else:
                sys.settrace(previous)
    except _OutOfTime:
        raise TemplateUnusable(f"the chat template did not finish rendering within {MAX_SECONDS:g} s") from None
    except (TemplateRejected, TemplateUnusable):
        raise
    except SecurityError as e:
        raise TemplateUnusable(f"the sandbox stopped the chat template ({one_line(e)})") from None
    except TemplateError as e:
        raise TemplateRejected(one_line(e)) from None
    except RecursionError:
        raise TemplateUnusable("the chat template recursed too deeply") from None
    except MemoryError:
        raise TemplateUnusable(OUT_OF_MEMORY) from None
    except Exception as e:  # the template's own code failed on the conversation (a KeyError, a TypeError...)
        raise TemplateRejected(f"{type(e).__name__}: {one_line(e)}") from None
    return "".join(out)


Render = Callable[[Sequence[Mapping[str, Any]], bool], str]


def _sandbox_renderer(template: str, variables: Mapping[str, Any]) -> Render:
    compiled = compile_template(template)
    return lambda messages, gen: render_sandboxed(compiled, messages, variables, gen)


@functools.lru_cache(maxsize=1)
def _transformers_module() -> Any:
    """transformers' chat-template module, or None where it is missing or has no
    render_jinja_template (then the sandbox renders alike). jinja2 imported too."""
    try:
        import jinja2  # noqa: F401  (transformers renders with it)
    except ImportError:
        raise TemplateUnavailable(MISSING_JINJA2) from None
    try:
        # function-level: the child imports transformers only in this mode
        from transformers.utils import chat_template_utils as ctu
    except Exception:  # not installed, or its import fails
        return None
    return ctu if callable(getattr(ctu, "render_jinja_template", None)) else None


def _transformers_renderer(template: str, variables: Mapping[str, Any]) -> Render:
    """transformers' own render (apply_chat_template(tokenize=False) after its message
    normalisation); the sandbox when this transformers has no such function. A row's
    error is worded as transformers raised it: "TemplateError: ..."."""
    ctu = _transformers_module()
    if ctu is None:
        return _sandbox_renderer(template, variables)
    render_jinja: Any = ctu.render_jinja_template
    normalise = getattr(ctu, "_normalize_chat_messages", None)
    kwargs = {k: v for k, v in variables.items() if k not in ("messages", "add_generation_prompt")}
    if too_long(template) is not None:
        raise TemplateUnusable(too_long(template) or "")

    def render(messages: Sequence[Mapping[str, Any]], gen: bool) -> str:
        chat = normalise(list(messages)) if normalise is not None else [dict(m) for m in messages]
        try:
            rendered, _ = render_jinja(conversations=[chat], chat_template=template, add_generation_prompt=gen,
                                       **kwargs)
        except MemoryError:
            raise TemplateUnusable(OUT_OF_MEMORY) from None
        except RecursionError:
            raise TemplateUnusable("the chat template recursed too deeply") from None
        except Exception as e:  # jinja's raise_exception, TemplateError, TypeError...
            raise TemplateRejected(f"{type(e).__name__}: {one_line(e)}") from None
        text = str(rendered[0])
        given = sum(len(v) for m in messages for v in m.values() if isinstance(v, str))
        if len(text) > max(MAX_OUTPUT_CHARS, 4 * given):
            raise TemplateUnusable(f"the chat template wrote more than {max(MAX_OUTPUT_CHARS, 4 * given)} characters")
        return text

    return render


# --- the child's main loop ------------------------------------------------------------------


def _limit_self() -> None:
    """Lower this process's own limits before anything from the template is read."""
    if sys.platform == "win32":  # no rlimits: the parent's wall-clock timeout is the bound
        return
    import resource
    import signal

    signal.signal(signal.SIGXCPU, signal.SIG_DFL)  # a limit ends the process, whatever was inherited
    for which, want in ((resource.RLIMIT_AS, MAX_MEMORY_MIB << 20), (resource.RLIMIT_CORE, 0),
                        (resource.RLIMIT_FSIZE, 0)):
        _, hard = resource.getrlimit(which)
        value = want if hard == resource.RLIM_INFINITY else min(want, hard)
        resource.setrlimit(which, (value, value))
    _cpu_budget(STARTUP_CPU_SECONDS)


_cpu_soft: list[float] = [0.0]  # the soft RLIMIT_CPU _cpu_budget set last (CPU seconds; 0: none yet)


def _cpu_budget(seconds: int, *, renewed: bool = True) -> None:
    """RLIMIT_CPU's soft limit set to at least `seconds` from now (whole seconds). With
    `renewed=False` the limit is left as it is while `seconds` are still left before it
    (fewer than seconds + 1 then: the same bound, without two system calls a render)."""
    if sys.platform == "win32":
        return
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    used = usage.ru_utime + usage.ru_stime
    if not renewed and _cpu_soft[0] - used >= seconds:
        return
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    soft = math.ceil(used + seconds)
    soft = soft if hard == resource.RLIM_INFINITY else min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))
    _cpu_soft[0] = soft


def _library_path() -> None:
    """`-I` leaves PYTHONPATH out; libraries bundled beside the server come in through it
    (the VS Code extension's), so its absolute entries are searched after site-packages —
    a relative or empty entry would mean the working folder, and is dropped. (`-S` would
    start faster, but without site a virtual environment's site-packages are not found:
    the base interpreter's would be used instead.)"""
    for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep):
        if entry and os.path.isabs(entry) and entry not in sys.path:
            sys.path.append(entry)


# Answers are written in bunches, not one write a render: a bunch goes out when it holds
# this many bytes, when this many seconds passed since the last one went out, and at the
# end of each request. The parent waits MAX_WALL_SECONDS (60 s) for each answer, so 50 ms
# more is nothing to it; a write per row cost the child and the parent a system call and
# a wake-up each for every row of a file.
REPLY_FLUSH_BYTES = 1 << 16
REPLY_FLUSH_SECONDS = 0.05


def main() -> None:
    _limit_self()
    _library_path()
    use_alarm()
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    waiting: list[bytes] = []
    state = {"size": 0, "sent": time.monotonic()}

    def reply(obj: Mapping[str, Any], *, now: bool = True) -> None:
        line = json.dumps(obj).encode("ascii") + b"\n"
        waiting.append(line)
        state["size"] += len(line)
        if now or state["size"] >= REPLY_FLUSH_BYTES or time.monotonic() - state["sent"] >= REPLY_FLUSH_SECONDS:
            flush()

    def flush() -> None:
        out.write(b"".join(waiting))
        out.flush()
        waiting.clear()
        state["size"] = 0
        state["sent"] = time.monotonic()

    first = inp.readline()
    if not first:
        return
    setup = json.loads(first)
    template, variables = str(setup["template"]), dict(setup.get("variables") or {})
    transformers = setup.get("mode") == "transformers"
    try:
        # The libraries first, under the start-up budget: they are ours, not the template's.
        _transformers_module() if transformers else _environment()
        _cpu_budget(MAX_CPU_SECONDS)  # compiling is the template's first chance to run long
        renderer = (_transformers_renderer if transformers else _sandbox_renderer)(template, variables)
    except TemplateUnavailable as e:
        reply({"unavailable": str(e)})
        return
    except TemplateUnusable as e:
        reply({"unusable": str(e)})
        return
    reply({"ok": True})
    spans = bool(setup.get("spans")) and not transformers
    _bounds.mark_generation = spans
    for line in inp:
        state["sent"] = time.monotonic()
        for item in json.loads(line)["renders"]:
            _cpu_budget(MAX_CPU_SECONDS, renewed=False)
            try:
                _bounds.generation_blocks = 0
                text = renderer(item["messages"], bool(item.get("add_generation_prompt")))
                if spans:
                    text, found = generation_spans(text, _bounds.generation_blocks)
                    reply({"text": text, "spans": found}, now=False)
                    continue
                reply({"text": text}, now=False)
            except TemplateRejected as e:
                reply({"rejected": str(e)}, now=False)
            except TemplateUnusable as e:
                reply({"unusable": str(e)})
                return
            except MemoryError:
                reply({"unusable": OUT_OF_MEMORY})
                return
        flush()


if __name__ == "__main__":
    main()
