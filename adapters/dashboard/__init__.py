"""The web dashboard: a board of work items, live agent output, failures, pause state, totals,
guarded actions, JSON endpoints and Prometheus metrics (``web`` lists the routes)."""
