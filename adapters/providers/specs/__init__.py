"""Spec files read from the repository's default branch (what the planner turns into work)."""

from adapters.providers.specs.reader import DEFAULT_SPEC_GLOBS, GitSpecReader

__all__ = ["DEFAULT_SPEC_GLOBS", "GitSpecReader"]
