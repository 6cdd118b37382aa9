"""A tiny random BERT written by the tests (a config and a safetensors file of 2 layers, 2
heads, hidden 8), and a forward pass over it written as loops, independent of attncli's."""

from __future__ import annotations

import json
import math

import numpy as np
from safetensors.numpy import save_file

from attncli.models import bert

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "earth", "is", "like", "an", "orange",
         "bank", "river", "un", "##believ", "##ably", ",", ".", "'", "t"]
TINY = {"model_type": "bert", "num_hidden_layers": 2, "num_attention_heads": 2, "hidden_size": 8,
        "intermediate_size": 12, "max_position_embeddings": 16, "type_vocab_size": 2, "vocab_size": len(VOCAB),
        "layer_norm_eps": 1e-12, "hidden_act": "gelu"}


def tiny_weights(config: dict, seed: int = 0, prefix: str = "bert.") -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    c = bert.read_config(config, "config.json")
    weights = {}
    for name, shape in bert.expected_shapes(c).items():
        if "LayerNorm.weight" in name:
            weights[prefix + name] = (1 + 0.1 * rng.normal(size=shape)).astype(np.float32)
        else:
            weights[prefix + name] = rng.normal(scale=0.5, size=shape).astype(np.float32)
    weights[prefix + "pooler.dense.weight"] = rng.normal(size=(c.hidden, c.hidden)).astype(np.float32)
    return weights


def write_model(folder, config=TINY, weights=None, tokenizer="json"):
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    save_file(weights if weights is not None else tiny_weights(config), str(folder / "model.safetensors"))
    (folder / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    if tokenizer == "json":
        from tokenizers.implementations import BertWordPieceTokenizer

        BertWordPieceTokenizer(str(folder / "vocab.txt"), lowercase=True).save(str(folder / "tokenizer.json"))
        (folder / "vocab.txt").unlink()
    return folder


# --- an independent forward pass: loops over tokens, heads and features, math.erf, fsum


def loop_forward(ids, w, cfg, prefix="bert."):
    D, H = cfg["hidden_size"], cfg["num_attention_heads"]
    dh = D // H
    eps = cfg["layer_norm_eps"]

    def W(name):
        return w[prefix + name].astype(np.float64)

    def linear(x, name):  # x: list of D_in floats; weight (out, in)
        weight, bias = W(name + ".weight"), W(name + ".bias")
        return [math.fsum(weight[o, i] * x[i] for i in range(len(x))) + bias[o] for o in range(weight.shape[0])]

    def norm(x, name):
        mean = math.fsum(x) / len(x)
        var = math.fsum((v - mean) ** 2 for v in x) / len(x)
        g, b = W(name + ".weight"), W(name + ".bias")
        return [(v - mean) / math.sqrt(var + eps) * g[k] + b[k] for k, v in enumerate(x)]

    T = len(ids)
    X = [norm([W("embeddings.word_embeddings.weight")[ids[t], k] + W("embeddings.position_embeddings.weight")[t, k]
               + W("embeddings.token_type_embeddings.weight")[0, k] for k in range(D)], "embeddings.LayerNorm")
         for t in range(T)]
    hidden, alphas = [X], []
    for l in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{l}"
        Q = [linear(x, f"{p}.attention.self.query") for x in X]
        K = [linear(x, f"{p}.attention.self.key") for x in X]
        V = [linear(x, f"{p}.attention.self.value") for x in X]
        alpha = np.zeros((H, T, T))
        Z = [[0.0] * D for _ in range(T)]
        for h in range(H):
            cols = range(h * dh, (h + 1) * dh)
            for i in range(T):
                s = [math.fsum(Q[i][c] * K[j][c] for c in cols) / math.sqrt(dh) for j in range(T)]
                e = [math.exp(v - max(s)) for v in s]
                for j in range(T):
                    alpha[h, i, j] = e[j] / math.fsum(e)
                for c in cols:
                    Z[i][c] = math.fsum(alpha[h, i, j] * V[j][c] for j in range(T))
        A = [linear(z, f"{p}.attention.output.dense") for z in Z]
        X1 = [norm([x[k] + a[k] for k in range(D)], f"{p}.attention.output.LayerNorm") for x, a in zip(X, A)]
        inner = [[0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in linear(x, f"{p}.intermediate.dense")] for x in X1]
        F = [linear(u, f"{p}.output.dense") for u in inner]
        X = [norm([x[k] + f[k] for k in range(D)], f"{p}.output.LayerNorm") for x, f in zip(X1, F)]
        hidden.append(X)
        alphas.append(alpha)
    return np.array(hidden), np.array(alphas)
