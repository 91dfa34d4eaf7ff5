"""The artifact store of one agent run: ``<state_dir>/runs/<session_id>/`` (docs/contract.md, S004).

::

    transcript.log              human-readable, appended as the run goes (role transcript_log),
                                only when session transcripts are on ([logging] agent_transcripts)
    runner_transcript.jsonl     runner_transcript: every native message, redacted, one per line
    runner_final_response.json  runner_final_response: the final text and structured output
    runner_metadata.json        runner_metadata: invocation, capture, outcome, usage, policy,
                                and the prompt's sha256 and file (``read_prompt``)
    manifest.json               the step manifest: each artifact's role, path, size, sha256
    <attached files>            optional artifacts (raw stderr, native captures): ``attach``

An adapter feeds :class:`RunArtifacts` (``record_native``, ``note``, ``attach``) and ends it
with ``finish``; it never writes a file or the manifest itself (S004-06). Evaluators find the
evidence through the manifest and its roles only (:func:`resolve_artifact`, S004-14).

**The three normalized artifacts exist from the start.** ``open`` writes an empty transcript,
a final response marked unavailable, and the metadata with the prompt's reference *before* the
agent runs, so a run that dies half-way still has its evidence. ``finish`` completes them.

**A prompt is stored once.** Its text (redacted) goes to ``<state_dir>/prompts/<sha256>.txt``,
named by its content and written only when no run wrote it before; the metadata holds its
``prompt_sha256``, ``prompt_chars`` and ``prompt_file`` (relative to the run directory). A
planner retried on a large spec, or runs that share a prompt, do not store it again.

**The human-readable transcript is optional** (written only when session transcripts are on,
``[logging] agent_transcripts``; ``open(..., transcript_log=False)`` leaves it out, and the
manifest does not list it). The normalized artifacts are written either way (S004-06).

**Writing never raises** (a log that cannot be written must not fail the run). The first failure of
each file is logged once, later writes to a broken append-only file are dropped (a transcript with
holes would mislead), and the failures are listed in the metadata's ``artifact_errors``. A run whose
transcript or metadata could not be written is not ``completed``: ``finish`` turns that into
``error`` (S004-12); a failing optional artifact (``transcript.log``, an attachment) changes
nothing. ``finish`` is idempotent: the first call wins, later calls return its outcome.

**No secret reaches a file**: everything goes through ``redaction`` first.

An existing run directory (a reused session id) is overwritten, with a warning.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, get_args

import structlog

from adapters.runtime.artifacts.files import (
    CANONICAL_FILES,
    MANIFEST,
    REQUIRED_ROLES,
    RESERVED_NAMES,
    SCHEMA_VERSION,
    TRANSCRIPT_LOG,
    ArtifactLookupError,
    SafeFiles,
    load_manifest,
    resolve_artifact,
)
from adapters.runtime.artifacts.native_messages import Digest, one_line, render, to_wire
from adapters.runtime.artifacts.redaction import redact, redact_argv, redact_text
from domain.models import RunUsage

__all__ = [
    "CANONICAL_FILES",
    "MANIFEST",
    "REQUIRED_ROLES",
    "TRANSCRIPT_LOG",
    "ArtifactLookupError",
    "FinishedArtifacts",
    "RunArtifacts",
    "Termination",
    "load_manifest",
    "read_prompt",
    "resolve_artifact",
]

log = structlog.get_logger("cpe.runtime.artifacts")

Termination = Literal["completed", "error", "killed_timeout", "killed_idle", "killed_policy"]
_TERMINATIONS: dict[str, Termination] = {name: name for name in get_args(Termination)}
_PROMPT_CHARS = 300  # of the prompt in transcript.log; the prompt file holds all of it
PROMPTS_DIR = "prompts"  # under the state directory, beside runs/
_DEFAULT_CAPTURE = {"claude_cli": "claude_stream_json", "codex_cli": "codex_exec_jsonl"}
# A missing normalized transcript or metadata makes the run an error (S004-12).
_FATAL_WHEN_MISSING = ("runner_transcript", "runner_metadata")
_JSONL = CANONICAL_FILES["runner_transcript"]
_FINAL = CANONICAL_FILES["runner_final_response"]
_METADATA = CANONICAL_FILES["runner_metadata"]


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _redact_content(content: str | bytes) -> str | bytes:
    if isinstance(content, str):
        return redact_text(content)
    text = content.decode("utf-8", errors="surrogateescape")
    return redact_text(text).encode("utf-8", errors="surrogateescape")


def read_prompt(run_dir: Path) -> str | None:
    """The prompt a run was given (redacted), from the file its metadata names; None when the
    metadata or the file is missing."""
    try:
        metadata = json.loads((Path(run_dir) / _METADATA).read_text(encoding="utf-8"))
        prompt_file = str(metadata["prompt_file"])
        return (Path(run_dir) / prompt_file).read_text(encoding="utf-8", errors="surrogateescape")
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat(timespec="milliseconds")


@dataclass(frozen=True)
class FinishedArtifacts:
    """What ``finish`` wrote: the run's outcome and where its evidence is."""

    run_dir: Path
    termination: Termination
    exit_code: int | None
    paths: Mapping[str, Path]  # role → file, for every artifact that exists
    missing: tuple[str, ...]  # required roles that could not be written
    metadata: Mapping[str, Any] = field(repr=False)

    def path(self, role: str) -> Path | None:
        return self.paths.get(role)

    def provenance(self) -> dict[str, Any]:
        """The per-step provenance of S004-16."""
        keys = ("agent_family", "prompt_reference", "started_at", "ended_at")
        return {
            **{key: self.metadata.get(key) for key in keys},
            "termination": self.termination,
            "exit_code": self.exit_code,
            "artifacts": {role: str(path) for role, path in self.paths.items()},
            "requested_policy": self.metadata.get("requested_policy"),
            "effective_policy": self.metadata.get("effective_policy"),
        }


class RunArtifacts:
    """The files of one run; thread-safe. Build it with :meth:`open`."""

    def __init__(
        self,
        run_dir: Path,
        metadata: dict[str, Any],
        clock: Callable[[], datetime],
        *,
        transcript_log: bool = True,
    ):
        self.run_dir = run_dir
        self._metadata = metadata
        self._clock = clock
        self._human_log = transcript_log
        self._lock = threading.RLock()
        self._files = SafeFiles(run_dir)
        self._attached: dict[str, str] = {}  # optional role → file name
        self._digest = Digest()
        self._late_logged = False
        self._finished: FinishedArtifacts | None = None

    @classmethod
    def open(
        cls,
        state_dir: Path,
        session_id: str,
        *,
        agent_family: str,
        invocation_mode: str,
        command: Sequence[str],
        working_directory: Path,
        prompt: str,
        prompt_reference: str | None,
        requested_policy: Mapping[str, Any] | None = None,
        effective_policy: Mapping[str, Any] | None = None,
        capture_format: str | None = None,
        clock: Callable[[], datetime] = _utcnow,
        transcript_log: bool = True,
    ) -> RunArtifacts:
        """Create the run directory and its pre-run artifacts. Raises only on a bad id.
        ``transcript_log``: whether to keep the human-readable ``transcript.log`` too."""
        if session_id in ("", ".", "..") or any(c in session_id for c in "/\\\0"):
            raise ValueError(f"session id {session_id!r} cannot name a directory")
        run_dir = Path(state_dir) / "runs" / session_id
        text = redact_text(prompt)
        digest = hashlib.sha256(text.encode("utf-8", errors="surrogateescape")).hexdigest()
        metadata: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "session_id": session_id,
            "agent_family": agent_family,
            "invocation_mode": invocation_mode,
            "capture_format": capture_format or _DEFAULT_CAPTURE.get(agent_family, "native_jsonl"),
            "command": redact_argv(command),
            "working_directory": str(working_directory),
            "prompt_reference": prompt_reference,
            "prompt_sha256": digest,
            "prompt_chars": len(text),
            "prompt_file": f"../../{PROMPTS_DIR}/{digest}.txt",
            "requested_policy": redact(requested_policy),
            "effective_policy": redact(effective_policy),
            "state": "running",
            "started_at": _iso(clock()),
            "ended_at": None,
            "exit_code": None,
            "termination": None,
            "termination_reason": None,
            "cost_usd": None,
            "num_turns": None,
            "usage": {},
            "permission_denials": [],
            "native": {},
            "message_count": 0,
            "artifact_errors": [],
            "extra": {},
        }
        artifacts = cls(run_dir, metadata, clock, transcript_log=transcript_log)
        artifacts._start(text)
        return artifacts

    # ------------------------------------------------------------------ while running

    def record_native(self, message: Mapping[str, Any] | object) -> None:
        """One native message (a wire dict, or an SDK message object): kept and summarised."""
        wire = redact(to_wire(message))
        with self._lock:
            if self._refuse_late("record_native"):
                return
            self._metadata["message_count"] += 1
            self._digest.track(wire)
            line = json.dumps(wire, ensure_ascii=False, default=str) + "\n"
            self._files.append(_JSONL, line)
            for text in render(wire):
                self._log(text)

    def note(self, text: str) -> None:
        """A line of the runner's own (a system note) in ``transcript.log``."""
        with self._lock:
            if not self._refuse_late("note"):
                self._log(f"note: {redact_text(text)}")

    def annotate(self, **fields: Any) -> None:
        """Extra metadata (a pid, a model, a native capture's path), under ``extra``."""
        with self._lock:
            if not self._refuse_late("annotate"):
                self._metadata["extra"].update(redact(fields))

    def set_effective_policy(self, policy: Mapping[str, Any]) -> None:
        """What the adapter could enforce of the requested policy (S004-16)."""
        with self._lock:
            if not self._refuse_late("set_effective_policy"):
                self._metadata["effective_policy"] = redact(policy)

    def attach(self, role: str, filename: str, content: str | bytes) -> Path:
        """An optional artifact (S004-08), appended to when attached again; redacted too
        (bytes as UTF-8 text, undecodable bytes kept as they are)."""
        if role in CANONICAL_FILES or role == TRANSCRIPT_LOG[0] or filename in RESERVED_NAMES:
            raise ValueError(f"{role!r}/{filename!r} would replace a normalized artifact")
        if Path(filename).name != filename or filename.startswith("."):
            raise ValueError(f"attachment name {filename!r} must be a plain file name")
        with self._lock:
            if not self._refuse_late("attach"):
                self._attached[role] = filename
                self._files.append(filename, _redact_content(content), breaks=False)
        return self.run_dir / filename

    @property
    def transcript_log(self) -> Path:
        """Where the human-readable log is (or would be, when it is off)."""
        return self.run_dir / TRANSCRIPT_LOG[1]

    @property
    def log_file_path(self) -> str | None:
        """The human-readable log when it is kept, else None (``AgentRunHandle.log_file_path``)."""
        return str(self.transcript_log) if self._human_log else None

    def missing_required(self) -> tuple[str, ...]:
        """Required roles whose file is absent or lost a write."""
        with self._lock:
            files = self._files
            return tuple(r for r, name in CANONICAL_FILES.items() if not files.intact(name))

    @property
    def errors(self) -> tuple[str, ...]:
        with self._lock:
            return tuple(f"{name}: {error}" for name, error in self._files.failed.items())

    # ------------------------------------------------------------------ finish

    def finish(
        self,
        termination: Termination,
        exit_code: int | None = None,
        final_response: Mapping[str, Any] | str | object | None = None,
        usage: RunUsage | None = None,
        *,
        reason: str | None = None,
        effective_policy: Mapping[str, Any] | None = None,
    ) -> FinishedArtifacts:
        """Complete the artifacts and write the manifest; never raises, first call wins.

        ``final_response`` defaults to the last ``result`` message recorded; ``usage`` fields
        that are set override what that result says.
        """
        with self._lock:
            if self._finished is not None:
                return self._finished
            try:
                self._finished = self._finish(
                    termination,
                    exit_code=exit_code,
                    final_response=final_response,
                    usage=usage,
                    reason=reason,
                    effective_policy=effective_policy,
                )
            except Exception as exc:  # finish runs in finally blocks: it must not mask
                log.exception("finishing run artifacts failed", run_dir=str(self.run_dir))
                failure = {"error": redact_text(f"{type(exc).__name__}: {exc}")}
                self._finished = FinishedArtifacts(
                    self.run_dir, "error", exit_code, {}, REQUIRED_ROLES, failure
                )
            return self._finished

    def _finish(
        self,
        termination: str,
        *,
        exit_code: int | None,
        final_response: object,
        usage: RunUsage | None,
        reason: str | None,
        effective_policy: Mapping[str, Any] | None,
    ) -> FinishedArtifacts:
        outcome = _TERMINATIONS.get(termination)
        if outcome is None:
            reason = "; ".join(filter(None, [f"unknown termination {termination!r}", reason]))
            outcome = "error"
        meta = self._metadata
        final = self._final_wire(final_response)
        self._files.write_json(_FINAL, self._digest.final_response(final))
        result = final if final is not None and final.get("type") == "result" else None
        meta.update(self._digest.outcome(result, usage))
        if effective_policy is not None:
            meta["effective_policy"] = redact(effective_policy)
        meta.update(state="finished", ended_at=_iso(self._clock()), exit_code=exit_code)
        lost = [r for r in self.missing_required() if r == "runner_transcript"]
        if lost and outcome == "completed":
            outcome, reason = "error", f"required artifacts missing: {', '.join(lost)}"
        meta.update(termination=outcome, termination_reason=redact(reason))
        meta["artifact_errors"] = [
            {"file": name, "error": error} for name, error in self._files.failed.items()
        ]
        self._files.write_json(_METADATA, meta)
        missing = self.missing_required()
        if outcome == "completed" and any(r in _FATAL_WHEN_MISSING for r in missing):
            outcome = "error"  # the metadata could not say so: only the caller learns it
        self._log(
            f"run finished: termination={outcome} exit_code={exit_code} "
            f"cost_usd={meta['cost_usd']} turns={meta['num_turns']}"
            + (f" reason={meta['termination_reason']}" if meta["termination_reason"] else "")
        )
        paths = self._write_manifest("finished")
        snapshot = copy.deepcopy(meta)
        snapshot["termination"] = outcome
        return FinishedArtifacts(self.run_dir, outcome, exit_code, paths, missing, snapshot)

    def _final_wire(self, final_response: object) -> dict[str, Any] | None:
        """The final response as a redacted dict: what was given, else the last result."""
        if final_response is None:
            return self._digest.last_result
        if isinstance(final_response, str):
            return {"type": "text", "text": redact_text(final_response)}
        wire: dict[str, Any] = redact(to_wire(final_response))
        return wire

    # ------------------------------------------------------------------ internals

    def _start(self, prompt: str) -> None:
        meta = self._metadata
        if self.run_dir.exists():
            log.warning("run directory exists; overwriting it", run_dir=str(self.run_dir))
        self._files.make_dir(_JSONL, *([TRANSCRIPT_LOG[1]] if self._human_log else []))
        if not self._human_log:  # a reused run directory must not keep an earlier run's log
            with contextlib.suppress(OSError):
                (self.run_dir / TRANSCRIPT_LOG[1]).unlink(missing_ok=True)
        self._store_prompt(prompt)
        self._files.write_json(_FINAL, self._digest.final_response(None))
        self._files.write_json(_METADATA, meta)
        self._log(
            f"run started: session={meta['session_id']} agent_family={meta['agent_family']} "
            f"mode={meta['invocation_mode']} cwd={meta['working_directory']}"
        )
        self._log(
            f"prompt ({meta['prompt_chars']} chars, reference {meta['prompt_reference']}): "
            + one_line(prompt, _PROMPT_CHARS)
        )
        self._write_manifest("running")

    def _store_prompt(self, prompt: str) -> None:
        """Write the prompt file unless a run already did (same content, same name): through a
        temporary file, so a crash leaves no half-written prompt under its final name."""
        path = (self.run_dir / self._metadata["prompt_file"]).resolve()
        if path.exists():
            return
        tmp = path.with_name(f".{path.stem}.{os.getpid()}.{threading.get_ident()}.tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(prompt, encoding="utf-8", errors="surrogateescape")
            os.replace(tmp, path)
        except OSError as exc:
            self._files.fail(PROMPTS_DIR, exc)
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)

    def _refuse_late(self, what: str) -> bool:
        if self._finished is None:
            return False
        if not self._late_logged:
            self._late_logged = True
            log.warning("run artifacts already finished; dropping", call=what)
        return True

    def _log(self, text: str) -> None:
        if not self._human_log:
            return
        stamp = self._clock().astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        first, *rest = text.splitlines() or [""]
        lines = [f"{stamp} {first}", *(f"{' ' * len(stamp)}   {line}" for line in rest)]
        self._files.append(TRANSCRIPT_LOG[1], "\n".join(lines) + "\n")

    def _write_manifest(self, state: str) -> dict[str, Path]:
        human = [TRANSCRIPT_LOG] if self._human_log else []
        roles = [*CANONICAL_FILES.items(), *human, *self._attached.items()]
        return self._files.write_manifest(self._metadata["session_id"], state, roles)
