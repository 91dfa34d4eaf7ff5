"""The guard itself: verdicts, the ``check-bash`` entry, and the walk over every command.

For each simple command: credential paths named anywhere (words, redirection targets, heredoc
bodies) are denied; environment assignments are checked (variables that make git or the shell
run a command have their value checked as a command, those that point git at another
repository are denied); write redirections must target the worktree; then the argv goes
through the rules — wrappers and path rules always, policy rules unless ``allow_commands``
matches.

Paths: relative paths are taken from the worktree (or ``cwd``) and from every directory a
``cd`` earlier in the line may have moved to; existing symlinks are resolved, so the check
reads the file system but never changes it. With ``worktree=None`` the check is lexical and
every absolute path counts as outside.
"""

from __future__ import annotations

import os
import posixpath
import re
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import NoReturn

from adapters.bash_guard.checks import scan, words
from adapters.bash_guard.config import DEFAULT_PROTECTED_PATHS, BashGuardConfig
from adapters.bash_guard.git_rules import check_git, git_globals
from adapters.bash_guard.paths import PATH_RULES
from adapters.bash_guard.policy import POLICY
from adapters.bash_guard.secrets import Secrets, default_homes, home_relative, sweeps
from adapters.bash_guard.split import split_command
from adapters.bash_guard.words import BashParseError, Dyn, Flow, Lit, SimpleCommand, Word
from adapters.bash_guard.wrappers import WRAPPERS, python_rule

__all__ = [
    "BashVerdict",
    "check_bash",
    "check_bash_main",
    "render_verdict",
]

MAX_NESTING = 8
MAX_DIRECTORIES = 32
_DEVICES = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty", "/dev/zero"})
_PIP = re.compile(r"^pip[\d.]+$")
_ABSTRACT_ROOT = "/\0worktree"  # no shell word can name it: a NUL cannot be in one
# git and the shell run these variables' values as commands: the value is checked as one
_COMMAND_ENV = words(
    "PAGER GIT_PAGER MANPAGER EDITOR VISUAL GIT_EDITOR GIT_SEQUENCE_EDITOR GIT_SSH GIT_SSH_COMMAND "
    "GIT_ASKPASS SSH_ASKPASS GIT_EXTERNAL_DIFF GIT_PROXY_COMMAND PROMPT_COMMAND"
)
# these point git at another repository or config, or make the shell load code (PS4 is
# expanded, $(…) included, on every `set -x` trace line)
_FORBIDDEN_ENV = words(
    "GIT_DIR GIT_WORK_TREE GIT_COMMON_DIR GIT_OBJECT_DIRECTORY GIT_ALTERNATE_OBJECT_DIRECTORIES "
    "GIT_CONFIG GIT_CONFIG_GLOBAL GIT_CONFIG_SYSTEM GIT_CONFIG_PARAMETERS GIT_CONFIG_COUNT "
    "GIT_EXEC_PATH GIT_TEMPLATE_DIR GIT_NAMESPACE LD_PRELOAD LD_AUDIT BASH_ENV ENV SHELLOPTS "
    "BASHOPTS PS0 PS1 PS2 PS4"
)
# cd and pushd look a relative directory up in CDPATH (or, with cdable_vars, in a variable of
# that name) before the current directory: named anywhere, such a lookup may leave the worktree
_CD_LOOKUP = re.compile(r"(?<![A-Za-z0-9_])(CDPATH|cdable_vars)(?![A-Za-z0-9_])")
_MAX_PATH = 4096


@dataclass(frozen=True, slots=True)
class BashVerdict:
    """``segment`` is the simple command that was denied (empty when allowed)."""

    allowed: bool
    reason: str
    segment: str = ""


def check_bash(
    command: str,
    *,
    worktree: Path | None,
    config: BashGuardConfig,
    cwd: Path | None = None,
    homes: Sequence[str] | None = None,
) -> BashVerdict:
    """Whether an agent may run ``command`` in ``worktree`` (from ``cwd``, default the worktree).
    ``homes``: the home directories whose credential stores are protected by location (default
    :func:`~adapters.bash_guard.secrets.default_homes`)."""
    try:
        _Guard(config, worktree, cwd, homes).program(command, "")
    except BashParseError as exc:
        return BashVerdict(False, f"cannot parse the command ({exc}); denied", command[:200])
    except _Denied as denied:
        return BashVerdict(False, denied.reason, denied.segment)
    return BashVerdict(True, "allowed")


def render_verdict(verdict: BashVerdict) -> str:
    if verdict.allowed:
        return "allowed"
    where = f"\n  in: {verdict.segment}" if verdict.segment else ""
    return f"denied: {verdict.reason}{where}"


def check_bash_main(argv: Sequence[str], *, config: BashGuardConfig | None = None) -> int:
    """``cpe check-bash [--worktree DIR] -- '<command>'``: 0 allowed, 1 denied, 2 usage."""
    args = list(argv)
    worktree = Path.cwd()
    while args and args[0].startswith("--worktree"):
        flag = args.pop(0)
        value = flag.partition("=")[2] or (args.pop(0) if args else "")
        if not value:
            break
        worktree = Path(value)
    if args[:1] == ["--"]:
        args.pop(0)
    if not args or not "".join(args).strip():
        print("usage: cpe check-bash [--worktree DIR] -- '<command>'", file=sys.stderr)
        return 2
    command = args[0] if len(args) == 1 else shlex.join(args)
    verdict = check_bash(command, worktree=worktree, config=config or BashGuardConfig())
    print(render_verdict(verdict))
    return 0 if verdict.allowed else 1


class _Denied(Exception):  # a verdict carried up the stack, not an error
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.segment = ""


def _fragment(fragment: str) -> re.Pattern[str]:
    body = "".join("[^/\\s'\"]*" if c == "*" else re.escape(c) for c in fragment)
    return re.compile(rf"(?<![\w.-]){body}(?![\w.-])")


class _Guard:
    def __init__(
        self,
        config: BashGuardConfig,
        worktree: Path | None,
        cwd: Path | None,
        homes: Sequence[str] | None = None,
    ) -> None:
        self.config = config
        self.real = worktree is not None
        self.root = os.path.realpath(worktree) if worktree is not None else _ABSTRACT_ROOT
        # every directory the shell may be in; after a cd, the commands that run only if it
        # succeeded (the rest of its && chain) are known to be in `narrowed`
        self.cwds = [self.resolve(self.root, str(cwd)) if cwd is not None else self.root]
        self.narrowed: tuple[int, int, list[str]] | None = None
        self.chains = 0
        self.offset = 0
        self.writable = [self.resolve("/", p) for p in config.writable_paths]
        fragments = DEFAULT_PROTECTED_PATHS + config.protected_paths
        self.protected = [(f, _fragment(f)) for f in fragments]
        homes = default_homes() if homes is None else homes
        self.secrets = Secrets(fragments, homes, self.root if self.real else None)
        self.deny_patterns = [shlex.split(p) for p in config.deny_commands]
        self.allow_patterns = [shlex.split(p) for p in config.allow_commands]
        self.nesting = 0
        self.pushed = False
        self.current: SimpleCommand | None = None

    @property
    def allow_network_get(self) -> bool:
        return self.config.allow_network_get

    def deny(self, reason: str) -> NoReturn:
        raise _Denied(reason)

    # ------------------------------------------------------------------ programs

    def program(self, text: str, what: str) -> None:
        if self.nesting >= MAX_NESTING:
            self.deny(f"{what}: commands nested more than {MAX_NESTING} levels deep")
        commands = split_command(text)
        self.nesting += 1
        outer = self.current, self.offset
        self.offset = self.chains  # chain numbers stay unique across nested programs
        self.chains += 1 + max((c.flow.chain for c in commands), default=-1)
        try:
            for command in commands:
                self.current = command
                try:
                    self.simple(command)
                except _Denied as denied:
                    denied.segment = denied.segment or command.text
                    raise
        finally:
            self.nesting -= 1
            self.current, self.offset = outer

    def simple(self, command: SimpleCommand) -> None:
        texts = [w.skeleton for w in (*command.assignments, *command.words)]
        texts += [r.target.skeleton for r in command.redirects if r.target is not None]
        texts += [r.body for r in command.redirects if r.body is not None]
        for fragment, pattern in self.protected:
            if any(pattern.search(text) for text in texts):
                self.deny(f"touches {fragment}, a protected credential or secret path")
        for assignment in command.assignments:
            self.assignment(assignment)
        reached = [*command.words, *(r.target for r in command.redirects if r.target)]
        reached += [_after_equals(a) for a in command.assignments]
        for word in reached:
            self.reach(word)
        for redirect in command.redirects:
            target = redirect.target.skeleton if redirect.target is not None else ""
            if re.match(r"/dev/(tcp|udp)/", posixpath.normpath(target or ".")):
                self.deny(f"redirection to {target}: Bash opens a network connection")
            if redirect.writes and redirect.target is not None:
                self.write(redirect.target, f"redirection {redirect.op}")
        self.argv(command.words)

    def stdin_script(self) -> str | None:
        for redirect in self.current.redirects if self.current else ():
            if redirect.body is not None and redirect.op in {"<<", "<<-", "<<<"}:
                return redirect.body if redirect.body_static else None
        return None

    # ------------------------------------------------------------------ commands

    def argv(self, words: Sequence[Word]) -> None:
        if not words:
            return
        head = words[0].value
        if head is None or words[0].has_glob():
            self.deny(f"the command word {words[0].display!r} is only known at run time")
        name = posixpath.basename(head)
        argv = list(words)
        if name.startswith("git-") and len(name) > 4:
            argv = [Word.literal("git"), Word.literal(name[4:]), *argv[1:]]
            name = "git"
        if name == "git":
            argv = git_globals(self, argv)
        values = [name, *(w.value for w in argv[1:])]
        for pattern in self.deny_patterns:
            if _matches(pattern, values, head, dynamic=True):
                self.deny(f"matches the configured deny pattern {shlex.join(pattern)!r}")
        if name != "unset" and any(_CD_LOOKUP.search(w.skeleton) for w in argv[1:]):
            self.deny("CDPATH and cdable_vars make cd look for directories outside the worktree")
        if name in {"cd", "pushd", "popd"}:
            self.change_directory(name, argv[1:])
        for rule in (WRAPPERS.get(name) or python_rule(name), PATH_RULES.get(name)):
            if rule is not None:
                rule(self, name, argv[1:])
        if sweeps(name, argv[1:]):
            for word in argv[1:]:
                self.reach(word, sweeping=name)
        if any(_matches(p, values, head, dynamic=False) for p in self.allow_patterns):
            return
        if name == "git":
            check_git(self, name, argv[1:])
        elif (policy := POLICY.get(_PIP.sub("pip", name))) is not None:
            policy(self, name, argv[1:])

    def assignment(self, word: Word) -> None:
        name = re.match(r"[A-Za-z_][A-Za-z0-9_]*", word.skeleton)
        if name is None or "=" not in word.skeleton:
            return
        var = name.group()
        if var == "CDPATH":
            self.deny("setting CDPATH makes cd look for directories outside the worktree")
        if var in _FORBIDDEN_ENV or var.startswith(("GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_")):
            self.deny(f"setting {var} points git or the shell at other files or programs")
        if var in _COMMAND_ENV:
            value = word.value
            if value is None:
                self.deny(f"{var} is set to a command only known at run time")
            self.program(value.partition("=")[2], var)

    def change_directory(self, name: str, args: list[Word]) -> None:
        if name == "popd":
            if not self.pushed:
                self.deny("popd returns to a directory from before this command")
            self.narrowed = None
            return
        operands = scan(args).args
        if (
            len(operands) != 1
            or operands[0].value in {"-", None}
            or (operands[0].value or "+")[0] in "+-"
        ):
            self.deny(f"{name} needs one literal directory inside the worktree")
        target = operands[0]
        self.location(target, f"{name} target")
        value = target.value or ""
        if self.current is not None and self.current.in_loop and ".." in value.split("/"):
            self.deny(f"{name} .. inside a loop can climb out of the worktree")
        moved = [self.resolve(cwd, value) for cwd in self.here()]
        self.cwds = list(dict.fromkeys(self.cwds + moved))
        flow = self.current.flow if self.current is not None else Flow()
        if not flow.piped:  # a cd in a pipeline runs in a subshell and moves nothing
            self.narrowed = (self.offset + flow.chain, flow.step, moved)
        self.pushed |= name == "pushd"
        if len(self.cwds) > MAX_DIRECTORIES:
            self.deny("too many directory changes to follow")

    def here(self) -> list[str]:
        """The directories the current command may run in."""
        if self.narrowed is not None and self.current is not None:
            chain, step, cwds = self.narrowed
            flow = self.current.flow
            if self.offset + flow.chain == chain and flow.step > step and flow.since <= step:
                return cwds
        return self.cwds

    # ------------------------------------------------------------------ paths

    def reach(self, word: Word, sweeping: str | None = None) -> None:
        """Deny a word that reaches a protected location without naming it: through a link,
        ``..``, a glob or (``sweeping``: the command reads whole trees) a directory holding
        one; or that reaches into the main repository's ``.git``."""
        marked = home_relative(word)
        value = word.value
        if marked is not None:
            paths = [posixpath.normpath(marked)]
        elif value is None or "://" in value or len(value) > _MAX_PATH or "\n" in value:
            return
        else:
            value = value.partition("=")[2] if value.startswith("-") else value  # --opt=PATH
            if not value or "\0" in value:
                return
            paths = [self.resolve(cwd, value) for cwd in self.here()]
        for path in paths:
            reason = self.secrets.judge(path, glob=word.has_glob(), sweeping=sweeping)
            if reason is not None:
                self.deny(reason)

    def write(self, word: Word, what: str) -> None:
        self.path(word, what, writing=True)

    def location(self, word: Word, what: str) -> None:
        self.path(word, what, writing=False)

    def path(self, word: Word, what: str, *, writing: bool) -> None:
        value = word.value
        first = word.parts[0] if len(word.parts) == 1 else None
        if isinstance(first, Dyn) and first.raw[:2] in {"<(", ">("}:
            return  # a pipe to a process substitution, whose commands are checked
        if value is None:
            self.deny(f"{what} {word.display!r} is only known at run time")
        if word.starts_unquoted("~"):
            self.deny(f"{what} {value!r} is in a home directory, outside the worktree")
        if writing and (value in _DEVICES or re.fullmatch(r"/dev/fd/\d+", value)):
            return
        if "\0" in value:
            self.deny(f"{what} contains a NUL character")
        if word.has_glob() and any(
            part.startswith(".") and part != ".." and fnmatchcase("..", part)
            for part in value.split("/")
        ):
            self.deny(f"{what} {value!r} is a glob that can match '..'")
        for cwd in self.here():
            resolved = self.resolve(cwd, value)
            if _inside(resolved, self.root):
                inner = resolved[len(self.root) :].split("/")
                if writing and ".git" in inner:
                    self.deny(f"{what} {value!r} is in .git, shared with the repository")
            elif not any(_inside(resolved, w) for w in self.writable):
                self.deny(f"{what} {value!r} is outside the worktree")

    def resolve(self, cwd: str, value: str) -> str:
        joined = posixpath.join(cwd, value)
        if not self.real:
            return posixpath.normpath(joined)
        try:
            return os.path.realpath(joined)
        except (OSError, ValueError) as exc:
            self.deny(f"cannot resolve {value!r}: {exc}")


def _after_equals(word: Word) -> Word:
    """The value of a ``NAME=value`` assignment as a word of its own."""
    parts = list(word.parts)
    first = parts[0] if parts else None
    if isinstance(first, Lit) and "=" in first.text:
        rest = first.text.partition("=")[2]
        return Word((Lit(rest, first.quoted), *parts[1:])) if rest else Word(tuple(parts[1:]))
    return word


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _matches(pattern: list[str], values: list[str | None], head: str, *, dynamic: bool) -> bool:
    if len(values) < len(pattern):
        return False
    if not (fnmatchcase(values[0] or "", pattern[0]) or fnmatchcase(head, pattern[0])):
        return False
    return all(
        dynamic if value is None else fnmatchcase(value, part)
        for value, part in zip(values[1:], pattern[1:], strict=False)
    )
