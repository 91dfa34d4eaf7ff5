"""Where an agent run works: its worktree (``worktrees``, with ``setup_command``: the workspace
hooks), the patch taken afterwards (``patches``), and ``provision``, which puts the workspace,
the prompt (``adapters.runtime.prompt``) and the agent definition together for one run."""
