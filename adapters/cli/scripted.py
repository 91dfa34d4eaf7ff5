"""``cpe scripted-model serve|check`` and ``cpe run --scripted``: the scripted model for anyone.

``serve`` plays a book (docs/scripted-model.md; the shipped example without ``--book``) on a
loopback address in the foreground, prints how to point the CLIs at it, logs every request it
answers, and stops on Ctrl-C or SIGTERM, exit 0. ``check`` loads a book and prints what it
would play. ``run_scripted`` is ``cpe run`` with the server started in its process and every
runtime pointed at it (a throwaway HOME per run, as ``cpe demo`` does). Answers report no
tokens, so a scripted run costs $0 (a codex run on codex's default model, which has no price:
unknown). A book that does not load is one line naming the file and the place in it, exit 2.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Protocol, TextIO

from adapters.scripted_model import RecordedRequest, ScriptedModelServer
from adapters.scripted_model.book import Book, load_book
from adapters.scripted_model.responses_wire import codex_overrides
from domain.errors import ConfigError

EXIT_USAGE = 2  # a book that does not load, an address that is not HOST:PORT
EXIT_CONFIG = 78  # an address that cannot be listened on (as cpe run's dashboard)


def check(book_path: Path | None, out: TextIO = sys.stdout) -> int:
    """Print what the book plays; exit 2 naming the problem when it does not load."""
    book = _book(book_path)
    if book is None:
        return EXIT_USAGE
    print("\n".join(book.describe()), file=out)
    return 0


def serve(book_path: Path | None, listen: str, out: TextIO = sys.stdout) -> int:
    """Serve the book until SIGINT or SIGTERM; every request answered is one line on ``out``."""
    book = _book(book_path)
    if book is None:
        return EXIT_USAGE
    address = _address(listen)
    if address is None:
        return EXIT_USAGE
    try:
        server = ScriptedModelServer(
            book.scenarios, host=address[0], port=address[1], report_usage=False
        )
    except OSError as exc:
        return _fail(f"--listen {listen}: cannot listen there: {exc.strerror or exc}", EXIT_CONFIG)
    stop, closed = threading.Event(), threading.Event()
    previous = {s: signal.signal(s, lambda signum, frame: stop.set()) for s in _STOP_SIGNALS}
    logger = threading.Thread(target=_log_requests, args=(server, closed, out), daemon=True)
    try:
        with server:
            for line in _banner(book, server):
                _say(out, line)
            logger.start()
            stop.wait()
        closed.set()
        logger.join()  # every request the closed server answered has its line by now
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    _say(out, f"cpe scripted-model: stopped after {len(server.requests)} request(s)")
    return 0


class BoundRun(Protocol):
    """``adapters.cli.run.run`` with its configuration, repository and options bound: what is
    left is how the runtimes reach the scripted model."""

    def __call__(
        self,
        *,
        agent_env: Mapping[str, str] | None,
        isolated_home: bool,
        codex_overrides: Sequence[str],
        announce: str | None,
    ) -> int: ...


def run_scripted(book_path: Path | None, run: BoundRun) -> int:
    """``cpe run`` (``run``: ``adapters.cli.run.run`` with its arguments bound) with every
    agent talking to a scripted model serving the book, in this process."""
    book = _book(book_path)
    if book is None:
        return EXIT_USAGE
    with ScriptedModelServer(book.scenarios, report_usage=False) as server:
        return run(
            agent_env=server.client_env(),
            isolated_home=True,
            codex_overrides=codex_overrides(server.base_url),
            # said once the state is this process's: a second cpe run, refused, does not say it
            announce=(
                f"cpe run: every agent talks to the scripted model on {server.base_url}, "
                f"playing {book.source} ({len(book.scenarios)} scenario(s)); no model account "
                "is used, and answers report no tokens, so no run costs money"
            ),
        )


_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _book(path: Path | None) -> Book | None:
    try:
        return load_book(path)
    except ConfigError as exc:
        _fail(f"scripted model: {exc}", EXIT_USAGE)
        return None


def _address(listen: str) -> tuple[str, int] | None:
    host, colon, port = listen.rpartition(":")
    if colon and host and port.isdigit() and int(port) <= 65535:
        return host.strip("[]"), int(port)
    _fail(
        f"--listen {listen!r} is not HOST:PORT; expected e.g. 127.0.0.1:8787 (port 0: any "
        "free one)",
        EXIT_USAGE,
    )
    return None


def _banner(book: Book, server: ScriptedModelServer) -> list[str]:
    url = server.base_url
    claude = " ".join(f"{name}={value}" for name, value in server.client_env().items())
    overrides = ", ".join(f"'{value}'" for value in codex_overrides(url))
    return [
        f"cpe scripted-model: playing {book.source} ({len(book.scenarios)} scenario(s)) on {url}",
        "For the claude CLI (cpe's claude-sdk and claude-cli runtimes), in the shell that starts "
        "cpe run:",
        f"  export {claude}",
        "For codex (the codex-cli runtime), in supervisor.toml:",
        "  [runtime.codex_cli]",
        f"  overrides = [{overrides}]",
        "Answers report no tokens, so no run costs money. Ctrl-C stops it; each request it "
        "answers is one line below.",
    ]


def _log_requests(server: ScriptedModelServer, closed: threading.Event, out: TextIO) -> None:
    """One line per request answered, as they come, until the server is ``closed``."""
    seen = 0
    while True:
        finished = closed.is_set()  # then this pass is the last: nothing more can come
        server.wait_until(_news(seen, closed), timeout=1.0)
        records = server.requests
        for record in records[seen:]:
            _say(out, describe_request(record))
        seen = len(records)
        if finished:
            return


def _news(seen: int, closed: threading.Event) -> Callable[[ScriptedModelServer], bool]:
    """Whether a request came after the first ``seen``, or the server is closed."""
    return lambda server: len(server.requests) > seen or closed.is_set()


def describe_request(record: RecordedRequest) -> str:
    """A request in one line: when, what, for which role, which scenario and turn, the reply."""
    stamp = time.strftime("%H:%M:%S")
    where = f"{record.method} {record.path}"
    if record.kind in ("probe", "count_tokens", "unknown"):
        return f"{stamp}  {record.kind:<12} {where} → {record.status}"
    role = (record.conversation.role if record.conversation else None) or "-"
    if record.kind == "side":
        return f"{stamp}  {'side':<12} {where} → {record.status} (not an agent turn)"
    if record.error is not None:
        return f"{stamp}  {role:<12} {where} → {record.status}: {record.error}"
    turn = "" if record.turn is None else f" turn {record.turn + 1}"
    reply = ", ".join(record.reply) or "nothing"
    return f"{stamp}  {role:<12} {record.scenario}{turn} → {reply}"


def _say(out: TextIO, line: str) -> None:
    print(line, file=out, flush=True)


def _fail(message: str, code: int) -> int:
    print("cpe: " + message, file=sys.stderr, flush=True)
    return code
