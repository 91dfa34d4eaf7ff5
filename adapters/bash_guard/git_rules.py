"""Git rules of the Bash guard.

An agent works on one branch in one worktree; the supervisor owns everything else. A worktree
shares its object store, refs and ``.git/config`` with the repository, so a git command can
reach far outside the worktree's files. Subcommands are allowlisted; denied are:

- anything that talks to a remote (``push``, ``fetch``, ``pull``, ``clone``, ``ls-remote``…)
  or handles credentials (``credential``);
- leaving the worktree branch: ``switch``, ``checkout <branch>``/``-b``/``--detach`` (files
  are restored with ``checkout -- <paths>``, ``checkout .`` or ``restore``), ``bisect``,
  ``rebase <upstream> <branch>``, ``stash branch``, ``worktree`` (but ``list``);
- writing shared refs or config: creating, renaming or deleting branches and tags,
  ``update-ref``, ``symbolic-ref`` writes, notes, every ``config`` write (the file is shared,
  and keys such as ``core.hooksPath``, ``core.fsmonitor``, ``alias.*``, ``credential.helper``
  or ``url.*.insteadOf`` make later git calls — the supervisor's too — run commands or send
  data elsewhere), remote changes, ``gc``/``prune``/``repack``;
- global options that point git elsewhere (``--git-dir``, ``--work-tree``, ``-C`` outside the
  worktree) or set config for one call (``-c``) beyond a short harmless list.

``reset`` is allowed in every form, ``--hard origin/main`` included: it moves only the
worktree's own branch, and the patch is taken against the default branch, so the result is
different content on the same branch — which is the agent's to decide.
"""

from __future__ import annotations

from fnmatch import fnmatchcase

from adapters.bash_guard.checks import Checks, Rule, scan, words
from adapters.bash_guard.words import Word

__all__ = ["check_git", "git_globals"]

_GLOBAL_FLAGS = words(
    "-p --paginate -P --no-pager --no-replace-objects --literal-pathspecs --glob-pathspecs "
    "--noglob-pathspecs --icase-pathspecs --no-optional-locks --no-lazy-fetch --no-advice "
    "--version --help -h --html-path --man-path --info-path --exec-path"
)
_CONFIG_KEYS = words(
    "user.name user.email color.* advice.* core.quotepath core.autocrlf core.safecrlf "
    "commit.gpgsign tag.gpgsign init.defaultbranch merge.conflictstyle rerere.enabled "
    "diff.renames log.*"
)
_ALLOWED = words(
    "status diff log show add commit rm mv restore grep blame annotate ls-files ls-tree "
    "rev-parse rev-list describe shortlog cat-file diff-tree diff-index diff-files merge-base "
    "name-rev show-ref for-each-ref check-ignore check-attr check-ref-format check-mailmap "
    "hash-object clean reset merge cherry-pick revert am range-diff whatchanged help version var "
    "stripspace interpret-trailers count-objects fsck verify-commit verify-tag cherry show-branch "
    "update-index read-tree write-tree commit-tree mktree merge-file merge-tree rerere mailinfo "
    "mailsplit patch-id get-tar-commit-id column format-patch"
)
_REASONS = {
    "sends commits to a remote; the supervisor opens pull requests": "push send-pack http-push "
    "send-email request-pull",
    "talks to a remote; the supervisor prepares the worktree": "fetch pull clone ls-remote "
    "fetch-pack remote-http remote-https remote-ext remote-fd",
    "reads or stores credentials": "credential credential-cache credential-store",
    "switches branches; agents stay on their worktree branch": "switch",
    "moves HEAD off the worktree branch": "bisect",
    "rewrites refs or objects the repository shares with every worktree": "update-ref replace "
    "filter-branch filter-repo fast-import gc prune repack maintenance pack-refs prune-packed",
    "serves the repository": "daemon instaweb http-backend upload-pack receive-pack upload-archive",
    "talks to another version control system": "svn p4 cvsimport cvsexportcommit cvsserver "
    "archimport",
    "launches an external program": "mergetool difftool gui citool gitk web--browse hook",
}
_DENIED = {sub: reason for reason, subs in _REASONS.items() for sub in subs.split()}


def git_globals(checks: Checks, argv: list[Word]) -> list[Word]:
    """Check git's global options and return ``git <subcommand> …`` without them."""
    i = 1
    while i < len(argv):
        value = argv[i].value
        if value is None:
            checks.deny("a git option or subcommand is only known at run time")
        if not value.startswith("-"):
            break
        i += 1
        if value.startswith(("-C", "-c")):
            if len(value) == 2 and i >= len(argv):
                checks.deny(f"git {value} without a value")
            arg = Word.literal(value[2:]) if len(value) > 2 else argv[i]
            i += 1 if len(value) == 2 else 0
            if value.startswith("-C"):
                checks.location(arg, "git -C directory")
            else:
                _config_override(checks, arg)
        elif value.startswith(("--git-dir", "--work-tree", "--namespace", "--bare", "--super")):
            checks.deny(f"git {value} points git at another repository or work tree")
        elif value.startswith(("--exec-path=", "--config-env")):
            checks.deny(f"git {value} makes git run other programs or read hidden config")
        elif value not in _GLOBAL_FLAGS and not value.startswith("--list-cmds="):
            checks.deny(f"unknown git option {value!r}")
    return [argv[0], *argv[i:]]


def _config_override(checks: Checks, arg: Word) -> None:
    setting = arg.value
    if setting is None:
        checks.deny("git -c with a setting only known at run time")
    key = setting.partition("=")[0].lower()
    if not any(fnmatchcase(key, pattern) for pattern in _CONFIG_KEYS):
        checks.deny(
            f"git -c {key}: only harmless keys may be set for one call (user.name, "
            "user.email, color.*, advice.*…); others can run commands or send data elsewhere"
        )


def check_git(checks: Checks, name: str, args: list[Word]) -> None:
    """``args`` start at the subcommand: :func:`git_globals` removed the global options."""
    if not args:
        return
    sub = args[0].value
    if sub is None:
        checks.deny("the git subcommand is only known at run time")
    _outputs(checks, sub, args[1:])
    if sub in _DENIED:
        checks.deny(f"git {sub} {_DENIED[sub]}")
    rule = _RULES.get(sub)
    if rule is not None:
        rule(checks, sub, args[1:])
    elif sub not in _ALLOWED:
        checks.deny(f"git {sub} is not a git command the guard knows to be safe")


def _outputs(checks: Checks, sub: str, args: list[Word]) -> None:
    """``--output``, ``format-patch -o`` and ``archive -o`` write files; ``grep -O`` runs one."""
    for k, word in enumerate(args):
        value = word.value or ""
        flag, eq, attached = value.partition("=")
        separate = flag in {"--output", "--output-directory"} or (
            flag == "-o" and sub in {"format-patch", "archive"}
        )
        if flag in {"--output", "--output-directory"} and eq:
            checks.write(Word.literal(attached), f"git {sub} {flag}")
        elif separate and not eq and k + 1 < len(args):
            checks.write(args[k + 1], f"git {sub} {flag}")
        elif flag in {"-O", "--open-files-in-pager"}:
            checks.deny(f"git {sub} {flag} runs a pager program")


def _checkout(checks: Checks, sub: str, args: list[Word]) -> None:
    split = next((k for k, w in enumerate(args) if w.value == "--"), len(args))
    options = scan(args[:split], words("-b -B --orphan --conflict"))
    if options.has("-b", "-B", "--orphan", "--detach", "-d"):
        checks.deny("git checkout -b/-B/--orphan/--detach leaves the worktree branch")
    operands = [w.value for w in options.args]
    if split < len(args) and len(operands) <= 1:
        return  # "checkout [<tree-ish>] -- <paths>" restores files and stays on the branch
    if split == len(args) and all(v == "." for v in operands):
        return
    checks.deny(
        "git checkout <name> can switch branches; restore files with "
        "`git checkout -- <paths>` or `git restore <paths>`"
    )


def _list_only(takes_value: str, writes: str, listing: str, what: str) -> Rule:
    """``git branch``/``git tag``: listing is fine, any write is denied."""
    takes, write_flags, list_flags = words(takes_value), words(writes), words(listing)

    def rule(checks: Checks, sub: str, args: list[Word]) -> None:
        options = scan(args, takes)
        if any(flag in write_flags for flag, _ in options.flags) or (
            options.args and not options.has(*list_flags)
        ):
            checks.deny(f"git {sub} may only list: {what} are refs shared with the repository")

    return rule


_branch = _list_only(
    "--contains --no-contains --merged --no-merged --points-at --format --sort -u "
    "--set-upstream-to --abbrev --color --column",
    "-d -D --delete -m -M --move -c -C --copy -f --force -u --set-upstream-to --unset-upstream "
    "--edit-description -t --track --no-track --create-reflog",
    "-l --list -a --all -r --remotes --contains --no-contains --merged --no-merged --points-at",
    "branches",
)
_tag = _list_only(
    "-m --message -F --file -u --local-user --contains --no-contains --points-at --sort --format",
    "-a --annotate -s --sign -u --local-user -f --force -d --delete -m --message -F --file -e "
    "--edit",
    "-l --list --contains --no-contains --points-at --merged --no-merged",
    "tags",
)


def _remote(checks: Checks, sub: str, args: list[Word]) -> None:
    operands = scan(args).args
    if operands and operands[0].value != "get-url":
        checks.deny("git remote may only list: changing or querying remotes is the supervisor's")


def _config(checks: Checks, sub: str, args: list[Word]) -> None:
    options = scan(args, words("-f --file --blob --type --default --comment"))
    operands = [w.value for w in options.args]
    if operands[:1] in (["get"], ["list"]):
        return
    writes = words("--unset --unset-all --add --replace-all --rename-section --remove-section -e")
    reads = words("--get --get-all --get-regexp --get-urlmatch -l --list --get-color")
    flags = {flag for flag, _ in options.flags}
    if (
        operands[:1] in (["set"], ["unset"], ["rename-section"], ["remove-section"], ["edit"])
        or flags & (writes | {"--edit"})
        or (len(operands) >= 2 and not flags & (reads | {"--get-colorbool"}))
    ):
        checks.deny(
            "git config writes change the configuration the worktree shares with the "
            "repository (keys like credential.helper, core.hooksPath or url.* redirect pushes "
            "or run commands); use `git -c user.name=… commit` for one call"
        )


def _symbolic_ref(checks: Checks, sub: str, args: list[Word]) -> None:
    options = scan(args, words("-m"))
    if options.has("-d", "--delete") or len(options.args) > 1:
        checks.deny("git symbolic-ref writes move HEAD off the worktree branch")


def _rebase(checks: Checks, sub: str, args: list[Word]) -> None:
    options = scan(args, words("--onto -x --exec -s --strategy -X --strategy-option -C"))
    for command in options.values("-x", "--exec"):
        text = command.value
        if text is None:
            checks.deny("git rebase --exec of a command only known at run time")
        checks.program(text, "git rebase --exec")
    if len(options.args) > 1:
        checks.deny("git rebase <upstream> <branch> checks out <branch>, leaving the worktree's")


def _first_is(args: list[Word], allowed: set[str | None]) -> bool:
    operands = scan(args).args
    return (operands[0].value if operands else None) in allowed


def _stash(checks: Checks, sub: str, args: list[Word]) -> None:
    if _first_is(args, {"branch"}):
        checks.deny("git stash branch creates and switches to another branch")


def _worktree(checks: Checks, sub: str, args: list[Word]) -> None:
    if not _first_is(args, {"list"}):
        checks.deny("git worktree changes the repository's worktrees; only `list` is allowed")


def _notes(checks: Checks, sub: str, args: list[Word]) -> None:
    if not _first_is(args, {None, "list", "show"}):
        checks.deny("git notes writes notes refs shared with the repository")


def _reflog(checks: Checks, sub: str, args: list[Word]) -> None:
    if _first_is(args, {"expire", "delete"}):
        checks.deny("git reflog expire/delete rewrites history the repository shares")


def _submodule(checks: Checks, sub: str, args: list[Word]) -> None:
    operands = scan(args, stop=True).args
    action = operands[0].value if operands else None
    if action == "foreach":
        inner = scan(operands[1:], stop=True).args
        texts = [w.value for w in inner]
        if None in texts:
            checks.deny("git submodule foreach of a command only known at run time")
        checks.program(" ".join(t for t in texts if t is not None), "git submodule foreach")
    elif action not in {None, "status", "summary"}:
        checks.deny(f"git submodule {action} fetches or changes shared configuration")


def _apply(checks: Checks, sub: str, args: list[Word]) -> None:
    if any(w.value == "--unsafe-paths" for w in args):
        checks.deny("git apply --unsafe-paths writes outside the worktree")


def _archive(checks: Checks, sub: str, args: list[Word]) -> None:
    if any((w.value or "").startswith("--remote") for w in args):
        checks.deny("git archive --remote talks to a remote")


def _init(checks: Checks, sub: str, args: list[Word]) -> None:
    options = scan(args, words("--separate-git-dir --template -b --initial-branch"))
    for directory in [*options.args, *options.values("--separate-git-dir")]:
        checks.write(directory, "git init directory")


_RULES: dict[str, Rule] = {
    "checkout": _checkout,
    "branch": _branch,
    "tag": _tag,
    "remote": _remote,
    "config": _config,
    "symbolic-ref": _symbolic_ref,
    "rebase": _rebase,
    "stash": _stash,
    "worktree": _worktree,
    "notes": _notes,
    "reflog": _reflog,
    "submodule": _submodule,
    "apply": _apply,
    "archive": _archive,
    "init": _init,
}
