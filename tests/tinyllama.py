"""A tiny random Llama-family decoder written by the tests (a config, a safetensors file and
a tokenizer of whole words that puts <s> first), and a forward pass over it written as loops,
independent of attncli's: a rotation a pair at a time, a key/value head looked up for each
query head, the window and the causal mask as bounds of a loop, math.fsum."""

from __future__ import annotations

import json
import math

import numpy as np
from safetensors.numpy import save_file

from attncli.models import llama

VOCAB = ["<unk>", "<s>", "</s>", "the", "earth", "is", "like", "an", "orange", "bank", "river", "of", "sat", "on",
         "I", ","]
# Llama with what a trained one rarely has and the references lack: attention_bias (b_O
# too), tied embeddings, head_dim apart from hidden / heads, the older rope_scaling key
LLAMA = {"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
         "hidden_size": 8, "head_dim": 4, "intermediate_size": 12, "max_position_embeddings": 32,
         "vocab_size": len(VOCAB) + 2, "rms_norm_eps": 1e-5, "hidden_act": "silu", "attention_bias": True,
         "tie_word_embeddings": True, "rope_theta": 100.0, "rope_scaling": {"type": "linear", "factor": 2.0}}
# Mistral: a window of 3, one key/value head, an untied head, llama3 frequencies under rope_parameters
MISTRAL = {"model_type": "mistral", "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1,
           "hidden_size": 8, "intermediate_size": 10, "max_position_embeddings": 32, "vocab_size": len(VOCAB),
           "rms_norm_eps": 1e-6, "sliding_window": 3, "tie_word_embeddings": False,
           "rope_parameters": {"rope_type": "llama3", "rope_theta": 50.0, "factor": 4.0, "low_freq_factor": 1.0,
                               "high_freq_factor": 2.0, "original_max_position_embeddings": 8}}


def tiny_weights(config: dict, seed: int = 0, prefix: str = "model.") -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    weights = {}
    for name, shape in llama.expected_shapes(llama.read_config(config, "config.json")).items():
        if "norm" in name:
            weights[name] = (1 + 0.1 * rng.normal(size=shape)).astype(np.float32)
        else:
            weights[name] = rng.normal(scale=0.6, size=shape).astype(np.float32)
    return {(name if name == "lm_head.weight" else prefix + name): w for name, w in weights.items()}


def write_model(folder, config=LLAMA, weights=None):
    """The model's files; its tokenizer a SentencePiece-style BPE whose vocabulary is the
    words of VOCAB after ▁ (ignore_merges: a word in it is one piece, without a merge), an
    unknown character <unk>, and <s> before a sentence."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors

    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    save_file(weights if weights is not None else tiny_weights(config), str(folder / "model.safetensors"))
    pieces = [w if w.startswith("<") else f"▁{w}" for w in VOCAB]
    tokenizer = Tokenizer(models.BPE({w: i for i, w in enumerate(pieces)}, [], unk_token="<unk>", fuse_unk=True,
                                     ignore_merges=True))
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    tokenizer.decoder = decoders.Metaspace()
    tokenizer.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    tokenizer.add_special_tokens(["<unk>", "<s>", "</s>"])
    tokenizer.save(str(folder / "tokenizer.json"))
    return folder


def meta_apply_scaling(freqs, factor, low_freq_factor, high_freq_factor, old_context_len):
    """Llama 3.1's frequencies as Meta's reference code (llama-models, apply_scaling) writes
    them, a frequency at a time."""
    low_freq_wavelen = old_context_len / low_freq_factor
    high_freq_wavelen = old_context_len / high_freq_factor
    new = []
    for freq in freqs:
        wavelen = 2 * math.pi / freq
        if wavelen < high_freq_wavelen:
            new.append(freq)
        elif wavelen > low_freq_wavelen:
            new.append(freq / factor)
        else:
            smooth = (old_context_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
            new.append((1 - smooth) * freq / factor + smooth * freq)
    return new


def loop_frequencies(cfg: dict, d: int) -> list[float]:
    rope = cfg.get("rope_scaling") or cfg.get("rope_parameters") or {}
    theta = rope.get("rope_theta", cfg.get("rope_theta", 10_000.0))
    freqs = [theta ** (-2 * i / d) for i in range(d // 2)]
    kind = rope.get("rope_type", rope.get("type", "default"))
    if kind == "linear":
        return [f / rope["factor"] for f in freqs]
    if kind == "llama3":
        return meta_apply_scaling(freqs, rope["factor"], rope["low_freq_factor"], rope["high_freq_factor"],
                                  rope["original_max_position_embeddings"])
    return freqs


def loop_forward(ids, w, cfg, prefix="model."):
    """(hidden (L + 1, T, D), weights (L, H, T, T), logits (T, V)), by loops."""
    D, H, KV = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    d = cfg.get("head_dim") or D // H
    eps, window = cfg["rms_norm_eps"], cfg.get("sliding_window") or 10**9
    freqs = loop_frequencies(cfg, d)

    def W(name):
        return w[name if name == "lm_head.weight" else prefix + name].astype(np.float64)

    def linear(x, name):  # x: a list of floats; weight (out, in), a bias where there is one
        weight = W(name + ".weight")
        bias = W(name + ".bias") if prefix + name + ".bias" in w else np.zeros(len(weight))
        return [math.fsum(weight[o, i] * x[i] for i in range(len(x))) + bias[o] for o in range(len(weight))]

    def rms(x, name):
        g = W(name + ".weight")
        root = math.sqrt(math.fsum(v * v for v in x) / len(x) + eps)
        return [g[k] * (v / root) for k, v in enumerate(x)]

    def turn(v, m):  # one head's d features at position m: pair (i, i + d/2) by the angle m theta_i
        out = list(v)
        for i, f in enumerate(freqs):
            a, b, c, s = v[i], v[i + d // 2], math.cos(m * f), math.sin(m * f)
            out[i], out[i + d // 2] = a * c - b * s, b * c + a * s
        return out

    T = len(ids)
    X = [list(W("embed_tokens.weight")[t]) for t in ids]
    hidden, alphas = [X], []
    for l in range(cfg["num_hidden_layers"]):
        p = f"layers.{l}"
        N = [rms(x, f"{p}.input_layernorm") for x in X]
        q = [linear(n, f"{p}.self_attn.q_proj") for n in N]
        k = [linear(n, f"{p}.self_attn.k_proj") for n in N]
        v = [linear(n, f"{p}.self_attn.v_proj") for n in N]
        alpha = np.zeros((H, T, T))
        Z = [[0.0] * (H * d) for _ in range(T)]
        for h in range(H):
            g = h // (H // KV)  # the key/value head query head h uses
            for i in range(T):
                qi = turn(q[i][h * d:(h + 1) * d], i)
                seen = range(max(0, i - window + 1), i + 1)
                s = [math.fsum(a * b for a, b in zip(qi, turn(k[j][g * d:(g + 1) * d], j))) / math.sqrt(d)
                     for j in seen]
                top = max(s)
                e = [math.exp(x - top) for x in s]
                for j, x in zip(seen, e):
                    alpha[h, i, j] = x / math.fsum(e)
                for c in range(d):
                    Z[i][h * d + c] = math.fsum(alpha[h, i, j] * v[j][g * d + c] for j in seen)
        X = [[a + b for a, b in zip(x, linear(z, f"{p}.self_attn.o_proj"))] for x, z in zip(X, Z)]
        N = [rms(x, f"{p}.post_attention_layernorm") for x in X]
        inner = [[a / (1 + math.exp(-a)) * b for a, b in zip(linear(n, f"{p}.mlp.gate_proj"),
                                                             linear(n, f"{p}.mlp.up_proj"))] for n in N]
        X = [[a + b for a, b in zip(x, linear(m, f"{p}.mlp.down_proj"))] for x, m in zip(X, inner)]
        hidden.append(X)
        alphas.append(alpha)
    hidden[-1] = [rms(x, "norm") for x in X]
    head = W("embed_tokens.weight") if cfg.get("tie_word_embeddings") else W("lm_head.weight")
    logits = [[math.fsum(head[u, c] * x[c] for c in range(D)) for u in range(len(head))] for x in hidden[-1]]
    return np.array(hidden), np.array(alphas), np.array(logits)
