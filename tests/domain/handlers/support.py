"""What the handler tests share: options, an agent failure, and readers of the commands."""

from __future__ import annotations

from typing import Any

from domain.commands import StartAgent, TransitionStatus
from domain.events import AgentFailed
from domain.handlers.options import HandlerOptions

AUTO_MERGE = HandlerOptions(auto_merge=True)
# A provider whose writer cannot land through the merge queue (the seed's interface): approved
# revisions are merged as they are.
DIRECT_MERGE = HandlerOptions(auto_merge=True, merge_queue=False)


def failed(sid: str, role: str = "implementor", kind: str = "failed") -> AgentFailed:
    return AgentFailed.model_validate(
        {"session_id": sid, "role": role, "kind": kind, "reason": "it broke"}
    )


def starts(commands: list[Any], role: str) -> list[StartAgent]:
    return [c for c in commands if isinstance(c, StartAgent) and c.params.role == role]


def transitions(commands: list[Any]) -> list[tuple[str, str]]:
    return [(c.work_item_id, c.to) for c in commands if isinstance(c, TransitionStatus)]
