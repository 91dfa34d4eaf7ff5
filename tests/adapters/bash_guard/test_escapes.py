"""The Bash guard against the escapes of issue 16, in a real linked worktree with a home full of
credentials: ``cd`` through ``CDPATH`` and its kin, credential stores read by name, through a
directory that holds them, a glob, a link or the main repository's ``.git``. Everyday commands
stay allowed. Every command is only checked, never run (the OS sandbox's tests run them).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from adapters.bash_guard import BashGuardConfig, check_bash
from adapters.bash_guard.files import check_file_tool
from adapters.bash_guard.secrets import default_homes
from tests.support.git import git_raw, make_repo

p = pytest.param
DEFAULT = BashGuardConfig()
CREDENTIALS = (
    ".claude/.credentials.json",
    ".claude.json",
    ".codex/auth.json",
    ".npmrc",
    ".config/pip/pip.conf",
    ".config/gh/hosts.yml",
    ".cargo/credentials.toml",
    ".docker/config.json",
    ".aws/credentials",
    ".git-credentials",
    ".netrc",
)


class Place:
    """A repository with a linked worktree (where the agent runs) and a home with credentials."""

    def __init__(self, tmp_path: Path) -> None:
        self.repo = make_repo(tmp_path / "repo", {"README.md": "demo\n", "src/a.py": "x = 1\n"})
        self.worktree = self.repo / ".worktrees" / "cpe" / "1-x"
        git_raw(self.repo, "worktree", "add", "-q", "-B", "cpe/1-x", str(self.worktree), "main")
        self.home = tmp_path / "home"
        for name in CREDENTIALS:
            (self.home / name).parent.mkdir(parents=True, exist_ok=True)
            (self.home / name).write_text("secret\n")
        self.outside = tmp_path / "outside"
        (self.outside / "victim" / "specs").mkdir(parents=True)

    def check(self, command: str) -> tuple[bool, str]:
        text = command.format(home=self.home, repo=self.repo, outside=self.outside)
        verdict = check_bash(
            text, worktree=self.worktree, config=DEFAULT, homes=[str(self.home), "/home/*"]
        )
        return verdict.allowed, verdict.reason


@pytest.fixture
def place(tmp_path: Path) -> Place:
    return Place(tmp_path)


# ---------------------------------------------------------------------------- cd lookups

CD_LOOKUPS = [
    p("CDPATH={outside} cd victim && rm -rf specs", id="cdpath-prefix"),
    p("export CDPATH={outside}; cd victim && rm -rf specs", id="cdpath-export"),
    p("CDPATH={outside} pushd victim && rm -rf specs", id="cdpath-pushd"),
    p("CDPATH={outside}; cd victim; rm -rf specs", id="cdpath-plain-assignment"),
    p("declare -x CDPATH=..:{outside}; cd victim && rm -rf specs", id="cdpath-declare"),
    p("env CDPATH={outside} bash -c 'cd victim && rm -rf specs'", id="cdpath-env"),
    p("bash -c 'export CDPATH={outside}; cd victim && rm -rf specs'", id="cdpath-in-bash-c"),
    p("read -r CDPATH <<< {outside}; cd victim && rm -rf specs", id="cdpath-read"),
    p("printf -v CDPATH %s {outside}; cd victim && rm -rf specs", id="cdpath-printf-v"),
    p("shopt -s cdable_vars; victim={outside}/victim; cd victim && rm -rf specs", id="cdable"),
    p("bash -O cdable_vars -c 'cd victim && rm -rf specs'", id="cdable-bash-O"),
]


@pytest.mark.parametrize("command", CD_LOOKUPS)
def test_a_cd_that_looks_its_directory_up_elsewhere_is_denied(place: Place, command: str) -> None:
    allowed, reason = place.check(command)
    assert not allowed
    assert "CDPATH" in reason


@pytest.mark.parametrize(
    "command",
    [
        p("pushd .. && rm -rf x", id="pushd-up"),
        p("pushd src && popd && rm ../x", id="popd-back"),
        p("pushd {outside} && rm -rf victim", id="pushd-outside"),
        p("pushd +1 && rm -rf specs", id="pushd-rotate"),
    ],
)
def test_pushd_and_popd_are_followed_like_cd(place: Place, command: str) -> None:
    allowed, reason = place.check(command)
    assert not allowed
    assert "outside the worktree" in reason or "one literal directory" in reason


# ---------------------------------------------------------------------------- credentials

READS = [
    p("cat ~/.claude/.credentials.json", ".claude/.credentials.json", id="claude-login"),
    p("cat $HOME/.claude/.credentials.json", ".claude/.credentials.json", id="claude-home-var"),
    p("jq .claudeAiOauth {home}/.claude/.credentials.json", ".claude/", id="claude-absolute"),
    p("cat ~/.claude.json", ".claude.json", id="claude-json"),
    p("cat ~/.codex/auth.json", ".codex/auth.json", id="codex-login"),
    p("cat ~/.npmrc", ".npmrc", id="npmrc"),
    p("npm config get //r.example/:_authToken --userconfig ~/.npmrc", ".npmrc", id="npmrc-opt"),
    p("cat ~/.config/pip/pip.conf", ".config/pip", id="pip-conf"),
    p("cat ~/.cargo/credentials.toml", ".cargo/credentials", id="cargo"),
    p("base64 < ~/.docker/config.json", ".docker/config.json", id="docker-redirect"),
    p("cat /etc/shadow", "/etc/shadow", id="shadow"),
    p("head -1 /etc/gshadow", "/etc/gshadow", id="gshadow"),
    p("grep -r token ~/.config", "reads everything in ~/.config", id="grep-r-config"),
    p("grep -R -n secret {home}", "reads everything in", id="grep-R-home"),
    p("grep --recursive key ~", "reads everything in ~", id="grep-recursive-tilde"),
    p("rg -uu token ~/.cargo", "reads everything", id="rg-cargo"),
    p("find ~ -name '*.json' -exec cat {{}} +", "reads everything in ~", id="find-home"),
    p("tar czf creds.tgz ~/.aws", ".aws", id="tar-aws"),
    p("tar czf home.tgz ~", "reads everything in ~", id="tar-home"),
    p("cp -r ~/.config cfg", "reads everything in ~/.config", id="cp-r-config"),
    p("zip -r home.zip {home}", "reads everything", id="zip-home"),
    p("grep -r password /", "reads everything in /", id="grep-root"),
    p("cat ~/.config/*/hosts.yml", "a glob in ~/.config", id="glob-config"),
    p("cat /etc/*shadow", "a glob in /etc", id="glob-etc"),
    p("cat {home}/.*/credentials*", "a glob in", id="glob-dot-dirs"),
    p("cat ../../../.git/config", "main repository's .git", id="main-git-dotdot"),
    p("cat {repo}/.git/config", "main repository's .git", id="main-git-absolute"),
    p("git config -f ../../../.git/config --list", "main repository's .git", id="main-git-f"),
    p("cat ../../../.git/refs/heads/main", "main repository's .git", id="main-git-refs"),
    p("grep -rn url ../../..", "main repository's .git", id="grep-r-repository"),
    p("cat ../../../.git/*", "main repository's .git", id="main-git-glob"),
]


@pytest.mark.parametrize(("command", "reason"), READS)
def test_a_credential_is_denied_however_it_is_reached(
    place: Place, command: str, reason: str
) -> None:
    allowed, said = place.check(command)
    assert not allowed
    assert reason in said


def test_a_link_that_points_at_a_credential_is_followed(place: Place) -> None:
    os.symlink(place.home / ".npmrc", place.worktree / "settings.txt")
    os.symlink(place.home / ".config", place.worktree / "cfg")
    os.symlink(place.repo / ".git", place.worktree / "g")
    assert ".npmrc" in place.check("cat settings.txt")[1]
    assert ".config/gh" in place.check("cat cfg/gh/hosts.yml")[1]
    assert "reads everything in" in place.check("grep -r token cfg")[1]
    assert "main repository's .git" in place.check("cat g/config")[1]


def test_the_worktrees_own_git_files_stay_readable(place: Place) -> None:
    gitdir = place.repo / ".git" / "worktrees" / "1-x"
    assert place.check(f"cat {gitdir}/HEAD && cat .git")[0]


# ---------------------------------------------------------------------------- a repository's config

# A repository's .git/config can carry a remote's token or an http.extraheader. Whatever the
# agent runs in, a path that resolves to one is denied: from the linked worktree (the main
# repository's, or a .git/config that is not there), from the main checkout the planner and the
# reviewer run in (no gitdir file tells the guard where the main .git is), from a directory the
# guard knows no repository of.
REPOSITORY_CONFIG = [
    p("worktree", "cat ../../../.git/config", id="worktree-cat"),
    p("worktree", "head -5 ../../../.git/config", id="worktree-head"),
    p("worktree", "grep url ../../../.git/config", id="worktree-grep"),
    p("worktree", "head -5 ../../.git/config", id="worktree-head-not-there"),
    p("worktree", "cat .git/config", id="worktree-own-dotgit-file"),
    p("shallow", "head -5 ../../.git/config", id="shallow-worktree-head"),
    p("shallow", "cat {repo}/.git/config", id="shallow-worktree-absolute"),
    p("checkout", "cat .git/config", id="checkout-cat"),
    p("checkout", "head -5 .git/config", id="checkout-head"),
    p("checkout", "grep url .git/config", id="checkout-grep"),
    p("checkout", "cat {repo}/.git/config", id="checkout-absolute"),
    p("checkout", "cat src/../.git/./config", id="checkout-dotdot"),
    p("checkout", "cd src && cat ../.git/config", id="checkout-after-cd"),
    p("checkout", "cat .g*/conf*", id="checkout-glob"),
    p("checkout", "grep -rn url .git", id="checkout-grep-r"),
    p("checkout", "find .git -name config", id="checkout-find"),
    p("checkout", "cat .git/config.worktree .git/credentials", id="checkout-kin"),
    p("checkout", "cat .git/modules/vendor/lib/config", id="checkout-submodule"),
    p("checkout", "cat .git/worktrees/1-x/config.worktree", id="checkout-worktree-config"),
    p("elsewhere", "cat ../repo/.git/config", id="elsewhere-relative"),
    p("elsewhere", "cat {repo}/.git/config", id="elsewhere-absolute"),
]


def _check_in(place: Place, where: str, command: str) -> tuple[bool, str]:
    text = command.format(home=place.home, repo=place.repo, outside=place.outside)
    if where == "worktree":
        root = place.worktree
    elif where == "shallow":  # a configured worktree directory one level down
        root = place.repo / "wt" / "1-x"
        if not root.exists():
            git_raw(place.repo, "worktree", "add", "-q", "-B", "wt-1", str(root), "main")
    elif where == "checkout":
        root = place.repo
    else:
        root = place.outside
    verdict = check_bash(text, worktree=root, config=DEFAULT, homes=[str(place.home)])
    return verdict.allowed, verdict.reason


@pytest.mark.parametrize(("where", "command"), REPOSITORY_CONFIG)
def test_a_repositorys_config_is_denied_however_the_path_reaches_it(
    place: Place, where: str, command: str
) -> None:
    allowed, reason = _check_in(place, where, command)
    assert not allowed
    assert "can hold credentials" in reason


def test_a_link_to_a_repositorys_config_is_followed(place: Place) -> None:
    os.symlink(place.repo / ".git" / "config", place.repo / "settings.ini")
    allowed, reason = _check_in(place, "checkout", "cat settings.ini")
    assert not allowed
    assert f"{place.repo}/.git/config is in a git directory" in reason


def test_the_file_tools_may_not_read_a_repositorys_config(place: Place) -> None:
    verdict = check_file_tool(
        "Read", {"file_path": ".git/config"}, worktree=place.repo, config=DEFAULT, homes=[]
    )
    assert not verdict.allowed
    assert "can hold credentials" in verdict.reason


@pytest.mark.parametrize(
    "command",
    [
        p("git status --short && git diff --stat && git log --oneline -5", id="git-reads"),
        p("git rev-parse --git-dir --git-common-dir && git config --get user.name", id="git-meta"),
        p("git add -A && git commit -qm wip", id="git-commit"),
        p("cat .git/HEAD && ls .git && ls .git/refs", id="git-metadata"),
        p("cat src/config && cat config/settings.py", id="files-named-config"),
        p("grep -rn 'def ' src && rg -n TODO", id="searches"),
    ],
)
@pytest.mark.parametrize("where", ["worktree", "checkout"])
def test_git_work_and_other_configs_stay_allowed(place: Place, where: str, command: str) -> None:
    allowed, reason = _check_in(place, where, command)
    assert allowed, reason


def test_a_linked_worktrees_own_dotgit_file_stays_readable(place: Place) -> None:
    # it names the worktree's gitdir in the main repository: a path, no secret
    assert _check_in(place, "worktree", "cat .git && head -1 .git && grep gitdir .git")[0]


def test_the_guard_protects_the_users_own_home_by_default() -> None:
    homes = default_homes()
    assert os.path.expanduser("~") in homes
    assert "/root" in homes
    assert "/home/*" in homes


# ---------------------------------------------------------------------------- listeners


@pytest.mark.parametrize(
    "command",
    [
        p("python3 -m http.server", id="http-server"),
        p("python -m http.server 8000 --bind 0.0.0.0 &", id="http-server-bound"),
        p("timeout 60 python3 -m SimpleHTTPServer", id="python2-server"),
    ],
)
def test_a_file_server_is_denied(place: Place, command: str) -> None:
    allowed, reason = place.check(command)
    assert not allowed
    assert "serves files" in reason


# ---------------------------------------------------------------------------- everyday

EVERYDAY = [
    "python -m pytest -q",
    "python3 -m unittest -v",
    "uv run pytest -x",
    "npm test",
    "npm run build",
    "make test",
    "bash scripts/check.sh",
    "./scripts/check.sh --fast",
    "git status --short",
    "git diff HEAD~1 --stat",
    "git log --oneline -5",
    "git show HEAD:README.md",
    "git grep -n TODO",
    "git rev-parse --git-dir --show-toplevel",
    "git stash list",
    "git add -A && git commit -qm wip",
    "grep -rn 'def ' src",
    "grep -r token .",
    "rg -n TODO",
    "find . -name '*.py' | xargs wc -l",
    "ls -la ~ && ls ~/.config",
    "cat /etc/hosts /etc/os-release",
    "cat .git",
    "cat README.md | head -20",
    "pushd src && dirs && popd",
    "cd src && ls .. && cd ..",
    "unset CDPATH && cd src && pwd",
    "tar czf out.tgz src && cp -r src src2",
    "diff -ru src src2",
    'echo "$HOME" && env | sort',
    "pip install -e .",
    "python3 -c 'import sys; print(sys.version)'",
]


@pytest.mark.parametrize("command", EVERYDAY)
def test_everyday_commands_stay_allowed(place: Place, command: str) -> None:
    allowed, reason = place.check(command)
    assert allowed, reason
