"""What every agent CLI shares (docs/contract.md, S003, S004): ``request`` (the run request,
the capabilities, the guarantees), ``runner`` (the one ``CliRunner`` role and the shared
``start()``), ``jsonl`` (a JSON-lines run, its outcome, its launch), ``process`` (its process
group) and ``cli_runtime`` (a ``RuntimeAdapter`` over any runner). Each vendor's package imports
from here, never from another vendor's."""
