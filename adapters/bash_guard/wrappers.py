"""Commands that run other commands: the guard checks the command inside as if typed alone.

Prefixes (``env``, ``nice``, ``timeout``, ``nohup``, ``command``, ``builtin``, ``exec``,
``time``, ``stdbuf``, ``setsid``, ``busybox``, ``ionice``, ``taskset``, ``strace``,
``unbuffer``, ``chronic``, ``faketime``, ``xvfb-run``, ``dbus-run-session``), ``xargs``
(whose input becomes arguments only known at run time), shells (``bash -c``, ``sh -c``; a
shell reading a literal heredoc has it parsed; one reading other stdin is denied), ``eval``,
``trap``, ``alias``, ``watch``, ``script -c``, ``flock``, ``source`` (of a file; of generated
text it is denied), ``python -m``, and project runners (``uv run``, ``uvx``, ``npx``,
``npm exec``, ``pnpm exec``/``dlx``, ``yarn exec``/``dlx``, ``bunx``, ``poetry run``,
``pipenv run``, ``pdm run``, ``hatch run``, ``bundle exec``). ``export``/``declare``/``local``
assignments go through the environment rules.
"""

from __future__ import annotations

import re

from adapters.bash_guard.checks import (
    STDIN_WORD,
    Checks,
    Rule,
    known_only,
    scan,
    words,
)
from adapters.bash_guard.words import Word

__all__ = ["WRAPPERS", "python_rule"]


def _prefix(takes_value: str, flags: str, *, skip: int = 0, outputs: str = "") -> Rule:
    """A command that runs its operands (after ``skip`` of them) as a command."""
    takes, known = words(takes_value), words(takes_value) | words(flags)

    def rule(checks: Checks, name: str, args: list[Word]) -> None:
        niceness = [w for w in args[:1] if re.fullmatch(r"-\d+", w.value or "")]  # nice -10
        options = scan(args[len(niceness) :], takes, stop=True)
        known_only(checks, name, options, known)
        for output in options.values(*outputs.split()):
            checks.write(output, f"{name} output file")
        checks.argv(options.args[skip:])

    return rule


def _env(checks: Checks, name: str, args: list[Word]) -> None:
    options = scan(args, words("-u --unset -C --chdir"), stop=True)
    known = words("-i --ignore-environment -0 --null -u --unset -C --chdir -v --debug")
    known_only(checks, name, options, known)
    for directory in options.values("-C", "--chdir"):
        checks.location(directory, "env -C directory")
    rest = list(options.args)
    while rest and re.match(r"[A-Za-z_][A-Za-z0-9_]*=", rest[0].skeleton):
        checks.assignment(rest.pop(0))
    checks.argv(rest)


def _command(checks: Checks, name: str, args: list[Word]) -> None:
    options = scan(args, stop=True)
    known_only(checks, name, options, words("-p -v -V"))
    if not options.has("-v", "-V"):  # -v and -V only look the name up
        checks.argv(options.args)


def _xargs(checks: Checks, name: str, args: list[Word]) -> None:
    takes = words("-a --arg-file -d --delimiter -E -I -L -n --max-args -P --max-procs -s")
    known = takes | words("--max-chars -0 --null -r --no-run-if-empty -t --verbose -p -x --exit")
    known |= words(
        "--interactive --open-tty -o --show-limits --process-slot-var --replace -i -e -l"
    )
    replace: str | None = None
    spelled = list(args)
    for k, word in enumerate(spelled):  # -i, -e and -l take an optional value glued to them
        value = word.value or ""
        if re.fullmatch(r"-[iel].+", value):
            spelled[k] = Word.literal(value[:2])
            replace = value[2:] if value[1] == "i" else replace
    options = scan(spelled, takes, stop=True)
    known_only(checks, name, options, known)
    if options.has("-i", "--replace"):
        replace = replace or next((w.value for w in options.values("--replace")), None) or "{}"
    replace = next((w.value for w in options.values("-I")), replace)
    inner = options.args or [Word.literal("echo")]
    if replace is None:
        checks.argv([*inner, STDIN_WORD])
    else:
        checks.argv([STDIN_WORD if replace in (w.value or "") else w for w in inner])


def _shell(checks: Checks, name: str, args: list[Word]) -> None:
    command_string = reads_stdin = False
    i = 0
    while i < len(args) and (value := args[i].value) and value[0] in "-+" and value != "-":
        i += 1
        if value == "--":
            break
        if value in {"-o", "+o", "-O", "+O", "--rcfile", "--init-file"}:
            i += 1
        elif not value.startswith("--"):
            command_string |= "c" in value
            reads_stdin |= "s" in value
    operands = args[i:]
    if command_string:
        text = operands[0].value if operands else None
        if text is None:
            checks.deny(f"{name} -c runs a command string only known at run time")
        checks.program(text, f"{name} -c")
        return
    script = operands[0].value if operands and not reads_stdin else "-"
    if script is None:
        checks.deny(f"{name} runs a script whose name is only known at run time")
    if not _STDIN_PATHS.fullmatch(script):
        return  # a script file: like any program the agent runs, not inspected
    heredoc = checks.stdin_script()
    if heredoc is None:
        checks.deny(f"{name} reads commands from stdin, which the guard cannot see")
    checks.program(heredoc, f"{name} reading a heredoc")


_STDIN_PATHS = re.compile(r"-|/dev/stdin|/dev/fd/\d+|/proc/(self|\d+)/fd/\d+")


def _source(checks: Checks, name: str, args: list[Word]) -> None:
    """``source file`` runs a file like a script (not inspected); generated text is denied."""
    script = next(iter(scan(args, stop=True).args), None)
    if script is not None and (script.value is None or _STDIN_PATHS.fullmatch(script.value)):
        checks.deny(f"{name} of {script.display!r} runs commands the guard cannot see")


def _literal_text(checks: Checks, name: str, args: list[Word]) -> str:
    values = [w.value for w in args]
    texts = [v for v in values if v is not None]
    if len(texts) != len(values):
        checks.deny(f"{name} runs text only known at run time")
    return " ".join(texts)


def _eval(checks: Checks, name: str, args: list[Word]) -> None:
    checks.program(_literal_text(checks, name, args), name)


def _watch(checks: Checks, name: str, args: list[Word]) -> None:
    options = scan(args, words("-n --interval"), stop=True)
    known = words("-n --interval -d --differences -t --no-title -b --beep -e --errexit -g -c -p")
    known_only(checks, name, options, known | words("--chgexit --color --precise -w --no-wrap"))
    checks.program(_literal_text(checks, name, options.args), name)


def _script(checks: Checks, name: str, args: list[Word]) -> None:
    options = scan(args, words("-c --command -E --echo -T --log-timing -O -I -B --log-out"))
    for text in options.values("-c", "--command"):
        checks.program(_literal_text(checks, name, [text]), f"{name} -c")
    for log in [*options.values("-O", "-I", "-B", "-T", "--log-out"), *options.args]:
        checks.write(log, f"{name} log file")


def _flock(checks: Checks, name: str, args: list[Word]) -> None:
    options = scan(args, words("-w --timeout -E --conflict-exit-code -c --command"), stop=True)
    for text in options.values("-c", "--command"):
        checks.program(_literal_text(checks, name, [text]), f"{name} -c")
    checks.argv(options.args[1:])


def _trap(checks: Checks, name: str, args: list[Word]) -> None:
    operands = scan(args).args
    if len(operands) >= 2 and operands[0].value not in {"", "-"}:
        checks.program(_literal_text(checks, name, operands[:1]), name)


def _alias(checks: Checks, name: str, args: list[Word]) -> None:
    for word in scan(args).args:
        text = _literal_text(checks, name, [word])
        if "=" in text:
            checks.program(text.partition("=")[2], name)


def _declare(checks: Checks, name: str, args: list[Word]) -> None:
    for word in scan(args).args:
        checks.assignment(word)


def _python(checks: Checks, name: str, args: list[Word]) -> None:
    i = 0
    while i < len(args) and (value := args[i].value) and value.startswith("-") and value != "-":
        if value.startswith("-c"):
            return
        if value.startswith("-m"):  # python -m twine upload is twine upload
            glued = value[2:]
            module = [Word.literal(glued)] if glued else args[i + 1 : i + 2]
            checks.argv([*module, *args[i + (1 if glued else 2) :]])
            return
        i += 2 if value in {"-W", "-X", "--check-hash-based-pycs"} else 1


def python_rule(name: str) -> Rule | None:
    return _python if re.fullmatch(r"(python|pypy)[\d.]*", name) else None


_RUNS = {
    "uv": {"run", "tool"},
    "npm": {"exec", "x"},
    "pnpm": {"exec", "dlx"},
    "yarn": {"exec", "dlx"},
    "bun": {"x"},
    "poetry": {"run"},
    "pipenv": {"run"},
    "pdm": {"run"},
    "hatch": {"run"},
    "bundle": {"exec"},
}
_RUNNER_TAKES = words(
    "--with --with-editable --with-requirements --python -p --project --directory --package "
    "--extra --group --only-group --no-group --env-file --index --default-index --index-url -i "
    "--extra-index-url --find-links -f --config-file --cache-dir --color --from --exclude-newer "
    "-c --call -w --workspace"
)
_RUNNER_FLAGS = words(
    "--frozen --locked --no-sync --all-extras --no-dev --dev --isolated --active --no-project "
    "--no-editable --module -m --script -s --offline -q --quiet -v --verbose --no-cache -n "
    "--refresh --reinstall --upgrade -U --no-progress --all-packages --exact --no-env-file "
    "--only-dev --all-groups --no-config --native-tls --preview -y --yes --no --prefer-offline"
)


def _runner(checks: Checks, name: str, args: list[Word]) -> None:
    """``uv run``, ``uvx``, ``npx``, ``poetry run``… run their first operand as a command."""
    rest = list(args)
    if name not in {"uvx", "npx", "bunx"}:
        options = scan(args, _RUNNER_TAKES, stop=True)
        sub = options.args[0].value if options.args else None
        if sub not in _RUNS.get(name, set()):
            return
        rest = options.args[1:]
        if sub == "tool":  # uv tool run == uvx
            if [w.value for w in rest[:1]] != ["run"]:
                return
            rest = rest[1:]
    options = scan(rest, _RUNNER_TAKES, stop=True)
    known_only(checks, name, options, _RUNNER_TAKES | _RUNNER_FLAGS)
    for text in options.values("-c", "--call"):
        checks.program(_literal_text(checks, name, [text]), f"{name} -c")
    if options.has("-m", "--module"):
        checks.argv([Word.literal("python"), Word.literal("-m"), *options.args])
    else:
        checks.argv(options.args)


WRAPPERS: dict[str, Rule] = {
    "env": _env,
    "nice": _prefix("-n --adjustment", ""),
    "timeout": _prefix("-s --signal -k --kill-after", "--preserve-status --foreground -v", skip=1),
    "nohup": _prefix("", ""),
    "setsid": _prefix("", "-c --ctty -f --fork -w --wait"),
    "stdbuf": _prefix("-i -o -e --input --output --error", ""),
    "time": _prefix("-o --output -f --format", "-p -a --append -v -q", outputs="-o --output"),
    "command": _command,
    "builtin": _prefix("", ""),
    "exec": _prefix("-a", "-c -l"),
    "busybox": _prefix("", ""),
    "ionice": _prefix("-c --class -n --classdata -p --pid -P --pgid -u --uid", "-t --ignore"),
    "taskset": _prefix("", "-a --all-tasks -c --cpu-list", skip=1),
    "unbuffer": _prefix("", "-p"),
    "chronic": _prefix("", "-e -v"),
    "faketime": _prefix("", "-f -m", skip=1),
    "dbus-run-session": _prefix("", ""),
    "xvfb-run": _prefix("-n --server-num -s --server-args -f --auth-file -e --error-file", "-a"),
    "strace": _prefix(
        "-e -o -p -s -u -a -b -I -O -S -P -E -X",
        "-f -ff -c -C -d -D -h -i -k -q -qq -r -t -tt -ttt -T -v -V -w -x -xx -y -yy -z -Z",
        outputs="-o",
    ),
    "xargs": _xargs,
    "eval": _eval,
    "trap": _trap,
    "alias": _alias,
    "watch": _watch,
    "script": _script,
    "flock": _flock,
    "source": _source,
    ".": _source,
    **dict.fromkeys(("export", "declare", "typeset", "local", "readonly"), _declare),
    **dict.fromkeys(("bash", "sh", "dash", "zsh", "ksh", "mksh", "ash"), _shell),
    **dict.fromkeys(("uvx", "npx", "bunx", *_RUNS), _runner),
}
