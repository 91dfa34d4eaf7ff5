"""Which issues of a hosted tracker are work: the admission rule every vendor's trust shares.

On a public project anyone can open an issue, and an agent obeys whatever its prompt holds. So
an issue is a work item only when it is **admitted**:

- when ``required_labels`` is set, it carries every one of them; and
- its author is trusted; or
- it carries ``admit_label`` and the last time that label was added, a trusted person added it.
  The title and body are then taken as they were when cpe first saw that admission; a later
  edit (the author may edit their own issue) is not taken until a trusted person adds the label
  again. Those snapshots are kept in a file of the state directory, so a restart does not take
  an edit made meanwhile.

A verdict is kept per version of an issue (its ``updated_at``); a refusal, or an edit not taken,
is logged once per issue and reason. Who is trusted and who added the label are the vendor's
questions (a GitHub permission and timeline, a GitLab access level and label events): the vendor
asks them through the callables it passes, and names its people in its own words (``Words``).
Labels are compared as both vendors compare them: case-insensitively, surrounding whitespace
ignored.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

_log = logging.getLogger(__name__)


def label_key(name: str) -> str:
    """A label name as GitHub and GitLab match it: case-insensitive, surrounding whitespace
    ignored."""
    return name.strip().casefold()


def has_label(labels: Iterable[str], name: str) -> bool:
    return label_key(name) in {label_key(n) for n in labels}


@dataclass(frozen=True)
class Admission:
    """Whether an issue is work, and the title and body cpe takes from it."""

    admitted: bool
    reason: str = ""
    """Why not, or what cpe took instead of the issue as it is (an edit after admission)."""
    title: str = ""
    body: str = ""


@dataclass(frozen=True)
class Issue:
    """What the rule reads of an issue."""

    number: int | str  # GitHub's and GitLab's numbers; Linear's and Jira's keys ("ENG-12")
    version: str  # its updated_at: a verdict is kept per version
    title: str
    body: str
    labels: Sequence[str]
    author: str | None  # as shown in a reason; None: a deleted account


def named(number: int | str) -> str:
    """An issue as a log line names it: ``#7`` by number, ``ENG-12`` by key."""
    return f"#{number}" if isinstance(number, int) else number


@dataclass(frozen=True)
class Labelled:
    """The last event that added the admit label."""

    event: int  # its id (0: none found)
    actor: str | None  # who, as named in a refusal (None: unknown)
    trusted_by: str | None  # who, as kept with the snapshot, when trusted; None: not trusted


@dataclass(frozen=True)
class Words:
    """How the vendor names its people in reasons."""

    not_trusted: str = "not trusted"  # said of an author: "filed by X, <not_trusted>"
    detail: str = ""  # added to a refusal of an unlabelled issue (the level asked for)
    someone: str = "person"  # "until a trusted <someone> adds the label again"


@dataclass(frozen=True)
class _Snapshot:
    event: int  # the event that admitted it
    by: str
    title: str
    body: str


class Admissions:
    """The rule, its verdicts and its snapshots; the vendor's ``Trust`` asks it per issue."""

    def __init__(
        self,
        file: Path | None,
        lock: threading.RLock,
        *,
        log: logging.Logger = _log,
    ) -> None:
        self._file = file
        self._lock = lock
        self._log = log
        self._snapshots: dict[str, _Snapshot] = self._load()
        self._verdicts: dict[tuple[str, str], Admission] = {}
        self._warned: set[tuple[str, str]] = set()
        self.admit_label = ""
        self.required: tuple[str, ...] = ()
        self.words = Words()

    def configure(self, admit_label: str, required_labels: Iterable[str], words: Words) -> None:
        """Take (new) settings: every issue is judged again."""
        with self._lock:
            self.admit_label = admit_label.strip()
            self.required = tuple(r for r in required_labels if r.strip())
            self.words = words
            self._verdicts.clear()

    def admit(
        self,
        issue: Issue,
        author_trusted: Callable[[], bool],
        labelled: Callable[[], Labelled],
    ) -> Admission:
        """Whether an issue is work, judged once per version of it; ``author_trusted`` and
        ``labelled`` are asked only when the rule needs them."""
        with self._lock:
            key = str(issue.number)
            version = (key, issue.version)
            known = self._verdicts.get(version)
            if known is None:
                known = self._judge(issue, author_trusted, labelled)
                self._verdicts = {k: v for k, v in self._verdicts.items() if k[0] != key}
                self._verdicts[version] = known
                if not known.admitted and (key, known.reason) not in self._warned:
                    self._warned.add((key, known.reason))
                    self._log.warning("issue %s ignored: %s", named(issue.number), known.reason)
            return known

    def _judge(
        self,
        issue: Issue,
        author_trusted: Callable[[], bool],
        labelled: Callable[[], Labelled],
    ) -> Admission:
        number, title, body, words = str(issue.number), issue.title, issue.body, self.words
        missing = [r for r in self.required if not has_label(issue.labels, r)]
        if missing:
            return Admission(False, f"lacks the required label {', '.join(missing)}")
        who = issue.author or "a deleted account"
        if author_trusted():
            return Admission(True, title=title, body=body)
        if not self.admit_label or not has_label(issue.labels, self.admit_label):
            return Admission(False, f"filed by {who}, {words.not_trusted}{words.detail}")
        label = labelled()
        if label.trusted_by is None:
            return Admission(
                False,
                f"filed by {who}, {words.not_trusted}; {self.admit_label!r} added by "
                f"{label.actor or 'someone unknown'}, not trusted",
            )
        by = label.trusted_by
        snapshot = self._snapshots.get(number)
        if snapshot is None or snapshot.event != label.event:
            snapshot = _Snapshot(label.event, by, title, body)
            self._snapshots[number] = snapshot
            self._save()
            self._log.info(
                "issue %s admitted by %s (%s)", named(issue.number), by, self.admit_label
            )
        if (snapshot.title, snapshot.body) != (title, body):
            reason = (
                f"edited after {snapshot.by} admitted it: the text as admitted is used until a "
                f"trusted {words.someone} adds {self.admit_label!r} again"
            )
            if (number, reason) not in self._warned:
                self._warned.add((number, reason))
                self._log.warning("issue %s %s", named(issue.number), reason)
            return Admission(True, reason, snapshot.title, snapshot.body)
        return Admission(True, title=title, body=body)

    # ------------------------------------------------------------------ snapshots

    def _load(self) -> dict[str, _Snapshot]:
        if self._file is None or not self._file.exists():
            return {}
        try:
            data = json.loads(self._file.read_text(encoding="utf-8"))
            return {str(k): _Snapshot(**v) for k, v in data.items()}
        except (OSError, ValueError, TypeError) as exc:
            # Without them an admitted issue's current text is taken: say so, loudly.
            self._log.error(
                "%s cannot be read (%s): admitted issues are judged afresh", self._file, exc
            )
            return {}

    def _save(self) -> None:
        if self._file is None:
            return
        data = {str(k): vars(v) for k, v in self._snapshots.items()}
        part = self._file.with_name(self._file.name + ".part")
        part.write_text(json.dumps(data, sort_keys=True), encoding="utf-8")
        os.replace(part, self._file)
