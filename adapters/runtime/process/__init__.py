"""How an agent's process runs, whatever runs the agent: the launcher (``launcher`` and
``launcher.sh``: the process group, its pid file, killing it), the environment the agent gets
(``agent_env``, ``own_venv``) and the no-progress watch (``progress``)."""
