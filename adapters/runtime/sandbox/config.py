"""``[sandbox]`` in ``supervisor.toml``: how agent commands are confined by the kernel."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["DEFAULT_REGISTRIES", "SANDBOX_HIDDEN", "SandboxConfig"]

# The package registries a command reaches with allow_install (through cpe's proxy).
DEFAULT_REGISTRIES: tuple[str, ...] = (
    "pypi.org",
    "files.pythonhosted.org",
    "registry.npmjs.org",
    "registry.yarnpkg.com",
    "crates.io",
    "index.crates.io",
    "static.crates.io",
    "proxy.golang.org",
    "sum.golang.org",
    "rubygems.org",
    "index.rubygems.org",
    "repo.maven.apache.org",
    "repo1.maven.org",
)
# Hidden from commands in every home besides the guard's credential stores: the agent CLIs'
# own state (session transcripts of every project, logins, settings with hooks).
SANDBOX_HIDDEN: tuple[str, ...] = (".claude", ".codex", ".config/claude")

_HOST = re.compile(
    r"^(\*\.)?[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*(:\d{1,5})?$"
)


class SandboxConfig(BaseModel):
    """``[sandbox]`` in ``supervisor.toml``. The defaults are the safe policy."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    required: bool = Field(
        default=True,
        description="Refuse to start agents (cpe run exits 78, naming the missing protection) "
        "when the sandbox cannot be set up: no bubblewrap, or no namespaces for it. false: "
        "run agents unconfined by the kernel then (each run's effective_policy says so).",
    )
    allow_install: bool = Field(
        default=False,
        description="Let agent commands reach the package registries (registries), through "
        "cpe's filtering proxy; every other host stays unreachable. false: no network at all.",
    )
    registries: tuple[str, ...] = Field(
        default=DEFAULT_REGISTRIES,
        description="The hosts allow_install opens: a name, '*.' for its subdomains, an "
        "optional ':port' (443 otherwise).",
    )
    protected_paths: tuple[str, ...] = Field(
        default=(),
        description="More paths hidden from agent commands, added to the Bash guard's "
        "credential stores: absolute, or under every home with a leading '~/'. "
        "e.g. ['/srv/secrets', '~/.config/acme'].",
    )

    @field_validator("registries")
    @classmethod
    def _hosts(cls, hosts: tuple[str, ...]) -> tuple[str, ...]:
        for host in hosts:
            if not _HOST.match(host):
                raise ValueError(f"{host!r} is not a host name (e.g. pypi.org, *.example.com)")
        return hosts

    @field_validator("protected_paths")
    @classmethod
    def _concrete(cls, paths: tuple[str, ...]) -> tuple[str, ...]:
        for path in paths:
            if not path.startswith(("/", "~/")) or "*" in path:
                raise ValueError(f"{path!r} must be an absolute path or start with ~/ (no '*')")
        return paths
