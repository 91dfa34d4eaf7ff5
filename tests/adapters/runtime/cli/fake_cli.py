"""A fake ``claude -p`` for the runner's fault tests; ``FAKE_MODE`` picks the behaviour.

It records its own pid and its child's in ``FAKE_PIDS`` (one per line) first, so a test can
check that none of them survives. Modes:

- ``ok``: a stream-json init, an assistant event and a success result; exit 0.
- ``hang``: a child that sleeps, then no output at all, ignoring SIGTERM.
- ``chatty``: a line every 50 ms forever (never idle; only a wall-clock timeout ends it).
- ``fail``: an error on stderr, exit 3.
- ``silent``: no output, exit 0 (no transcript, no result).
- ``garbage``: a line that is not JSON, then a result; exit 0.
- ``prompt``: asks a question on stdout and waits for an answer on stdin.
- ``overspend``: a CLI that does not hold its ``--max-budget-usd``: assistant messages of a
  million input tokens each on a Sonnet (some $3 each), one every 50 ms, and no result.
"""

import json
import os
import signal
import subprocess
import sys
import time


def emit(event: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def main() -> int:
    mode = os.environ.get("FAKE_MODE", "ok")
    pids = [os.getpid()]
    if mode in ("hang", "chatty"):
        child = subprocess.Popen([sys.executable, "-c", "import time\nwhile True: time.sleep(1)"])
        pids.append(child.pid)
    path = os.environ.get("FAKE_PIDS")
    if path:
        with open(path, "w") as out:
            out.write("".join(f"{p}\n" for p in pids))
    result = {
        "type": "result",
        "subtype": "success",
        "is_error": False,
        "num_turns": 1,
        "result": "done",
        "structured_output": {"ok": True},
        "total_cost_usd": 0.001,
        "usage": {"input_tokens": 3, "output_tokens": 2},
    }
    if mode == "ok":
        init = {"argv": sys.argv[1:], "cwd": os.getcwd(), "stdin": sys.stdin.read()}
        emit({"type": "system", "subtype": "init", **init})
        text = {"type": "text", "text": "hello"}
        emit({"type": "assistant", "message": {"role": "assistant", "content": [text]}})
        emit(result)
        return 0
    if mode == "hang":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        while True:
            time.sleep(1)
    if mode == "overspend":
        for n in range(1000):
            usage = {"input_tokens": 1_000_000, "output_tokens": 10}
            message = {"id": f"msg_{n}", "model": "claude-sonnet-fake", "usage": usage}
            text = {"type": "text", "text": f"spending {n}"}
            emit({"type": "assistant", "message": {**message, "content": [text]}})
            time.sleep(0.05)
        return 0
    if mode == "chatty":
        while True:
            emit({"type": "system", "subtype": "tick"})
            time.sleep(0.05)
    if mode == "fail":
        sys.stderr.write("Error: invalid API key\n")
        return 3
    if mode == "garbage":
        sys.stdout.write("this is not json\n")
        emit(result)
        return 0
    if mode == "prompt":
        answer = input("Do you trust the files in this folder? (y/n) ")  # EOF: /dev/null
        emit({"type": "system", "subtype": "answer", "answer": answer})
        emit(result)
        return 0
    return 0  # silent


if __name__ == "__main__":
    sys.exit(main())
