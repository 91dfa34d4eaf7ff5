"""Agent runtimes (architecture §6): worktrees, context, the Claude SDK adapter, the
scripted model."""
