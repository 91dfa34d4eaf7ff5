"""The embedded local provider: SQLite tracker, revisions as branches, a local pipeline."""

from adapters.local.pipeline import LocalPipeline, PipelineResult
from adapters.local.provider import LocalProvider, create_local_provider

__all__ = ["LocalPipeline", "LocalProvider", "PipelineResult", "create_local_provider"]
