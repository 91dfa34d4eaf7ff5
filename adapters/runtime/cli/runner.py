"""The runner role (docs/contract.md, S003-01): one ``CliRunner`` Protocol for every agent CLI,
and ``JsonlCliRunner``, the ``start()`` they share.

A runner checks a ``RunRequest`` against its capabilities (``check_request``: a request it
cannot honour is refused before anything runs), writes the run's metadata with the prompt
(S003-05), then launches its CLI in its own process group (``jsonl.launch``). What a vendor says
itself: its command line (``_argv``), what it enforces and how (``effective_policy``), and what
it prepares around the launch (``_prepare``: files, a home, a sandbox around the command, and
the run handle that reads its events).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Generic, Protocol, TypeVar, runtime_checkable

from adapters.runtime.artifacts.store import RunArtifacts
from adapters.runtime.cli.jsonl import CliOutcome, EventCallback, JsonlRun, launch
from adapters.runtime.cli.process import KillReason, ProcessHandle
from adapters.runtime.cli.request import RunnerCapabilities, RunRequest, check_request

__all__ = [
    "ARGV_PROMPT_BYTES",
    "CliRunHandle",
    "CliRunner",
    "JsonlCliRunner",
    "Prepared",
]

ARGV_PROMPT_BYTES = 100_000  # an argv string is at most 128 KiB on Linux; longer: on stdin


class CliRunHandle(Protocol):
    """One started run: wait for its outcome, stop it."""

    def wait(self, timeout: float | None = None) -> CliOutcome: ...

    def stop(self, reason: KillReason = ..., detail: str = ...) -> None: ...


@runtime_checkable
class CliRunner(Protocol):
    """The runner interface (S003-01): what it can do, start a run (``RunRejectedError``
    before anything runs when it cannot honour it), stop a run; the model credentials its CLI
    reads (``model_variables``) and what the agent says in one of its events
    (``text_chunks``)."""

    @property
    def model_variables(self) -> tuple[str, ...]: ...

    def get_capabilities(self) -> RunnerCapabilities: ...

    def start(
        self,
        run: RunRequest,
        prompt: str | None = None,
        env: Mapping[str, str] | None = None,
        *,
        on_event: EventCallback | None = None,
    ) -> CliRunHandle: ...

    def stop(self, handle: Any) -> None: ...

    def text_chunks(self, event: Mapping[str, Any]) -> list[str]: ...


H = TypeVar("H", bound=JsonlRun)


@dataclass
class Prepared(Generic[H]):
    """What a vendor launches: the command (wrapped in a sandbox or not), its environment, how
    the run handle is made, and what to release should the launch fail."""

    argv: list[str]
    env: Mapping[str, str] | None
    make_handle: Callable[[ProcessHandle], H]
    release: Callable[[], None] = field(default=lambda: None)


class JsonlCliRunner(ABC, Generic[H]):
    """A runner whose CLI prints JSON lines; runs land in ``<state_dir>/runs/<run_id>``."""

    agent_family: ClassVar[str]  # runner_metadata.json's
    invocation_mode: ClassVar[str]
    capture_format: ClassVar[str]
    model_variables: tuple[str, ...] = ()  # the model credentials its CLI reads

    state_dir: Path
    cli_path: str
    kill_grace: float
    wall_timeout: float | None
    idle_timeout: float | None
    argv_prompt_bytes: int
    capabilities: RunnerCapabilities

    def get_capabilities(self) -> RunnerCapabilities:
        return self.capabilities

    def start(
        self,
        run: RunRequest,
        prompt: str | None = None,
        env: Mapping[str, str] | None = None,
        *,
        on_event: EventCallback | None = None,
    ) -> H:
        """Check, record, then start; raises ``RunRejectedError`` before anything runs."""
        prompt = run.prompt if prompt is None else prompt
        env = run.env if env is None else env
        check_request(self.capabilities, run)
        via_stdin = len(prompt.encode()) > self.argv_prompt_bytes
        argv = self._argv(run, None if via_stdin else prompt)
        artifacts = RunArtifacts.open(
            self.state_dir,
            run.run_id,
            agent_family=self.agent_family,
            invocation_mode=self.invocation_mode,
            command=argv if via_stdin else argv[:-1],  # the prompt is in the metadata
            working_directory=Path(run.worktree_path),
            prompt=prompt,
            prompt_reference=run.prompt_reference,
            requested_policy=run.policy_dict(),
            effective_policy=self.effective_policy(run, via_stdin),
            capture_format=self.capture_format,
            transcript_log=run.transcript_log,
        )
        prepared = self._prepare(run, argv, env, artifacts, on_event)
        try:
            return launch(
                prepared.argv,
                run,
                prepared.env,
                artifacts,
                prepared.make_handle,
                stdin_prompt=prompt if via_stdin else None,
                wall_timeout=run.wall_timeout or self.wall_timeout,
                idle_timeout=run.idle_timeout or self.idle_timeout,
                kill_grace=self.kill_grace,
            )
        except BaseException:
            prepared.release()
            raise

    def stop(self, handle: H) -> None:
        handle.stop()

    @abstractmethod
    def _argv(self, run: RunRequest, prompt: str | None) -> list[str]:
        """The command; prompt None: the CLI reads it from stdin (a file, never a pipe)."""

    @abstractmethod
    def effective_policy(self, run: RunRequest, via_stdin: bool) -> dict[str, Any]:
        """What the run's metadata says this runner enforces, and how."""

    @abstractmethod
    def _prepare(
        self,
        run: RunRequest,
        argv: list[str],
        env: Mapping[str, str] | None,
        artifacts: RunArtifacts,
        on_event: EventCallback | None,
    ) -> Prepared[H]:
        """What to launch, once the run's artifacts are open."""

    @staticmethod
    @abstractmethod
    def text_chunks(event: Mapping[str, Any]) -> list[str]:
        """What the agent said in one native event."""
