"""Draw ``docs/_static/training_history.png``, the picture of the README.

It runs the gallery example ``examples/plot_training_history.py`` (at full size unless
``SKLEARN_RNN_QUICK=1``) and lays its three training histories out in one row::

    OMP_NUM_THREADS=1 python docs/readme_figure.py
"""

from __future__ import annotations

import runpy
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from sklearn_rnn.plotting import plot_training_history

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    example = runpy.run_path(str(ROOT / "examples" / "plot_training_history.py"))
    plt.close("all")
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.3), sharey=True)
    for ax, (name, model) in zip(axes, example["models"].items()):
        plot_training_history(model, ax=ax)
        ax.set_title(f"optimizer={name!r}", fontsize="medium")
        ax.get_legend().set_visible(name == "adam")
    fig.suptitle(
        f"RNNClassifier on the temporal order task (length {example['length']}): "
        "training loss, validation accuracy, restored epoch",
        fontsize="medium",
    )
    fig.tight_layout()
    target = ROOT / "docs" / "_static" / "training_history.png"
    fig.savefig(target, dpi=80)
    print(f"wrote {target} ({target.stat().st_size // 1024} KiB)")


if __name__ == "__main__":
    main()
