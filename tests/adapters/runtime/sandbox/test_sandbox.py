"""The OS sandbox with the real bubblewrap: commands the Bash guard would let through (programs
it cannot read) run in it and achieve nothing outside their worktree."""

from __future__ import annotations

import os
import shlex
import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from adapters.runtime.sandbox import RunSandbox, SandboxConfig
from adapters.runtime.sandbox.proxy import RegistryProxy, allowed
from adapters.runtime.sandbox.runs import sandbox_record, sweep
from adapters.runtime.workspace.patches import extract_patch
from tests.adapters.runtime.sandbox.sandbox_place import (
    CREDENTIAL,
    SECRET,
    Place,
    host_listener,
    place_root,
)
from tests.e2e.running import wait_for
from tests.support.git import git_raw

WAIT = 60.0


@pytest.fixture
def place() -> Iterator[Place]:
    with place_root() as root:
        yield Place(root)


@pytest.fixture
def sandbox(place: Place) -> RunSandbox:
    return place.open(home=str(place.state_dir / "runs" / "implementor-1" / "home"))


def run(sandbox: RunSandbox, command: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``command`` as the claude CLI would run the hook's rewrite of it: through bash."""
    environ = {"PATH": os.environ["PATH"], "HOME": "/nonexistent", **env}
    wrapped = sandbox.wrap_command(command, str(sandbox.worktree))
    return subprocess.run(
        ["bash", "-c", wrapped],
        env=environ,
        capture_output=True,
        text=True,
        timeout=WAIT,
        check=False,
        cwd=sandbox.worktree,
    )


def py(code: str) -> str:
    return "python3 -c " + shlex.quote(code)


def test_a_command_writes_its_worktree_and_nothing_outside(
    place: Place, sandbox: RunSandbox
) -> None:
    escape = f"open({str(place.outside / 'escaped.txt')!r}, 'w').write('x')"
    done = run(sandbox, f"echo made > made.txt && {py(escape)}")
    assert (place.worktree / "made.txt").read_text() == "made\n"
    assert "Read-only file system" in done.stderr
    assert place.escaped() == []


def test_a_cdpath_deletion_outside_deletes_nothing(place: Place, sandbox: RunSandbox) -> None:
    (place.worktree / "p.sh").write_text(f"CDPATH={place.outside}\ncd victim && rm -rf specs\n")
    done = run(sandbox, "bash p.sh")
    assert "Read-only file system" in done.stderr
    assert place.escaped() == []


def test_credential_stores_are_hidden(place: Place, sandbox: RunSandbox) -> None:
    reads = [str(place.home / name) for name in (CREDENTIAL, ".npmrc", ".aws/credentials")]
    code = (
        "import sys\nfor p in sys.argv[1:]:\n    try: print(repr(open(p).read()))\n"
        "    except OSError as e: print(type(e).__name__)"
    )
    done = run(sandbox, f"{py(code)} {' '.join(reads)}; cat /etc/shadow; echo shadow=$?")
    assert SECRET not in done.stdout + done.stderr
    # a hidden directory is empty; a hidden file cannot be opened
    assert done.stdout.splitlines()[:3] == [
        "FileNotFoundError",
        "PermissionError",
        "FileNotFoundError",
    ]
    assert "root:" not in done.stdout


def test_a_push_from_a_program_reaches_nothing(place: Place, sandbox: RunSandbox) -> None:
    push = f"import os; os.system('git push {place.bare} HEAD:refs/heads/stolen')"
    done = run(sandbox, py(push))
    assert "Read-only file system" in done.stderr or "unable" in done.stderr
    assert place.escaped() == []


def test_no_network_reaches_the_host(place: Place, sandbox: RunSandbox) -> None:
    with host_listener() as (port, received):
        code = (
            "import socket\ntry:\n"
            f"    socket.create_connection(('127.0.0.1', {port}), 5).sendall(b'x')\n"
            "    print('reached')\nexcept OSError as e: print('refused', e)"
        )
        done = run(sandbox, py(code))
    assert done.stdout.startswith("refused"), done
    assert received == []


def test_a_listener_in_the_sandbox_cannot_be_reached_from_the_host(
    place: Place, sandbox: RunSandbox
) -> None:
    """The server holds until the test has tried it, which the test says in a file."""
    port = 18000 + os.getpid() % 1000
    marker, probed = place.worktree / "serving", place.worktree / "probed"
    serve = (
        "import http.server, threading, pathlib, time\n"
        f"s = http.server.HTTPServer(('0.0.0.0', {port}), http.server.SimpleHTTPRequestHandler)\n"
        "threading.Thread(target=s.serve_forever, daemon=True).start()\n"
        f"pathlib.Path({str(marker)!r}).write_text('up')\n"
        "deadline = time.monotonic() + 60\n"
        f"while not pathlib.Path({str(probed)!r}).exists() and time.monotonic() < deadline:\n"
        "    time.sleep(0.05)\n"
    )
    wrapped = sandbox.wrap_command(py(serve), sandbox.worktree)
    server = subprocess.Popen(["bash", "-c", wrapped], env={"PATH": os.environ["PATH"]})
    try:
        assert wait_for(marker.exists, WAIT)
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), 5)
    finally:
        probed.write_text("done")
        server.wait(timeout=WAIT)


def test_git_commits_on_its_branch_and_the_repository_keeps_its_refs(
    place: Place, sandbox: RunSandbox
) -> None:
    main = place.main_ref()
    commit = (
        "echo 'y = 2' > src/b.py && git add -A && git commit -qm wip && "
        "git update-ref refs/heads/main HEAD && echo x > $(git rev-parse --git-common-dir)/config"
    )
    done = run(sandbox, commit)
    assert "Read-only file system" in done.stderr  # the shared config
    assert place.main_ref() == main  # main moved only in the sandbox's private refs
    assert "cpe/1-x" in git_raw(place.repo, "branch", "--list")
    assert git_raw(place.repo, "rev-parse", "cpe/1-x").strip() == main
    patch = extract_patch(place.worktree, "main")
    assert "src/b.py" in patch
    assert "y = 2" in patch


def test_a_sandbox_opens_while_another_session_is_writing_a_branch(place: Place) -> None:
    """Two sessions start at once: one creates its branch (git holds ``<ref>.lock`` while it
    writes) while the other's sandbox copies the refs. The copy skips the lock and any ref that
    vanishes under it, instead of failing the run (it did, in CI)."""
    common = Path(git_raw(place.repo, "rev-parse", "--git-common-dir").strip())
    common = common if common.is_absolute() else place.repo / common
    lock = common / "refs" / "heads" / "cpe" / "2-other.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text(place.main_ref() + "\n")
    try:
        sandbox = place.open()
    finally:
        lock.unlink()
    assert sandbox.git is not None
    private = Path(sandbox.git.scratch) / "refs" / "heads"
    assert (private / "main").read_text().strip() == place.main_ref()
    assert not (private / "cpe" / "2-other.lock").exists()
    assert run(sandbox, "git rev-parse HEAD").returncode == 0


def test_the_repository_objects_and_pointers_stay_as_they_are(
    place: Place, sandbox: RunSandbox
) -> None:
    common = place.repo / ".git"
    gitdir = common / "worktrees" / "1-x"
    done = run(
        sandbox,
        f"rm -rf {common}/objects/*; echo gitdir: /tmp/evil > .git; "
        f"echo /tmp/evil > {gitdir}/commondir; ls {place.state_dir}",
    )
    assert done.stderr.count("Read-only file system") >= 3
    assert git_raw(place.repo, "fsck", "--no-dangling").strip() == ""
    assert (place.worktree / ".git").read_text().startswith(f"gitdir: {gitdir}")
    # the state directory (journal, other runs) is hidden: only the run's own /tmp and home
    # show there (the mount points of its private directories)
    assert set(done.stdout.split()) <= {"sandbox", "runs"}


def test_model_credentials_leave_the_environment_and_other_processes_are_invisible(
    sandbox: RunSandbox,
) -> None:
    done = run(sandbox, "env; ls /proc | grep -c '^[0-9]'", ANTHROPIC_API_KEY="sk-ant-x")
    assert "ANTHROPIC_API_KEY" not in done.stdout
    assert int(done.stdout.splitlines()[-1]) < 10  # the sandbox's own processes only


def test_tmp_is_private_to_the_run(place: Place, sandbox: RunSandbox) -> None:
    run(sandbox, "echo x > /tmp/cpe-sandbox-probe && echo y > $TMPDIR/two")
    assert not Path("/tmp/cpe-sandbox-probe").exists()
    assert (Path(sandbox.private) / "tmp" / "two").read_text() == "y\n"
    sandbox.release()
    assert not Path(sandbox.private).exists()


def test_cpes_own_installation_under_tmp_runs_read_only_and_the_rest_of_tmp_stays_hidden(
    place: Place, tmp_path: Path
) -> None:
    """A checkout and virtual environment under /tmp (a CI clone) stay visible in the sandbox:
    the programs cpe runs there (the proxy forwarder, a CLI on cpe's interpreter) start."""
    install = tmp_path / "checkout"
    (install / "bin").mkdir(parents=True)
    tool = install / "bin" / "tool"
    tool.write_text("#!/bin/sh\necho tool ran\n")
    tool.chmod(0o755)
    beside = tmp_path / "beside.txt"
    beside.write_text("not for the sandbox\n")
    assert str(tmp_path).startswith("/tmp/")
    found = place.sandbox().model_copy(update={"installation": (str(install),)})
    sandbox = place.open(found)
    done = run(sandbox, f"{tool}; cat {beside}; touch {install}/written")
    assert "tool ran" in done.stdout
    assert "not for the sandbox" not in done.stdout
    assert not (install / "written").exists()


def test_a_cd_holds_for_the_next_command_as_in_the_cli_but_only_inside_the_worktree(
    place: Place, sandbox: RunSandbox
) -> None:
    """The claude CLI evaluates the line in its shell, then keeps the directory it ended in."""
    lines = [
        (sandbox.wrap_command("cd src && exit 3", sandbox.worktree), "3", "src"),
        (sandbox.wrap_command(f"cd {place.outside}", sandbox.worktree), "0", ""),
    ]
    for wrapped, status, where in lines:
        shell = subprocess.run(
            ["bash", "-c", f"{wrapped}\necho $?; pwd"],
            cwd=place.worktree,
            capture_output=True,
            text=True,
            timeout=WAIT,
            check=False,
        )
        assert shell.stdout.splitlines() == [status, str(place.worktree / where).rstrip("/")]


def test_a_throwaway_home_is_private_to_the_run_and_a_users_home_stays_read_only(
    place: Place, sandbox: RunSandbox
) -> None:
    home = str(place.state_dir / "runs" / "implementor-1" / "home")
    assert sandbox.home == home
    run(sandbox, "echo kept > ~/note && git config --global --get user.name > ~/name", HOME=home)
    again = run(sandbox, "cat ~/note ~/name", HOME=home)
    assert again.stdout.splitlines() == ["kept", sandbox.sandbox.identity[0]]
    user = sandbox.model_copy(update={"home": str(place.home)})
    done = run(user, "touch ~/x; echo $XDG_CACHE_HOME; ls -a ~", HOME=str(place.home))
    assert "Read-only file system" in done.stderr
    assert done.stdout.splitlines()[0] == "/tmp/.cache"
    assert ".npmrc" in done.stdout.split()  # there, and unreadable (test above)


def test_killing_bwrap_kills_everything_it_started(sandbox: RunSandbox) -> None:
    """The reaper kills a run's process group; a command that left it (setsid) dies with the
    sandbox's pid namespace."""
    wrapped = sandbox.wrap_command("setsid sleep 300 & sleep 300", sandbox.worktree)
    shell = subprocess.Popen(["bash", "-c", wrapped], start_new_session=True)
    try:
        assert wait_for(lambda: len(_sleepers(shell.pid)) == 2, WAIT)
        sleepers = _sleepers(shell.pid)
        os.killpg(shell.pid, signal.SIGKILL)
        _, alive = psutil.wait_procs(sleepers, timeout=WAIT)
        assert alive == []
    finally:
        shell.wait(timeout=WAIT)


def test_the_run_records_what_the_sandbox_enforced(place: Place, sandbox: RunSandbox) -> None:
    record = sandbox_record(sandbox, "unused", "every Bash command")
    assert record["kind"] == "bubblewrap"
    assert record["network"].startswith("none")
    assert str(place.worktree) in record["writable"]
    assert str(place.home / ".claude") in record["hidden"]
    assert str(place.state_dir) in record["hidden"]
    missing = sandbox_record(None, "no bwrap", "x")
    assert missing["kind"] == "none"
    assert missing["reason"] == "no bwrap"


def test_a_start_sweeps_the_private_directories_a_killed_cpe_left(
    place: Place, sandbox: RunSandbox
) -> None:
    assert Path(sandbox.private).is_dir()
    assert sweep(place.state_dir) == [Path(sandbox.private)]
    assert not Path(sandbox.private).exists()


def _sleepers(pid: int) -> list[psutil.Process]:
    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    return [p for p in children if p.name() == "sleep"]


# ---------------------------------------------------------------------------- allow_install

CONNECT = """
import socket, sys
s = socket.create_connection(("127.0.0.1", 3128), 10)
s.sendall(("CONNECT 127.0.0.1:%s HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n" % sys.argv[1]).encode())
answer = s.recv(4096).decode()
print(answer.split("\\r\\n")[0])
if answer.startswith("HTTP/1.1 200"):
    s.sendall(b"through the proxy")
s.close()
"""


def test_with_allow_install_the_registries_and_nothing_else_are_reachable(place: Place) -> None:
    with host_listener() as (registry, received), host_listener() as (other, elsewhere):
        proxy = RegistryProxy([f"127.0.0.1:{registry}"])
        try:
            config = SandboxConfig(allow_install=True, registries=(f"127.0.0.1:{registry}",))
            sandbox = place.open(place.sandbox(config, proxy.path))
            direct = f"import socket; socket.create_connection(('127.0.0.1', {other}), 5)"
            done = run(
                sandbox,
                f"{py(CONNECT)} {registry}; {py(CONNECT)} {other}; {py(direct)}; "
                "echo proxy=$HTTPS_PROXY",
            )
            assert wait_for(lambda: received == [b"through the proxy"], WAIT)
        finally:
            proxy.close()
    lines = done.stdout.splitlines()
    assert lines[0] == "HTTP/1.1 200 Connection established"
    assert lines[1] == "HTTP/1.1 403 Forbidden"  # not a registry
    assert "Connection refused" in done.stderr  # its own loopback: no way around the proxy
    assert lines[2] == "proxy=http://127.0.0.1:3128"
    assert elsewhere == []
    record = sandbox.describe("x")
    assert record["network"].startswith("package registries only, through cpe's proxy")
    assert not Path(proxy.path).exists()


@pytest.mark.parametrize(
    ("host", "port", "expected"),
    [
        ("pypi.org", 443, True),
        ("PyPI.org.", 443, True),
        ("pypi.org", 80, False),
        ("evil.pypi.org", 443, False),
        ("files.example.com", 443, True),
        ("example.com", 443, False),
        ("localhost", 8443, True),
        ("localhost", 443, False),
    ],
)
def test_the_proxy_lets_through_the_named_hosts_only(host: str, port: int, expected: bool) -> None:
    entries = ["pypi.org", "*.example.com", "localhost:8443"]
    assert allowed(entries, host, port) is expected
