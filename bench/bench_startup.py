"""How long ``cpe --help``, ``cpe status`` and ``cpe work list`` take to answer, as an operator
types them: each a new process (the installed ``cpe``), on a repository after ``cpe init``
with a work item, ``--runs`` times each, interleaved so drift in the machine's load hits all
alike. Prints, per command, the median and the best wall time, and the median CPU time (user +
sys of the process and the git it runs), which a busy machine inflates less than wall time;
the load average is printed first. The aim: each under 300 ms on this machine when idle.

With ``--instructions`` it also counts the instructions each command's Python process runs,
under valgrind's callgrind (slow: about fifty times; the git processes it starts are not
counted). The count does not depend on the machine's load: compare two versions with it.

With ``--code DIR`` the commands run another copy of the code (``git archive REV | tar -x -C
DIR``) on this installation, for a before and after measured at the same load.

    .venv/bin/python bench/bench_startup.py --runs 15 [--instructions] [--code DIR]
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CPE = Path(sys.executable).parent / "cpe"
COMMANDS: tuple[tuple[str, ...], ...] = (("--help",), ("status",), ("work", "list"))


def environment(home: Path, code: Path | None) -> dict[str, str]:
    """A user's environment, bytecode caches allowed (as an installed cpe has them); with
    ``code``, that copy of the packages ahead of the installed ones."""
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "LANG": "C.UTF-8"}
    env.update(GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1")
    if code is not None:
        env["PYTHONPATH"] = str(code.resolve())
    return env


def prepare(root: Path, code: Path | None) -> tuple[Path, dict[str, str]]:
    """A repository with one commit, ``cpe init`` run in it, and a work item."""
    repo, home = root / "repo", root / "home"
    repo.mkdir()
    home.mkdir()
    env = environment(home, code)
    ident = ["-c", "user.name=bench", "-c", "user.email=bench@example.invalid"]
    for args in (
        ["init", "--quiet", "--initial-branch=main"],
        [*ident, "commit", "--quiet", "--allow-empty", "-m", "start"],
    ):
        subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)
    for args in (["init"], ["work", "add", "Greeting", "--body", "Add greet(name)."]):
        subprocess.run([str(CPE), *args], cwd=repo, env=env, check=True, capture_output=True)
    return repo, env


def timed(command: tuple[str, ...], repo: Path, env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds of one ``cpe COMMAND`` (CPU: the process and its children)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    done = subprocess.run([str(CPE), *command], cwd=repo, env=env, capture_output=True, check=False)
    wall = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"cpe {' '.join(command)} failed:\n{done.stderr.decode()[-2000:]}")
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return wall, cpu


def instructions(command: tuple[str, ...], repo: Path, env: dict[str, str]) -> int:
    """The instructions ``cpe COMMAND``'s Python process runs (callgrind's count)."""
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", str(CPE), *command],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise SystemExit(f"no instruction count from valgrind:\n{done.stderr[-2000:]}")
    return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--instructions", action="store_true", help="count them with callgrind")
    parser.add_argument("--code", type=Path, help="run this copy of the code instead")
    args = parser.parse_args()
    if args.instructions and shutil.which("valgrind") is None:
        raise SystemExit("--instructions needs valgrind on PATH")
    if args.code is not None and not (args.code / "adapters" / "cli").is_dir():
        raise SystemExit(
            f"--code {args.code}: no adapters/cli there; expected a copy of cpe's code"
        )
    print("load average: " + " ".join(f"{load:.2f}" for load in os.getloadavg()))
    with tempfile.TemporaryDirectory(prefix="cpe-bench-startup-") as scratch:
        repo, env = prepare(Path(scratch), args.code)
        for command in COMMANDS:  # warm the page cache and the bytecode of each
            timed(command, repo, env)
        walls: dict[tuple[str, ...], list[float]] = {command: [] for command in COMMANDS}
        cpus: dict[tuple[str, ...], list[float]] = {command: [] for command in COMMANDS}
        for _ in range(args.runs):
            for command in COMMANDS:
                wall, cpu = timed(command, repo, env)
                walls[command].append(wall)
                cpus[command].append(cpu)
        counts = {c: instructions(c, repo, env) for c in COMMANDS} if args.instructions else {}
    print(f"{args.runs} runs each; milliseconds")
    head = f"{'command':<16} {'wall median':>12} {'wall best':>10} {'cpu median':>11}"
    print(head + ("  instructions" if counts else ""))
    for command in COMMANDS:
        wall, cpu = walls[command], cpus[command]
        line = (
            f"{'cpe ' + ' '.join(command):<16} {statistics.median(wall) * 1000:>12.0f} "
            f"{min(wall) * 1000:>10.0f} {statistics.median(cpu) * 1000:>11.0f}"
        )
        if counts:
            line += f"  {counts[command] / 1e6:>10,.0f} M"
        print(line)


if __name__ == "__main__":
    main()
