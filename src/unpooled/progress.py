"""Progress bars on standard error, shown only when it is a terminal (or UNPOOLED_PROGRESS=1)."""

from __future__ import annotations

import os
import sys

from tqdm import tqdm


def progress_bar(**kwargs) -> tqdm:
    force = os.environ.get("UNPOOLED_PROGRESS")
    disable = not sys.stderr.isatty() if force is None else force in ("0", "")
    return tqdm(file=sys.stderr, disable=disable, dynamic_ncols=True, **kwargs)
