"""What names the Claude vendor for every Claude runtime (the SDK's and ``claude -p``'s): the
CLI bundled with claude-agent-sdk and the variables the CLI reads to reach its model.

Finding the bundled CLI does not import claude-agent-sdk: only the SDK runtime (``sdk.py``)
does."""

from __future__ import annotations

import importlib.util
from pathlib import Path

__all__ = ["CLAUDE_MODEL_VARIABLES", "bundled_cli"]

# Variables the CLI needs to reach its model; passed through when set (the model credential is
# the CLI's own; provider tokens are never in this list).
CLAUDE_MODEL_VARIABLES = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_MODEL",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "CLAUDE_CODE_USE_BEDROCK",
    "CLAUDE_CODE_USE_VERTEX",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
    "CLAUDE_CODE_MAX_RETRIES",  # how long the CLI itself retries an API that fails
)


def bundled_cli() -> str:
    """The ``claude`` executable claude-agent-sdk ships (``ModuleNotFoundError`` without the
    SDK), found where the package lies without running it."""
    spec = importlib.util.find_spec("claude_agent_sdk")
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError("No module named 'claude_agent_sdk'", name="claude_agent_sdk")
    return str(Path(spec.origin).parent / "_bundled" / "claude")
