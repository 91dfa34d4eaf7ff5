"""The daemon's surfaces: what a running engine shows and answers beyond its own work.

``console`` (the engine's decisions, one sentence each, on a person's terminal), ``control`` (the
control socket: a person's requests into the running engine, or its journal when none runs),
``notify`` (systemd's readiness and watchdog), ``metering`` (the provider calls counted, for
the dashboard's metrics) and ``webhooks`` (the vendors' deliveries checked, each making a poll
come at once).
"""
