"""``python -m unpooled ...``: the ``unpooled`` command (:func:`unpooled.cli.main.main`) from a checkout whose
sources are on the path, without the installed entry point."""

import sys

from unpooled.cli.main import main

sys.exit(main())
