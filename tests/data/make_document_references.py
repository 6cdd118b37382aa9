"""Make tests/data/documents.npz: what transformers + torch give for a text as long as each
reference model of tests/data/models/ reads (its every position), so that `attncli stats
--document`, which computes a long text's attention a block of query rows at a time, is
held to torch's own attention matrices at full length (tests/test_stats_document.py).

Run by hand, in the environment of make_model_references.py (its docstring says how to
make it), after it:

    HF_HUB_OFFLINE=1 python tests/data/make_document_references.py

For each model: the longest prefix of make_model_references.CORPUS, by words, whose word
pieces (with the markers the tokenizer puts around it) fit the model's positions, read as
make_model_references.run reads a sentence (float32, eager attention, one thread):
NAME_text (its words), NAME_ids (T,) and NAME_attentions (L, H, T, T) float32. A second run
writes the same bytes.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE)]

import make_model_references as references  # noqa: E402: torch, transformers, and the models' own settings
import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402

OUT = HERE / "documents.npz"


def longest(tokenizer, positions: int) -> str:
    """The longest prefix of the corpus, by words, whose pieces fit `positions`."""
    words = references.CORPUS.split()
    low, high = 1, len(words)
    while low < high:  # the pieces grow with the words: the last prefix that fits
        mid = (low + high + 1) // 2
        if len(tokenizer(" ".join(words[:mid]))["input_ids"]) <= positions:
            low = mid
        else:
            high = mid - 1
    return " ".join(words[:low])


def record(name: str) -> dict[str, np.ndarray]:
    folder = references.OUT / name
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder, local_files_only=True)
    model = references.load(references.MODELS[name], folder)
    config = model.config
    # RoBERTa's positions start after its padding index: two fewer pieces than it has positions
    offset = config.pad_token_id + 1 if "roberta" in name else 0
    positions = getattr(config, "max_position_embeddings", None) or config.n_positions
    text = longest(tokenizer, positions - offset)
    enc = tokenizer(text, return_tensors="pt")
    with torch.inference_mode():
        out = model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"], output_attentions=True)
    return {f"{name}_text": np.array(text), f"{name}_ids": enc["input_ids"][0].numpy().astype(np.int32),
            f"{name}_attentions": torch.stack(out.attentions)[:, 0].numpy().astype(np.float32)}


def main() -> None:
    torch.set_num_threads(1)  # the same sums in the same order each run
    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    arrays = {}
    for name in references.MODELS:
        arrays.update(record(name))
    arrays["versions"] = np.array([f"torch {torch.__version__}", f"transformers {transformers.__version__}"])
    with open(OUT, "wb") as f:
        np.savez_compressed(f, **arrays)


if __name__ == "__main__":
    main()
