"""``python -m jobset_core.cli``: the same as the ``jobsetctl`` console script."""

import sys

from jobset_core.cli import script

sys.exit(script())
