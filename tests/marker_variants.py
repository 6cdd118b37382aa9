"""Tokenizers that put other markers around a sentence than their family usually does: a
reference model of tests/data/models/ copied, its tokenizer.json and tokenizer_config.json
changed. tests/data/make_marker_references.py made each with this module and recorded the
ids and offsets transformers 5.24.0 gives (tests/data/markers.json), and for a few decoders
the forward pass over one sentence (tests/data/markers.npz); tests/test_markers.py makes
them again and holds attncli to those numbers. Plain json and shutil: no torch.

Each variant names its model and its changes: "post_processor" the tokenizer.json's new one
(None: null), "remove" the tokenizer.json keys taken out, "added_tokens" the added tokens
appended to it, "tokenizer_config" the keys set in tokenizer_config.json.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

MODELS = Path(__file__).parent / "data" / "models"


def template(*single: str, ids: dict[str, int]) -> dict:
    """A TemplateProcessing of `single` ("$A" the sentence, any other a marker of `ids`),
    as tokenizers writes one."""
    items = [{"Sequence": {"id": "A", "type_id": 0}} if piece == "$A" else {"SpecialToken": {"id": piece, "type_id": 0}}
             for piece in single]
    return {"type": "TemplateProcessing", "single": items, "pair": items + [{"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {piece: {"id": piece, "ids": [i], "tokens": [piece]} for piece, i in ids.items()}}


BOS = "<｜begin▁of▁sentence｜>"  # DeepSeek-R1-Distill-Qwen's, an added token within Qwen2's padded table
BACKEND = {"tokenizer_class": "PreTrainedTokenizerFast"}  # read by TokenizersBackend: the file's markers

VARIANTS = {
    # BERT, DistilBERT: BertTokenizer puts [CLS] and [SEP] (as tokenizer_config.json names them)
    # whatever tokenizer.json's template; TokenizersBackend puts the template's
    "bert-template-without-sep": {"model": "tiny-bert", "post_processor": template("[CLS]", "$A", ids={"[CLS]": 2})},
    "bert-without-post-processor": {"model": "tiny-bert", "post_processor": None},
    "bert-mask-first": {"model": "tiny-bert", "tokenizer_config": {"cls_token": "[MASK]"}},
    "bert-add-bos-token": {"model": "tiny-bert", "tokenizer_config": {"add_bos_token": True, "bos_token": "[MASK]",
                                                                      "add_eos_token": False}},
    "bert-backend-without-sep": {"model": "tiny-bert", "tokenizer_config": BACKEND,
                                 "post_processor": template("[CLS]", "$A", ids={"[CLS]": 2})},
    "bert-backend-without-markers": {"model": "tiny-bert", "tokenizer_config": BACKEND, "post_processor": None},
    "distilbert-template-without-sep": {"model": "tiny-distilbert",
                                        "post_processor": template("[CLS]", "$A", ids={"[CLS]": 2})},
    "distilbert-unknown-first": {"model": "tiny-distilbert", "tokenizer_config": {"cls_token": "[UNK]"}},
    "distilbert-backend-sep-only": {"model": "tiny-distilbert", "tokenizer_config": BACKEND,
                                    "post_processor": template("$A", "[SEP]", ids={"[SEP]": 3})},
    # RoBERTa: RobertaTokenizer's RobertaProcessing, trimming offsets as tokenizer_config.json says
    "roberta-template-without-eos": {"model": "tiny-roberta", "post_processor": template("<s>", "$A", ids={"<s>": 0})},
    "roberta-mask-first": {"model": "tiny-roberta", "tokenizer_config": {"cls_token": "<mask>"}},
    "roberta-untrimmed-offsets": {"model": "tiny-roberta", "tokenizer_config": {"trim_offsets": False}},
    "roberta-backend-without-eos": {"model": "tiny-roberta", "tokenizer_config": BACKEND,
                                    "post_processor": template("<s>", "$A", ids={"<s>": 0})},
    # XLM-RoBERTa: XLMRobertaTokenizer's bos_token and eos_token
    "xlm-roberta-template-without-bos": {"model": "tiny-xlm-roberta",
                                         "post_processor": template("$A", "</s>", ids={"</s>": 2})},
    "xlm-roberta-mask-first": {"model": "tiny-xlm-roberta", "tokenizer_config": {"bos_token": "<mask>"}},
    "xlm-roberta-backend-without-bos": {"model": "tiny-xlm-roberta", "tokenizer_config": BACKEND,
                                        "post_processor": template("$A", "</s>", ids={"</s>": 2})},
    # GPT-2: the template's markers; add_bos_token changes nothing
    "gpt2-bos": {"model": "tiny-gpt2", "post_processor": template("<|endoftext|>", "$A", ids={"<|endoftext|>": 500})},
    "gpt2-eos": {"model": "tiny-gpt2", "post_processor": template("$A", "<|endoftext|>", ids={"<|endoftext|>": 500})},
    "gpt2-add-bos-token": {"model": "tiny-gpt2", "tokenizer_config": {"add_bos_token": True}},
    # Llama, Mistral: the template's markers, none without one; add_bos_token changes nothing
    "llama-without-bos": {"model": "tiny-llama", "tokenizer_config": {"add_bos_token": False},
                          "post_processor": template("$A", ids={})},
    "llama-without-post-processor": {"model": "tiny-llama", "remove": ["post_processor"]},
    "llama-add-bos-token-false": {"model": "tiny-llama", "tokenizer_config": {"add_bos_token": False}},
    "llama-eos": {"model": "tiny-llama", "tokenizer_config": {"add_eos_token": True},
                  "post_processor": template("<s>", "$A", "</s>", ids={"<s>": 1, "</s>": 2})},
    "mistral-without-bos": {"model": "tiny-mistral", "post_processor": None},
    "mistral-eos": {"model": "tiny-mistral", "post_processor": template("<s>", "$A", "</s>", ids={"<s>": 1, "</s>": 2})},
    # Qwen2: Qwen2Tokenizer whatever tokenizer_config.json names, with the template's markers
    "qwen2-bos": {"model": "tiny-qwen2", "post_processor": template(BOS, "$A", ids={BOS: 501}),
                  "added_tokens": [{"id": 501, "content": BOS, "single_word": False, "lstrip": False, "rstrip": False,
                                    "normalized": False, "special": True}],
                  "tokenizer_config": {"tokenizer_class": "LlamaTokenizerFast", "bos_token": BOS,
                                       "add_bos_token": True, "add_eos_token": False}},
    "qwen2-add-bos-token": {"model": "tiny-qwen2", "tokenizer_config": {"add_bos_token": True,
                                                                        "bos_token": "<|endoftext|>"}},
    "qwen2-eos": {"model": "tiny-qwen2", "post_processor": template("$A", "<|endoftext|>", ids={"<|endoftext|>": 500})},
}
# the variants whose forward pass over the first sentence is recorded too (markers.npz)
FORWARD = ("qwen2-bos", "gpt2-bos", "llama-without-bos", "llama-eos")


def make(name: str, folder: Path, changes: dict | None = None) -> Path:
    """The variant `name` (its `changes`, VARIANTS' by default) written in `folder`: its model's
    folder, weights and all, with its tokenizer files changed."""
    changes = VARIANTS[name] if changes is None else changes
    shutil.copytree(MODELS / changes["model"], folder)
    tokenizer = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    if "post_processor" in changes:
        tokenizer["post_processor"] = changes["post_processor"]
    for key in changes.get("remove", []):
        del tokenizer[key]
    tokenizer["added_tokens"] += changes.get("added_tokens", [])
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer, ensure_ascii=False), encoding="utf-8")
    settings = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    settings.update(changes.get("tokenizer_config", {}))
    (folder / "tokenizer_config.json").write_text(json.dumps(settings, ensure_ascii=False), encoding="utf-8")
    return folder
