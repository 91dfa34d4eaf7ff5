"""Remote runs: agent sessions placed on the nodes of a Ray cluster (``[runtime.remote]``).

``settings.py`` is the section's schema and imports no Ray; ``ray_runtime.py`` is the head's
``RuntimeAdapter`` (the only module that imports Ray, loaded only when a role runs remotely);
``node.py`` is what runs on the node. docs/remote.md says how it works and what it was
measured at."""
