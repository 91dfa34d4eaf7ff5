"""The daemon's surfaces: what a running engine shows and answers beyond its own work.

``console`` (the engine's decisions, one sentence each, on a person's terminal), ``control`` (the
control socket: a person's requests into the running engine, or its journal when none runs),
``notify`` (systemd's readiness and watchdog) and ``metering`` (the provider calls counted, for
the dashboard's metrics).
"""
