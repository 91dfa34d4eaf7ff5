"""The files under a run directory, written so that a failure never raises, and the manifest
through which evaluators find them (S004-06, S004-14).

:class:`SafeFiles` is the only writer: appends (``transcript.log``, the JSONL transcript,
attachments) and whole JSON documents written atomically (temp file + ``os.replace``). The
first failure of each file is logged once and kept; an append-only file that lost a line is
*broken* from then on (later lines are dropped: a transcript with a hole would mislead), a JSON
document is healthy again as soon as a rewrite succeeds.

:func:`load_manifest` and :func:`resolve_artifact` are the reading side: an artifact is found by
its role in ``manifest.json``, never by a file name (S004-14).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import structlog

__all__ = [
    "CANONICAL_FILES",
    "MANIFEST",
    "REQUIRED_ROLES",
    "RESERVED_NAMES",
    "SCHEMA_VERSION",
    "TRANSCRIPT_LOG",
    "ArtifactLookupError",
    "SafeFiles",
    "load_manifest",
    "resolve_artifact",
]

log = structlog.get_logger("cpe.runtime.artifacts")

SCHEMA_VERSION = 1
REQUIRED_ROLES = ("runner_transcript", "runner_final_response", "runner_metadata")
CANONICAL_FILES: Mapping[str, str] = {
    "runner_transcript": "runner_transcript.jsonl",
    "runner_final_response": "runner_final_response.json",
    "runner_metadata": "runner_metadata.json",
}
TRANSCRIPT_LOG = ("transcript_log", "transcript.log")  # (role, file): optional, human-readable
MANIFEST = "manifest.json"
RESERVED_NAMES = frozenset({*CANONICAL_FILES.values(), TRANSCRIPT_LOG[1], MANIFEST})


class ArtifactLookupError(LookupError):
    """A run directory has no manifest, or its manifest has no usable entry for a role."""


class SafeFiles:
    """Writes under ``run_dir`` that log their first failure per file and never raise.

    Not thread-safe on its own: ``RunArtifacts`` calls it under its lock.
    """

    def __init__(self, run_dir: Path):
        self.run_dir = run_dir
        self.failed: dict[str, str] = {}  # file name → its first error
        self.broken: set[str] = set()  # append-only files that lost a write

    def intact(self, name: str) -> bool:
        """Whether ``name`` exists and every write to it so far succeeded."""
        return (
            name not in self.broken and name not in self.failed and (self.run_dir / name).is_file()
        )

    def make_dir(self, *empty_files: str) -> None:
        """Create the run directory and (re)start each of ``empty_files`` empty."""
        try:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            for name in empty_files:
                (self.run_dir / name).write_bytes(b"")
        except OSError as exc:
            self.fail(str(self.run_dir), exc)

    def append(self, name: str, data: str | bytes, *, breaks: bool = True) -> None:
        """Append to ``name``; with ``breaks``, a failure drops every later append too."""
        if name in self.broken:
            return
        try:
            raw = data.encode("utf-8") if isinstance(data, str) else data
            with (self.run_dir / name).open("ab") as out:
                out.write(raw)
        except OSError as exc:
            if breaks:
                self.broken.add(name)
            self.fail(name, exc)

    def write_json(self, name: str, data: Any) -> None:
        tmp = self.run_dir / f".{name}.tmp"
        try:
            tmp.write_text(json.dumps(data, ensure_ascii=False, indent=2, default=str) + "\n")
            os.replace(tmp, self.run_dir / name)
        except OSError as exc:
            self.fail(name, exc)
        else:
            self.failed.pop(name, None)

    def fail(self, name: str, exc: OSError) -> None:
        if name not in self.failed:
            self.failed[name] = f"{type(exc).__name__}: {exc}"
            log.warning("cannot write a run artifact; going on", file=name, error=str(exc))

    def write_manifest(
        self, session_id: str, state: str, roles: Iterable[tuple[str, str]]
    ) -> dict[str, Path]:
        """Write the step manifest for ``roles`` (role, file name); return role → path of
        each artifact present. A finished manifest carries each file's size and sha256."""
        entries, paths = [], {}
        for role, name in roles:
            file = self.run_dir / name
            present = file.is_file() and name not in self.broken
            entry: dict[str, Any] = {
                "role": role,
                "path": name,
                "required": role in REQUIRED_ROLES,
                "present": present,
            }
            if present:
                paths[role] = file
                if state == "finished":
                    data = file.read_bytes()
                    entry.update(bytes=len(data), sha256=hashlib.sha256(data).hexdigest())
            entries.append(entry)
        manifest = {
            "schema_version": SCHEMA_VERSION,
            "session_id": session_id,
            "state": state,
            "artifacts": entries,
        }
        self.write_json(MANIFEST, manifest)
        return paths


def load_manifest(run_dir: Path) -> dict[str, Any]:
    """A run's step manifest; ArtifactLookupError when there is none or it is unreadable."""
    try:
        manifest: Any = json.loads((Path(run_dir) / MANIFEST).read_text())
    except (OSError, ValueError) as exc:
        raise ArtifactLookupError(f"no readable manifest in {run_dir}: {exc}") from exc
    if not isinstance(manifest, dict) or not isinstance(manifest.get("artifacts"), list):
        raise ArtifactLookupError(f"malformed manifest in {run_dir}")
    return manifest


def resolve_artifact(run_dir: Path, role: str) -> Path:
    """The file of ``role``, found through the manifest only (S004-14)."""
    root = Path(run_dir).resolve()
    for entry in load_manifest(run_dir)["artifacts"]:
        if isinstance(entry, dict) and entry.get("role") == role:
            path = (root / str(entry.get("path"))).resolve()
            if not path.is_relative_to(root):
                raise ArtifactLookupError(f"{role} points outside {run_dir}: {path}")
            if not entry.get("present") or not path.is_file():
                raise ArtifactLookupError(f"{role} is listed but missing: {path}")
            return path
    raise ArtifactLookupError(f"no {role} artifact in {run_dir}")
