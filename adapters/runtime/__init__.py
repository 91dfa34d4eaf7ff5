"""Agent runtimes and what they share: worktrees, context, the Claude SDK adapter, the
scripted model."""
