"""``[bash_guard]`` in ``supervisor.toml``: what an operator may add to the guard's policy."""

from __future__ import annotations

import shlex

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["DEFAULT_PROTECTED_PATHS", "BashGuardConfig"]

DEFAULT_PROTECTED_PATHS: tuple[str, ...] = (
    # ssh, gpg, netrc and git's own credential stores
    ".ssh",
    ".gnupg",
    ".netrc",
    "_netrc",
    ".git-credentials",
    ".config/git/credentials",
    # the agent CLIs' logins: Claude (a login, and the API key an older CLI kept), codex
    ".claude/.credentials.json",
    ".claude.json",
    ".codex/auth.json",
    # package registries: npm, yarn, pip, cargo, gem, docker
    ".npmrc",
    ".yarnrc.yml",
    ".pypirc",
    ".config/pip",
    ".pip/pip.conf",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".gem/credentials",
    ".docker/config.json",
    # code hosts and cloud CLIs
    ".config/gh",
    ".config/hub",
    ".config/glab-cli",
    ".aws",
    ".azure",
    ".kube",
    ".config/gcloud",
    ".oci",
    ".config/doctl",
    ".terraform.d/credentials.tfrc.json",
    # the system's password hashes, and other processes' environments
    "/etc/shadow",
    "/etc/gshadow",
    "/proc/*/environ",
)


class BashGuardConfig(BaseModel):
    """``[bash_guard]`` in ``supervisor.toml``. The defaults are the safe policy."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    deny_commands: tuple[str, ...] = Field(
        default=(),
        description="Extra denied commands, as shell-word prefixes with fnmatch wildcards per "
        "word: 'make deploy*' denies `make deploy-prod`. Matched after wrappers (env, timeout, "
        "xargs…) and git's global options are removed; a word only known at run time matches.",
    )
    allow_commands: tuple[str, ...] = Field(
        default=(),
        description="Commands to allow although the built-in policy denies them, in the same "
        "form: 'gh pr view', 'git fetch'. They never lift the path checks (writes outside the "
        "worktree, credential files) and never beat deny_commands.",
    )
    allow_network_get: bool = Field(
        default=False,
        description="Let curl and wget download (GET and HEAD to http/https URLs, output only "
        "inside the worktree). Uploads are always denied.",
    )
    protected_paths: tuple[str, ...] = Field(
        default=(),
        description="Extra path fragments no command may name, added to the built-in list "
        "(~/.ssh, ~/.netrc, ~/.git-credentials, ~/.claude/.credentials.json, ~/.npmrc, ~/.aws, "
        "/etc/shadow…): '.env', '/srv/secrets'. A fragment matches anywhere in a word at name "
        "boundaries; '*' matches within one path component. Fragments without a leading '/' are "
        "also protected under every home directory, so a command reading a directory that holds "
        "one (grep -r, rg, tar, cp -r, a glob) is denied too.",
    )
    writable_paths: tuple[str, ...] = Field(
        default=(),
        description="Absolute directories outside the worktree that commands may write, "
        "e.g. a shared build cache.",
    )

    @field_validator("deny_commands", "allow_commands")
    @classmethod
    def _patterns_split(cls, patterns: tuple[str, ...]) -> tuple[str, ...]:
        for pattern in patterns:
            try:
                words = shlex.split(pattern)
            except ValueError as exc:
                raise ValueError(f"{pattern!r} is not shell words: {exc}") from exc
            if not words:
                raise ValueError("a command pattern must name at least one word")
        return patterns

    @field_validator("protected_paths")
    @classmethod
    def _fragments_nonempty(cls, fragments: tuple[str, ...]) -> tuple[str, ...]:
        if any(not f.strip() for f in fragments):
            raise ValueError("a protected path must not be empty")
        return fragments

    @field_validator("writable_paths")
    @classmethod
    def _absolute(cls, paths: tuple[str, ...]) -> tuple[str, ...]:
        for path in paths:
            if not path.startswith("/"):
                raise ValueError(f"{path!r} must be an absolute path")
        return paths
