"""``python -m adapters.cli``: the ``cpe`` command."""

import sys

from adapters.cli.command import main

sys.exit(main())
