"""``python -m iron.runner``: see :mod:`iron.runner.main`."""

import sys

from .main import main

sys.exit(main())
