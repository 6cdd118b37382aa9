"""Make tests/data/markers.json and tests/data/markers.npz: what transformers gives for
tokenizers that put other markers around a sentence than their family usually does (a
Qwen2 with a BOS, a Llama without one, a BERT whose template leaves out [SEP] ...), each a
reference model of tests/data/models/ with its tokenizer files changed
(tests/marker_variants.py says how). tests/test_markers.py makes the same folders and holds
attncli to these numbers without torch or transformers.

Run by hand, in the environment of make_model_references.py (its docstring says how to
make it), after it:

    HF_HUB_OFFLINE=1 python tests/data/make_marker_references.py

For each variant, its folder is made in a temporary folder and read with
AutoTokenizer.from_pretrained, as make_model_references.py reads the models; markers.json
holds, beside the variant's changes, the class AutoTokenizer chose and, for each of
SENTENCES, the ids, offsets and special tokens' mask (1 for a marker) that tokenizer(text,
return_offsets_mapping=True, return_special_tokens_mask=True) gives:

    {"sentences": [...], "versions": [...],
     "variants": {NAME: {"changes": {...}, "class": "Qwen2Tokenizer", "ids": [[...], ...],
                         "offsets": [[[start, end], ...], ...], "special": [[0, 1, ...], ...]}}}

For the decoders of marker_variants.FORWARD, markers.npz holds the model run over the first
sentence as make_model_references.run runs it (float32, eager attention, one thread):
NAME_ids (T,), NAME_attentions (L, H, T, T), NAME_hidden (L + 1, T, D), and for llama-eos,
whose </s> follows the sentence, NAME_logits (T, V) besides. A second run writes the same
bytes.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

import make_model_references as references  # noqa: E402: torch, transformers, and the models' own settings
import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from marker_variants import FORWARD, VARIANTS, make  # noqa: E402

SENTENCES = [references.SENTENCES[k] for k in (0, 3, 4)]  # plain words; an apostrophe; a café among 22 words
PREDICTED = "llama-eos"  # a decoder with a marker after the sentence, whose logits are kept: the next piece's


def record(name: str, folder: Path) -> tuple[dict, dict[str, np.ndarray]]:
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder, local_files_only=True)
    encodings = [tokenizer(text, return_offsets_mapping=True, return_special_tokens_mask=True) for text in SENTENCES]
    entry = {"changes": VARIANTS[name], "class": type(tokenizer).__name__,
             "ids": [e["input_ids"] for e in encodings],
             "offsets": [[list(span) for span in e["offset_mapping"]] for e in encodings],
             "special": [e["special_tokens_mask"] for e in encodings]}
    arrays = {}
    if name in FORWARD:
        tiny = references.MODELS[VARIANTS[name]["model"]]
        model = references.load(tiny, folder)
        result = references.run(model, tokenizer, SENTENCES[0], tiny.norm)
        kept = ("ids", "attentions", "hidden", *(("logits",) if name == PREDICTED else ()))
        arrays = {f"{name}_{key}": result[key] for key in kept}
    pieces = tokenizer.convert_ids_to_tokens(entry["ids"][0])
    print(f"{name}: {entry['class']}, {' '.join(pieces)}")
    return entry, arrays


def dumps(doc: dict) -> str:
    """The document as JSON, a line for each variant."""
    lines = [f" {json.dumps(name)}: {json.dumps(entry, ensure_ascii=False)}" for name, entry in doc["variants"].items()]
    head = ",\n".join(f"{json.dumps(key)}: {json.dumps(doc[key], ensure_ascii=False)}" for key in doc if key != "variants")
    return "{" + head + ',\n"variants": {\n' + ",\n".join(lines) + "\n}}\n"


def main() -> None:
    torch.set_num_threads(1)
    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    variants, arrays = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in VARIANTS:
            variants[name], forward = record(name, make(name, Path(tmp) / name))
            arrays.update(forward)
    versions = [f"{module.__name__}={module.__version__}" for module in (torch, transformers, references.tokenizers,
                                                                         np)]
    doc = {"sentences": SENTENCES, "versions": versions, "variants": variants}
    (HERE / "markers.json").write_text(dumps(doc), encoding="utf-8")
    references.write_npz(HERE / "markers.npz", arrays)
    for path in (HERE / "markers.json", HERE / "markers.npz"):
        print(f"{path.name}: {path.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()
