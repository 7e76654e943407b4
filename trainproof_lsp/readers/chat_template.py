"""Chat templates rendered in a sandboxed child process, for facts the tokenizer and dataset rules judge.

    render(template, messages, special=...)            -> str   (TemplateRejected, TemplateUnusable)
    assistant_end(template, special=..., markers=...)  -> AssistantEnd
    Renderer(template, variables=..., mode=...)        one child for many renders of one template
    available()                                        -> bool  (jinja2 is installed)

A chat template is Jinja code from the tokenizer folder: untrusted input. It is rendered
the way transformers renders it (`apply_chat_template`: trim_blocks, lstrip_blocks, a
`raise_exception` function, the special tokens as variables) but only in jinja2's
`ImmutableSandboxedEnvironment`, with no loader (no `{% include %}`, no files), no
network, no access to Python internals — and never in this process: each render runs in
a child (template_child.py) under an address-space limit, a CPU-time limit per render and
a wall-clock timeout that kills it, so a template that spends minutes in C or builds a
gigabyte string costs the caller a NOT-CHECKED, never a frozen editor. jinja2 is the
extra `trainproof-lsp[templates]` (it comes with torch and transformers); without it the
callers fall back to reading the template as text, or say the check could not run.

Like a reader, this module produces facts, never verdicts.
"""

from __future__ import annotations

import importlib.util
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Iterable, Mapping, Sequence

from .template_child import (MAX_CPU_SECONDS, MAX_MEMORY_MIB, MAX_OUTPUT_CHARS, MAX_SECONDS, MISSING_JINJA2,
                             TemplateRejected, TemplateUnavailable, TemplateUnusable, too_long)

# Wall-clock seconds the parent waits for one render's answer before it kills the child.
# The child's own CPU limit (MAX_CPU_SECONDS, up to 3 s of CPU) is the real bound; this one
# catches a child that is stuck without spending CPU. A 2-core machine shared by many
# processes gives a child a fraction of a core (3 s of CPU took 11 s at a load of 10):
# 60 s keeps the CPU limit the one that speaks there, and the caller is never blocked past
# it (the server's other judge thread and its event loop go on meanwhile).
MAX_WALL_SECONDS = 60.0
# Wall-clock seconds for the child to start and compile the template (the interpreter and
# jinja2 take ~0.15 s of CPU, transformers' chat-template module ~1 s more), on the same
# loaded machine as above.
MAX_START_SECONDS = 60.0

CHILD = Path(__file__).with_name("template_child.py")
# select() waits on pipes everywhere but on Windows (sockets only there).
SELECT_ON_PIPES = sys.platform != "win32"
EXCEEDED_CPU = f"the chat template render exceeded {MAX_CPU_SECONDS} s CPU"

# The turns rendered to see how the template ends the assistant's turn: text that no
# template writes on its own, so finding it in the output is unambiguous.
USER_TEXT = "trainproof-user-turn-7d1f"
ASSISTANT_TEXT = "trainproof-assistant-turn-7d1f"


def available() -> bool:
    """jinja2 can be imported (looked up, not imported: the render happens in a child)."""
    try:
        return importlib.util.find_spec("jinja2") is not None
    except (ImportError, ValueError):
        return False


def _reply_cap(messages: Sequence[Mapping[str, Any]]) -> int:
    """Bytes one answer may take: the child's output bound (a few times the row, at least
    MAX_OUTPUT_CHARS), JSON-escaped at up to 12 bytes a character, and a little framing."""
    given = sum(len(v) for m in messages for v in m.values() if isinstance(v, str))
    return 12 * max(MAX_OUTPUT_CHARS, 4 * given) + 4096


class Renderer:
    """One child process rendering one template, for every render of one call (a
    tokenizer check, the rows of one file). `mode="transformers"` renders with
    transformers' own function, as apply_chat_template does, for exact token counts.

    Renders answer with the text or TemplateRejected (the template refused that
    conversation). A template that does not compile, goes past a bound or a limit, or
    whose child dies raises TemplateUnusable — and every later render raises it again:
    the child is gone. Use as a context manager (or call close()): the child is killed
    at the end, never left behind."""

    def __init__(self, template: str, *, variables: Mapping[str, Any], mode: str = "sandbox",
                 spans: bool = False) -> None:
        # spans: each text comes with its {% generation %} spans (render_spans_many; sandbox mode)
        self._setup = {"template": template, "variables": dict(variables), "mode": mode, "spans": spans}
        self._proc: subprocess.Popen[bytes] | None = None
        self._buf = bytearray()
        self._failed: Exception | None = None
        self._killed = False  # by us, on the wall-clock timeout
        self._pending: tuple[threading.Thread, list[bytes]] | None = None  # see _read_some
        why = too_long(template)
        if why is not None:
            self._failed = TemplateUnusable(why)

    def __enter__(self) -> "Renderer":
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            proc.kill()
            proc.wait()
            for stream in (proc.stdin, proc.stdout):
                if stream is not None:
                    try:
                        stream.close()
                    except OSError:  # a write cut short by the child's end left bytes to flush
                        pass

    # --- rendering ------------------------------------------------------------------------

    def render(self, messages: Sequence[Mapping[str, Any]], *, add_generation_prompt: bool = False) -> str:
        (result,) = self.render_many([(messages, add_generation_prompt)])
        if isinstance(result, TemplateRejected):
            raise result
        return result

    def render_many(self, items: Iterable[tuple[Sequence[Mapping[str, Any]], bool]]
                    ) -> list[str | TemplateRejected]:
        """Each (messages, add_generation_prompt) rendered, in order: the text, or the
        TemplateRejected the template raised on it."""
        return [r if isinstance(r, TemplateRejected) else r[0] for r in self.render_spans_many(items)]

    def render_spans_many(self, items: Iterable[tuple[Sequence[Mapping[str, Any]], bool]]
                          ) -> list[tuple[str, tuple[tuple[int, int], ...] | None] | TemplateRejected]:
        """As render_many, each text with the [start, end) character spans of its
        {% generation %} blocks: () without any, None when not asked for (`spans=False`)
        or when the markers could not be told from the row's own text."""
        given = [([m if type(m) is dict else dict(m) for m in messages], gen) for messages, gen in items]
        if not given:
            return []
        proc = self._started()
        floor = _reply_cap(())  # every answer may take this much; a long row's own cap is counted past it
        try:
            self._send(proc.stdin, {"renders": [{"messages": m, "add_generation_prompt": g} for m, g in given]})
            out: list[tuple[str, tuple[tuple[int, int], ...] | None] | TemplateRejected] = []
            for messages, _ in given:
                answer = self._answer(MAX_WALL_SECONDS, floor, messages)
                if "text" in answer:
                    out.append((str(answer["text"]), _spans(answer.get("spans"))))
                elif "rejected" in answer:
                    out.append(TemplateRejected(str(answer["rejected"])))
                else:
                    raise TemplateUnusable(str(answer.get("unusable") or "the render process answered nothing"))
            return out
        except (TemplateUnusable, TemplateUnavailable) as e:
            self._fail(e)
            raise

    # --- the child ------------------------------------------------------------------------

    def _fail(self, e: Exception) -> None:
        self._failed = e
        self.close()

    def _started(self) -> "subprocess.Popen[bytes]":
        if self._failed is not None:
            raise self._failed
        if self._proc is not None:
            return self._proc
        if not sys.executable:  # an embedding interpreter that cannot say where it is
            self._failed = TemplateUnusable("the chat template render process could not start (no interpreter path)")
            raise self._failed
        try:
            # -I: no PYTHON* variables, no user site, no script or working folder on
            # sys.path; "/" as the working folder: nothing of the workspace is near.
            self._proc = subprocess.Popen([sys.executable, "-I", str(CHILD)], cwd=os.path.abspath(os.sep),
                                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        except OSError as e:
            self._failed = TemplateUnusable(f"the chat template render process could not start ({e.strerror or e})")
            raise self._failed from None
        try:
            self._send(self._proc.stdin, self._setup)
            answer = self._answer(MAX_START_SECONDS, 1 << 16)
            if "unavailable" in answer:
                raise TemplateUnavailable(str(answer["unavailable"]))
            if "ok" not in answer:
                raise TemplateUnusable(str(answer.get("unusable") or "the render process answered nothing"))
        except (TemplateUnusable, TemplateUnavailable) as e:
            self._fail(e)
            raise
        return self._proc

    def _send(self, stream: IO[bytes] | None, obj: Mapping[str, Any]) -> None:
        # The child reads a whole line before it writes anything: no deadlock on full pipes.
        assert stream is not None
        try:
            stream.write(json.dumps(obj).encode("utf-8", "surrogatepass") + b"\n")
            stream.flush()
        except OSError:  # the child is gone (BrokenPipeError): why is in its exit status
            raise TemplateUnusable(self._ended()) from None

    def _answer(self, seconds: float, cap: int, messages: Sequence[Mapping[str, Any]] | None = None
                ) -> dict[str, Any]:
        """The child's next line, within `seconds` of wall-clock time and `cap` bytes (or
        the render of `messages`' own cap when larger: counted only when needed)."""
        proc = self._proc
        assert proc is not None and proc.stdout is not None
        fd = proc.stdout.fileno()
        deadline = time.monotonic() + seconds
        start = 0
        while (end := self._buf.find(b"\n", start)) < 0:
            start = len(self._buf)
            if len(self._buf) > cap and messages is not None:
                cap, messages = max(cap, _reply_cap(messages)), None
            if len(self._buf) > cap:
                self._killed = True
                raise TemplateUnusable(f"the chat template render wrote more than {cap} bytes")
            left = deadline - time.monotonic()
            if left <= 0:
                self._killed = True
                raise TemplateUnusable(f"the chat template render did not finish within {seconds:g} s "
                                       "(wall clock; the render process was killed)")
            chunk = self._read_some(fd, left)
            if chunk is None:
                continue
            if not chunk:
                raise TemplateUnusable(self._ended())
            self._buf += chunk
        line = bytes(self._buf[:end])
        del self._buf[:end + 1]
        try:
            answer = json.loads(line)
        except ValueError:
            answer = None
        if not isinstance(answer, dict):
            raise TemplateUnusable("the chat template render process answered something else than JSON")
        return answer

    def _read_some(self, fd: int, seconds: float) -> bytes | None:
        """Up to 1 MiB from the child (b"" at its end), or None when nothing came within
        `seconds`."""
        if SELECT_ON_PIPES:
            ready, _, _ = select.select([fd], [], [], seconds)
            return os.read(fd, 1 << 20) if ready else None
        # select() takes only sockets there: a helper thread reads while this one waits,
        # and a read still pending when the wait ends is picked up by the next call.
        if self._pending is None:
            box: list[bytes] = []

            def read() -> None:
                try:
                    box.append(os.read(fd, 1 << 20))
                except OSError:
                    box.append(b"")

            reader = threading.Thread(target=read, daemon=True, name="trainproof-template-read")
            reader.start()
            self._pending = (reader, box)
        reader, box = self._pending
        reader.join(seconds)
        if reader.is_alive():
            return None
        self._pending = None
        return box[0]

    def _ended(self) -> str:
        """Why the child stopped answering, from its exit status."""
        proc = self._proc
        assert proc is not None
        try:
            code = proc.wait(timeout=MAX_WALL_SECONDS)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
        if code == -signal.SIGXCPU or (code == -signal.SIGKILL and not self._killed):
            return EXCEEDED_CPU  # past the soft limit, or the hard one a parent set lower
        if code < 0:
            name = signal.Signals(-code).name if -code in signal.valid_signals() else str(-code)
            return (f"the chat template render process was killed by {name} (limits: "
                    f"{MAX_CPU_SECONDS} s CPU, {MAX_MEMORY_MIB} MiB memory)")
        return f"the chat template render process ended (exit {code})"


def _spans(value: Any) -> tuple[tuple[int, int], ...] | None:
    """The child's [[start, end], ...] as a tuple; None when absent or not that shape."""
    if not isinstance(value, list):
        return None
    out = []
    for pair in value:
        if not (isinstance(pair, list) and len(pair) == 2 and all(type(v) is int for v in pair)):
            return None
        out.append((pair[0], pair[1]))
    return tuple(out)


def render(template: str, messages: Sequence[Mapping[str, Any]], *, special: Mapping[str, str | None],
           add_generation_prompt: bool = False) -> str:
    """The template rendered on `messages`, the way `apply_chat_template(tokenize=False)`
    renders it, in a child of its own. TemplateRejected when the template raises on the
    conversation; TemplateUnusable when it does not compile or exceeds a bound or limit;
    TemplateUnavailable without jinja2."""
    _check_available()
    with Renderer(template, variables=special) as renderer:
        return renderer.render(messages, add_generation_prompt=add_generation_prompt)


def _check_available() -> None:
    if not available():
        raise TemplateUnavailable(MISSING_JINJA2)


@dataclass(frozen=True, kw_only=True)
class AssistantEnd:
    """What the template writes after the assistant's content in a user/assistant
    exchange (the rest of the output: the assistant turn is the last one)."""

    tail: str
    marker: str | None  # the first stop marker found in the tail, if any
    system: bool  # a system turn had to come first for the template to render


def assistant_end(template: str, *, special: Mapping[str, str | None], markers: Sequence[str]) -> AssistantEnd:
    """Render a user/assistant exchange (with a system turn first when the template
    insists on one) and return what follows the assistant's content — both renders in one
    child. TemplateRejected / TemplateUnusable / TemplateUnavailable when it cannot be
    rendered, TemplateUnusable when the output does not hold the assistant's content."""
    _check_available()
    turns = [{"role": "user", "content": USER_TEXT}, {"role": "assistant", "content": ASSISTANT_TEXT}]
    system = False
    with Renderer(template, variables=special) as renderer:
        try:
            text = renderer.render(turns)
        except TemplateRejected as first:
            system = True
            try:
                text = renderer.render([{"role": "system", "content": "trainproof-system-turn-7d1f"}, *turns])
            except TemplateRejected:
                raise first from None
    at = text.rfind(ASSISTANT_TEXT)
    if at < 0:
        raise TemplateUnusable("the rendered conversation does not contain the assistant's content")
    tail = text[at + len(ASSISTANT_TEXT):]
    found = sorted((tail.find(m), m) for m in markers if m and m in tail)
    return AssistantEnd(tail=tail, marker=found[0][1] if found else None, system=system)


__all__ = ["render", "assistant_end", "available", "Renderer", "AssistantEnd", "TemplateRejected",
           "TemplateUnusable", "TemplateUnavailable", "MISSING_JINJA2", "MAX_OUTPUT_CHARS", "MAX_SECONDS",
           "MAX_CPU_SECONDS", "MAX_MEMORY_MIB", "MAX_WALL_SECONDS", "EXCEEDED_CPU"]
