"""DistilBERT (Sanh et al., 2019): BERT's forward pass under other names, read by bert.py's.

Its layer is BERT's, operation for operation (attention, LayerNorm(X + A), the GELU
feed-forward, LayerNorm(X' + F)); what differs is only what its files call things. Its
config.json names the sizes n_layers, n_heads, dim, hidden_dim and the activation
`activation`; its tensors are transformer.layer.N.attention.q_lin (k_lin, v_lin,
out_lin), sa_layer_norm, ffn.lin1 and lin2, output_layer_norm (with or without
"distilbert."); it has no token types, and every LayerNorm's epsilon is 1e-12, fixed in
the model's code. Its tokenizer is BERT's WordPiece.

This module holds those names, and nothing of the pass: its weights are read under its own
names and handed to bert.py under BERT's (as_bert), so the order of a layer's operations is
written once, in bert.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from attncli.errors import ModelError
from attncli.models import bert
from attncli.models.bert import CAUSAL, LINEAR_LAYOUT, pass_bytes, read_tokenizer, run_bytes  # noqa: F401: the family interface, BERT's
from attncli.models.layers import Consumer, Pass, Renamed

MODEL_TYPES = ("distilbert",)  # config.json's model_type
# Config's sizes, by their keys in DistilBERT's config.json
SIZES = {"layers": "n_layers", "heads": "n_heads", "hidden": "dim", "intermediate": "hidden_dim",
         "max_positions": "max_position_embeddings", "vocab_size": "vocab_size"}
MOST = {key: bert.MOST[bert.SIZES[size]] for size, key in SIZES.items()}
NORM_EPS = 1e-12  # DistilBERT's LayerNorms', whatever config.json says
# A layer's parts: BERT's name -> DistilBERT's, under encoder.layer.N. and transformer.layer.N.
PARTS = {"attention.self.query": "attention.q_lin", "attention.self.key": "attention.k_lin",
         "attention.self.value": "attention.v_lin", "attention.output.dense": "attention.out_lin",
         "attention.output.LayerNorm": "sa_layer_norm", "intermediate.dense": "ffn.lin1",
         "output.dense": "ffn.lin2", "output.LayerNorm": "output_layer_norm"}
BERTS = {own: theirs for theirs, own in PARTS.items()}


def read_config(raw: dict, path: Path) -> bert.BertConfig:
    """config.json's sizes (`raw`, read from `path`), each checked, as a BERT's without token
    types. sinusoidal_pos_embds is read, not refused: it fills a position table the file
    lacks when a model is made, and transformers reads the file's table either way."""
    sizes = bert.read_sizes(raw, path, SIZES, MOST)
    sinusoidal = raw.get("sinusoidal_pos_embds", False)
    if not isinstance(sinusoidal, bool):
        raise ModelError(f"{path}: sinusoidal_pos_embds is {sinusoidal!r}; it must be true or false")
    return bert.BertConfig(**sizes, norm_eps=NORM_EPS, activation=bert.activation(raw, "activation", path),
                           type_vocab_size=0, model_type="distilbert")


def _renamed(name: str, parts: dict[str, str], source: str, target: str) -> str:
    """`name` with a layer's part renamed from `source`'s layout to `target`'s (the
    embeddings are named alike in both)."""
    if not name.startswith(source):
        return name
    l, rest = name[len(source):].split(".", 1)
    part, kind = rest.rsplit(".", 1)  # kind: weight or bias
    return f"{target}{l}.{parts[part]}.{kind}"


def expected_shapes(config: bert.BertConfig) -> dict[str, tuple[int, ...]]:
    """Every tensor the forward pass reads, by its name without a "distilbert." prefix, and its shape."""
    return {_renamed(name, PARTS, "encoder.layer.", "transformer.layer."): shape
            for name, shape in bert.expected_shapes(config).items()}


def stored_name(name: str, header: dict) -> str | None:
    """The name a tensor has in the file: with or without "distilbert." (DistilBertModel
    saves it without, DistilBertForMaskedLM with)."""
    return next((candidate for candidate in (name, f"distilbert.{name}") if candidate in header), None)


def as_bert(weights: Mapping) -> Mapping:
    """The weights under BERT's names, for bert.py's pass (the same arrays, not copies)."""
    return Renamed(weights, {_renamed(name, BERTS, "transformer.layer.", "encoder.layer."): name for name in weights})


def run(ids: np.ndarray, weights: dict, config: bert.BertConfig, to: Consumer, *,
        lengths: np.ndarray | None = None, rows: int | None = None) -> None:
    bert.run(ids, as_bert(weights), config, to, lengths=lengths, rows=rows)


def forward(ids: np.ndarray, weights: dict, config: bert.BertConfig, *, keep: tuple[int, ...] = (),
            lengths: np.ndarray | None = None) -> Pass:
    return bert.forward(ids, as_bert(weights), config, keep=keep, lengths=lengths)


def projections(weights: dict, l: int) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    return bert.projections(as_bert(weights), l)


def passed_on(V: np.ndarray, weights: dict, l: int, config: bert.BertConfig) -> np.ndarray:
    return bert.passed_on(V, as_bert(weights), l, config)


def blocks(ids: np.ndarray, weights: dict, config: bert.BertConfig) -> list:
    return bert.blocks(ids, as_bert(weights), config)


def run_from(X: np.ndarray, start: int, weights: dict, config: bert.BertConfig) -> np.ndarray:
    return bert.run_from(X, start, as_bert(weights), config)


def embedded(ids: np.ndarray, weights: dict, config: bert.BertConfig) -> np.ndarray:
    return bert.embedded(ids, as_bert(weights), config)
