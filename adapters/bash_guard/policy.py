"""Which commands may run at all: the rules a configured ``allow_commands`` pattern lifts.

Denied outright: running as another user (``sudo``, ``su``, ``doas``…), the code host's CLIs
(``gh``, ``hub``, ``glab``), remote shells and raw connections (``ssh``, ``scp``, ``nc``…),
credential managers, cloud and deployment CLIs, host administration, system package
managers, shells whose syntax the guard does not parse, and file servers (``python -m
http.server``). Checked: ``curl``/``wget``
(off unless ``allow_network_get``; then GET/HEAD to http(s) only, no upload options, output
inside the worktree) and package tools (publishing, registry logins, global installs,
``docker push``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fnmatch import fnmatchcase

from adapters.bash_guard.checks import Checks, Rule, scan, words
from adapters.bash_guard.words import Word

__all__ = ["POLICY"]

_DENIED = {
    "runs as another user": "sudo su doas pkexec runuser chroot nsenter unshare setpriv",
    "talks to the code host; the supervisor opens pull requests": "gh hub glab tea lab",
    "opens a connection to another host": "ssh scp sftp mosh ssh-copy-id sshpass autossh rsh "
    "rlogin rcp telnet nc ncat netcat socat ftp lftp tftp http https xh",
    "manages credentials": "ssh-keygen ssh-add ssh-agent gpg gpg2 gpg-agent",
    "changes a cloud or deployment service": "aws gcloud gsutil az rclone s3cmd kubectl helm "
    "terraform tofu pulumi heroku vercel netlify fly flyctl firebase",
    "changes the host system": "systemctl service launchctl crontab at batch shutdown reboot "
    "halt poweroff mount umount iptables nft useradd userdel usermod groupadd passwd chpasswd",
    "is a system package manager; it changes the host": "apt apt-get aptitude dpkg rpm yum dnf "
    "apk pacman zypper brew snap flatpak port emerge",
    "is a shell whose syntax the guard does not parse": "fish csh tcsh pwsh powershell",
    "runs commands built from its input": "parallel",
    "serves files to the network (a listener)": "http.server SimpleHTTPServer",
}
_DENIED_WORDS = {word: reason for reason, names in _DENIED.items() for word in names.split()}


def _denied(checks: Checks, name: str, args: list[Word]) -> None:
    checks.deny(f"{name} {_DENIED_WORDS[name]}")


@dataclass(frozen=True)
class _Client:
    takes_value: frozenset[str]
    writes: frozenset[str]
    uploads: tuple[str, ...]  # fnmatch patterns
    hidden: frozenset[str]  # options that read more options from elsewhere


_CLIENTS = {
    "curl": _Client(
        words(
            "-o --output --output-dir -D --dump-header -c --cookie-jar --trace --trace-ascii "
            "--stderr -d -F -T -X --request -H --header -A -e -u -x -K --config -b -r -m -w -E -C "
            "-U -Y -y -z -t -Q -P --json --upload-file --url --data* --form*"
        ),
        words("-o --output --output-dir -D --dump-header -c --cookie-jar --trace --trace-ascii"),
        ("-d", "-F", "-T", "-Q", "--json", "--upload-file", "--data*", "--form*", "--mail-*"),
        words("-K --config"),
    ),
    "wget": _Client(
        words(
            "-O --output-document -o --output-file -a --append-output -P --directory-prefix -e "
            "--execute -i -t -T -w -Q -U -l -A -R -D -X -I -B --method --post-data --post-file "
            "--body-data --body-file --save-cookies --config"
        ),
        words("-O --output-document -o --output-file -a --append-output -P --directory-prefix"),
        ("--post-data", "--post-file", "--body-data", "--body-file"),
        words("-e --execute --config"),
    ),
}


def _download(checks: Checks, name: str, args: list[Word]) -> None:
    if not checks.allow_network_get:
        checks.deny(f"{name}: network access is off (bash_guard.allow_network_get)")
    client = _CLIENTS[name]
    options = scan(args, client.takes_value)
    for flag, value in options.flags:
        if flag in {"-X", "--request", "--method"}:
            method = (value.value if value else None) or "?"
            if method.upper() not in {"GET", "HEAD"}:
                checks.deny(f"{name} {flag} {method}: only GET and HEAD are allowed")
        if any(fnmatchcase(flag, pattern) for pattern in client.uploads):
            checks.deny(f"{name} {flag} uploads data")
        if flag in client.hidden:
            checks.deny(f"{name} {flag} reads options the guard cannot see")
        if flag in client.writes and value is not None and value.value != "-":
            checks.write(value, f"{name} {flag}")
    for word in [*options.args, *options.values("--url")]:
        url = word.value
        if url is None:
            checks.deny(f"{name}: a URL only known at run time")
        scheme = url.split("://", 1)[0].lower() if "://" in url else "http"
        if scheme not in {"http", "https"}:
            checks.deny(f"{name}: {scheme}:// URLs are not allowed, only http and https")


_REGISTRY = {
    "npm": "publish unpublish deprecate dist-tag owner access adduser add-user login logout "
    "token team org hook profile star unstar",
    "yarn": "publish login logout owner tag npm",
    "pnpm": "publish login logout adduser",
    "bun": "publish",
    "cargo": "publish login logout owner yank",
    "twine": "upload register",
    "gem": "push owner yank signin signout",
    "poetry": "publish",
    "uv": "publish",
    "hatch": "publish",
    "flit": "publish",
    "pdm": "publish",
    "mvn": "deploy release:perform",
}
_OUTSIDE = {  # subcommands that install into the user's or the system's directories
    "cargo": ("install",),
    "go": ("install",),
    "gem": ("install",),
    "yarn": ("global",),
    "poetry": ("self",),
    "uv": ("tool install", "tool upgrade"),
}
_GLOBAL_TOOLS = frozenset({"npm", "pnpm", "yarn", "bun", "pip", "uv"})
_GLOBAL_FLAGS = words("-g --global --location=global --user --system")
_CONFIG_WRITES = {"npm": words("set delete edit"), "pip": words("set unset edit")}


def _packages(checks: Checks, name: str, args: list[Word]) -> None:
    tool = "pip" if re.fullmatch(r"pip[\d.]*", name) else "gradle" if name == "gradlew" else name
    values = [w.value for w in args]
    operands = [v for v in values if v is None or not v.startswith("-")]
    sub = operands[0] if operands else None
    if sub in _REGISTRY.get(tool, "").split():
        checks.deny(f"{name} {sub} publishes to or changes a package registry")
    leading = " ".join(v or "" for v in operands[:2])
    if {sub, leading} & set(_OUTSIDE.get(tool, ())):
        checks.deny(f"{name} {sub} installs outside the worktree")
    if tool in _GLOBAL_TOOLS and any(v in _GLOBAL_FLAGS for v in values):
        checks.deny(f"{name}: a global, user or system install writes outside the worktree")
    if tool == "npm" and sub in {"link", "ln"} and len(operands) == 1:
        checks.deny("npm link without a package links into the global prefix")
    if sub == "config" and operands[1:2] and operands[1] in _CONFIG_WRITES.get(tool, ()):
        checks.deny(f"{name} config {operands[1]} writes configuration outside the worktree")
    if tool in {"docker", "podman", "buildah", "nerdctl"} and any(
        v in {"push", "login"} or (v or "").startswith("--push") for v in values
    ):
        checks.deny(f"{name} push/login sends images or credentials to a registry")
    if tool == "gradle" and any((v or "").startswith("publish") for v in operands):
        checks.deny(f"{name} publish sends artifacts to a repository")
    if tool in {"pip", "uv"}:
        targets = "-t --target --prefix --root --src -d --dest -w --wheel-dir"
        for target in scan(args, words(targets)).values(*targets.split()):
            checks.write(target, f"{name} target directory")


_PACKAGE_TOOLS = (*_REGISTRY, *_OUTSIDE, "pip", "pip3", "docker", "podman", "buildah", "nerdctl")

POLICY: dict[str, Rule] = {
    **dict.fromkeys(_DENIED_WORDS, _denied),
    **dict.fromkeys(_CLIENTS, _download),
    **dict.fromkeys((*_PACKAGE_TOOLS, "gradle", "gradlew"), _packages),
}
