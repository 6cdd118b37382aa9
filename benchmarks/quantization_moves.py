"""How far each GGUF type moves the tiny models' attention, against the F32 file of the same
model: the table of docs/guide/gguf.md's "How far quantization moves attention".

    python benchmarks/quantization_moves.py

For tiny-llama and tiny-qwen2 (tests/data/models) and the wide Llama of tests/tinygguf.py
(rows of 256, for the K-quants), each written by tests/tinygguf.py in F32 and in each type,
over three sentences: the largest and the mean |dalpha| of any weight of any layer and head,
and the mean Jensen-Shannon divergence of a row (documents/drift.py's js_divergence), in nats.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

SENTENCES = ["The earth is like an orange", "I sat on the bank of the river, didn't I?",
             "Every morning the old man walked to the bank of the river and sat there for hours"]
KINDS = {"tiny-llama": ["F16", "BF16", "Q8_0", "Q5_1", "Q5_0", "Q4_1", "Q4_0"],
         "tiny-qwen2": ["F16", "BF16", "Q8_0", "Q5_1", "Q5_0", "Q4_1", "Q4_0"],
         "wide": ["F16", "BF16", "Q8_0", "Q5_1", "Q4_0", "Q4_K"]}


def main() -> None:
    import tinygguf

    from attncli.documents.drift import js_divergence
    from attncli.models import load_model

    out = Path(tempfile.mkdtemp(prefix="attncli-moves-"))
    models = HERE.parent / "tests" / "data" / "models"
    wide = tinygguf.write_wide(out / "wide", models / "tiny-llama")
    print("| model | type | largest \\|Δα\\| | mean \\|Δα\\| | mean JS |")
    print("| --- | --- | --- | --- | --- |")
    for source, kinds in KINDS.items():
        folder = wide if source == "wide" else models / source
        base = load_model(str(tinygguf.write_gguf(folder, out / f"{source}-F32.gguf", "F32")))
        for kind in kinds:
            model = load_model(str(tinygguf.write_gguf(folder, out / f"{source}-{kind}.gguf", kind)))
            largest, means, js = 0.0, [], []
            for sentence in SENTENCES:
                ids = base.encode(sentence).ids
                a = np.asarray(base.family.forward(ids, base.weights, base.config).weights)
                b = np.asarray(model.family.forward(ids, model.weights, model.config).weights)
                gap = np.abs(a - b)
                largest, means, js = max(largest, gap.max()), means + [gap.mean()], js + [js_divergence(a, b).mean()]
            print(f"| {source} | {kind} | {largest:.1e} | {np.mean(means):.1e} | {np.mean(js):.1e} |")


if __name__ == "__main__":
    main()
