"""``python -m didmem.cli``: the ``didmem`` command."""

import sys

from . import main

sys.exit(main())
