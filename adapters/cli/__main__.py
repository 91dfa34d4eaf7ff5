"""``python -m adapters.cli``: the ``cpe`` command."""

import sys

from adapters.cli.parser import main

sys.exit(main())
