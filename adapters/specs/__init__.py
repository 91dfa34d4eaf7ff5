"""Spec files read from the repository's default branch (architecture §7)."""

from adapters.specs.reader import DEFAULT_SPEC_GLOBS, GitSpecReader

__all__ = ["DEFAULT_SPEC_GLOBS", "GitSpecReader"]
