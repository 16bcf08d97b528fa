"""Order of the examples in the gallery: a first-steps path, then the rest by file name."""

from __future__ import annotations

import os

#: Shown first, in this order; every other ``plot_*.py`` follows alphabetically.
FIRST = ("plot_quickstart.py", "plot_input_formats.py", "plot_training_history.py")


class FirstStepsThenByName:
    """sphinx-gallery ``within_subsection_order`` key."""

    def __init__(self, src_dir: str) -> None:
        self.src_dir = src_dir

    def __call__(self, filename: str) -> tuple[int, str]:
        name = os.path.basename(filename)
        return (FIRST.index(name) if name in FIRST else len(FIRST), name)

    def __repr__(self) -> str:  # sphinx-gallery caches the configuration by its repr
        return f"<{type(self).__name__}>"
