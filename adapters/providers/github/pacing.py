"""The write pacer, shared with the GitLab provider: ``adapters/providers/pacing.py``. Kept
here so that ``adapters.providers.github.pacing`` goes on naming it."""

from __future__ import annotations

from adapters.providers.pacing import TokenBucket, WritePacer

__all__ = ["TokenBucket", "WritePacer"]
