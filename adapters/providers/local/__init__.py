"""The embedded local provider: SQLite tracker, revisions as branches, a local pipeline."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from adapters.providers.local.provider import LocalProvider, create_local_provider

if TYPE_CHECKING:
    from adapters.providers.local.pipeline import LocalPipeline, PipelineResult


def __getattr__(name: str) -> Any:
    """The pipeline, imported on first use (psutil, anyio): the tracker's reads (``cpe status``,
    ``cpe work list``) do not run it."""
    if name in ("LocalPipeline", "PipelineResult"):
        from adapters.providers.local import pipeline  # noqa: PLC0415

        return getattr(pipeline, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["LocalPipeline", "LocalProvider", "PipelineResult", "create_local_provider"]
