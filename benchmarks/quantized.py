"""One sentence through a quantized GGUF file of a 1B model's shape, against the same model's
safetensors folder: peak memory and time of whole processes.

    python benchmarks/quantized.py [--model FOLDER] [--type Q4_K] [--runs 3] [--threads 0] [--keep DIR]

FOLDER is a model benchmarks/make_llama.py wrote (default: Llama-3.2-1B's shape, written for
the run: random weights, BF16, tiny-llama's tokenizer). Its GGUF file of --type is written
beside it by tests/tinygguf.py, as llama.cpp's converter lays one out (every matrix of that
type: the K-quant files llama.cpp's quantize makes mix Q4_K with Q6_K, which dequantizes at
about the same cost; norms F32, the RoPE scaling as rope_freqs). Then, alternating --runs
times, `attncli scores SENTENCE --model M --json` for M the folder and the file, in float64
(the default) and float32; each one's medians of wall time, CPU time and peak RSS (wait4's
rusage), and the issue's bound on the file's peak: 1.5 times the file plus one layer's
weights in the pass's precision.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from scale import SENTENCE, measure
from startup import machine

HERE = Path(__file__).resolve().parent
ATTNCLI = str(Path(sys.executable).parent / "attncli")


def layer_bytes(folder: Path, itemsize: int) -> int:
    """One layer's weights, widened to `itemsize` bytes a number (from config.json alone)."""
    from attncli.models import llama

    config = llama.read_config(json.loads((folder / "config.json").read_text()), folder / "config.json")
    return itemsize * sum(math.prod(shape) for name, shape in llama.expected_shapes(config).items()
                          if name.startswith("layers.0."))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="a folder benchmarks/make_llama.py wrote (default: one written for the run)")
    parser.add_argument("--type", default="Q4_K", help="the GGUF file's type: Q4_K, Q8_0, Q4_0, F16 ...")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=0, help="threads each process may use; 0: its default")
    parser.add_argument("--keep", help="a folder to write the model and its file in, and leave them there")
    args = parser.parse_args()

    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="attncli-gguf-"))
    folder = Path(args.model) if args.model else work / "llama-1b"
    if not folder.exists():
        subprocess.run([sys.executable, str(HERE / "make_llama.py"), str(folder)], check=True)
    path = work / f"llama-1b-{args.type}.gguf"
    if not path.exists():  # in a process of its own: a child's peak RSS counts its parent's at the fork
        subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {str(HERE.parent / 'tests')!r}); "
                        f"import tinygguf, pathlib; tinygguf.write_gguf(pathlib.Path({str(folder)!r}), "
                        f"pathlib.Path({str(path)!r}), {args.type!r})"], check=True)
    env = dict(os.environ)
    if args.threads:
        env.update(OMP_NUM_THREADS=str(args.threads), OPENBLAS_NUM_THREADS=str(args.threads))
    runs = {(kind, precision): [] for kind in ("safetensors", "gguf") for precision in ("float64", "float32")}
    for _ in range(args.runs):
        for (kind, precision), measured in runs.items():
            model = str(folder if kind == "safetensors" else path)
            measured.append(measure([ATTNCLI, "scores", SENTENCE, "--model", model, "--json", "--precision",
                                     precision], env))
    size = path.stat().st_size
    weights = sum(p.stat().st_size for p in folder.glob("*.safetensors"))
    print(f"machine: {machine()}; threads: {args.threads or 'each its default'}; runs: {args.runs}, medians")
    print(f"sentence: {SENTENCE!r}; the folder's weights {weights / 1e6:,.0f} MB (BF16), the {args.type} file "
          f"{size / 1e6:,.0f} MB")
    print("| model | precision | wall s | CPU s | peak RSS MB | bound MB (1.5 x file + a layer) |")
    print("| --- | --- | --- | --- | --- | --- |")
    for (kind, precision), measured in runs.items():
        wall, cpu, rss = (statistics.median(m[i] for m in measured) for i in range(3))
        bound = (1.5 * size + layer_bytes(folder, 8 if precision == "float64" else 4)) / 1e6 if kind == "gguf" else None
        shown = f"{bound:,.0f}" if bound is not None else "-"
        print(f"| {kind} | {precision} | {wall:.2f} | {cpu:.2f} | {rss:,.0f} | {shown} |")


if __name__ == "__main__":
    main()
