"""``python -m didmem.cli``: the ``didmem`` command."""

import sys

from . import console_main

sys.exit(console_main())
