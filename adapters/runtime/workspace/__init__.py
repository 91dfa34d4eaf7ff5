"""What every runtime needs around an agent run, whatever runs the agent: the worktree
(``worktrees``, ``setup_command``: the workspace hooks), the prompt (``context``, ``agents``: the
agent definitions), the environment the agent gets (``agent_env``, ``redaction``), the process
start (``launcher``), the patch taken afterwards (``patches``), the no-progress watch
(``progress``), and ``provision``, which puts them together for one run."""
