"""Make tests/data/models/: a tiny model of each architecture attncli reads (BERT,
DistilBERT, RoBERTa, XLM-RoBERTa, GPT-2, Llama, Qwen2, Mistral), in the Hugging Face layout
with its tokenizer, and NAME.npz beside each: what the real transformers + torch computed
with it for a few sentences.

The numpy forward passes of attncli are checked against these numbers. The tests only read
the files; they need neither torch nor transformers. This script is run by hand when the
models have to be made again (another architecture, another sentence), in a separate
environment:

    python -m venv venv-torch && . venv-torch/bin/activate
    pip install torch==2.13.0 transformers==5.24.0 safetensors tokenizers numpy
    HF_HUB_OFFLINE=1 python tests/data/make_model_references.py [NAME ...]

NAME is one of MODELS' keys (tiny-bert, tiny-distilbert, tiny-roberta, tiny-xlm-roberta,
tiny-gpt2, tiny-llama, tiny-qwen2, tiny-mistral); none makes them all. Nothing is fetched from a hub:
each tokenizer is trained here with the tokenizers library on CORPUS, each model is built
from its config, and both are saved with save_pretrained and loaded back from the folder.
tests/data/models/NAME/ is replaced as a whole. A second run writes the same bytes: seeds
are fixed, torch runs on one thread, and the .npz's members carry a fixed date (numpy's
savez stamps the time of writing).

The models. Each has 2 layers and a vocabulary of a few hundred pieces. Their weights are
the config's random init (seed 0) with a large initializer_range, so that attention rows
are far from uniform (the script prints the mean of each row's largest weight against the
uniform row's), and then every 1-D parameter (each bias and each norm's weight) is moved
off its init (zeros, ones) by N(0, 0.1^2): with biases left at 0 a forward pass that
forgot one would still match.

    tiny-bert         BertModel (its pooler saved too, never read by attncli), 2 token
                      types, WordPiece (lowercased) trained as tiny-distilbert's, F32
    tiny-distilbert   DistilBertModel, WordPiece (lowercased), F32
    tiny-roberta      RobertaModel, byte-level BPE, pad_token_id 1: positions start at 2
    tiny-xlm-roberta  XLMRobertaModel, Unigram (SentencePiece-style, ▁), F16 weights
    tiny-gpt2         GPT2LMHeadModel, byte-level BPE, tied embeddings (no lm_head.weight
                      in the file), gelu_new, no BOS added to a sentence
    tiny-llama        LlamaForCausalLM, 4 query heads over 2 key/value heads, RoPE with
                      llama3 scaling, untied lm_head, BF16 weights in 4 shards,
                      SentencePiece-style BPE with byte fallback and a BOS <s>
    tiny-qwen2        Qwen2ForCausalLM, 4 query heads over 1 key/value head, biases on
                      q/k/v, rope_theta 1e6, tied embeddings, config.vocab_size above the
                      tokenizer's (padded to a multiple of 64, as Qwen2's is), byte-level
                      BPE with Qwen2's pre-tokenizer, no BOS
    tiny-mistral      MistralForCausalLM, 4 over 2 heads, sliding_window 4, RoPE with
                      linear scaling (factor 2), Llama's tokenizer (as Mistral 7B has;
                      AutoTokenizer reads it as a TokenizersBackend, tokenizer.json as it
                      is, transformers 5 mapping mistral there when mistral_common is not
                      installed: the same pieces)

Each runs in float32 on the CPU, loaded back from its folder with from_pretrained(dtype=
torch.float32) (the F16 and BF16 weights widened to float32, so that the reference is of
exactly the stored weights), in eval mode, under torch.inference_mode(), with the eager
attention (the one that returns attention weights), one sentence at a time: no padding, an
attention mask of all ones, token types left to the model (all 0).

For each sentence k (0-based, in the order of SENTENCES) NAME.npz holds:

    ids_k         int32 (T,)             the ids tokenizer(text) gives with its defaults:
                                         [CLS] ... [SEP] (BERT, DistilBERT), <s> ... </s>
                                         (RoBERTa, XLM-R), <s> ... (Llama, Mistral), the
                                         pieces alone (GPT-2, Qwen2)
    offsets_k     int32 (T, 2)           each piece's character span in the text, from the
                                         fast tokenizer ([0, 0] for the special tokens)
    attentions_k  float32 (L, H, T, T)   layers x query heads x query row x key column;
                                         rows sum to 1, a decoder's are 0 above the
                                         diagonal (and Mistral's beyond its window)
    hidden_k      float32 (L + 1, T, D)  transformers' hidden_states: [0] the embeddings'
                                         output, [i] layer i's output, except the last:
                                         BERT, DistilBERT, RoBERTa, XLM-R have no final norm, so
                                         [L] is the last layer's output (after its own
                                         LayerNorm); GPT-2's [L] is after the final ln_f,
                                         Llama's, Qwen2's and Mistral's after the final norm
                                         (RMSNorm), not the last layer's output

and, for the decoders (GPT-2, Llama, Qwen2, Mistral):

    prenorm_k     float32 (T, D)         the last layer's output, before the final norm
                                         (what the final norm received: a forward pre-hook)
    logits_k      float32 (T, V)         the LM head at every position, V config.vocab_size

and besides:

    sentences     unicode (n,)           the texts
    versions      unicode (m,)           "name=value": python, torch, transformers,
                                         tokenizers, safetensors, numpy, then
                                         "FILE sha256=HEX" for each weights file

For each model it prints its parameter count, its files and their bytes, the pieces of the
first sentence, the mean of each attention row's largest weight (against a uniform row's)
and the spread of a row's scores, for a decoder the largest weight above the diagonal (0),
the rotary frequencies the scaling changed and, for Mistral, the window against the full
causal mask. It checks besides that tokenizer.json read by the tokenizers library alone
(as attncli reads it) gives the ids and offsets transformers' tokenizer gives.

Mistral's window: transformers 5.24's eager attention does apply it (masking_utils.py,
sliding_window_overlay: a key kv is kept for the query q when kv > q - sliding_window, and
causal_mask_function when kv <= q), so a row sees its own position and the w - 1 before it.
The script runs the long sentence again with sliding_window=None and prints where the two
differ: with the window, the weights at q - w and before are exactly 0; with the full
causal mask they are not.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import platform
import shutil
import sys
import zipfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np
import safetensors
import tokenizers
import torch
import transformers
from tokenizers import models, pre_tokenizers, trainers

SENTENCES = [
    "The earth is like an orange",
    "I sat on the bank of the river",
    "The bank raised interest rates",
    "Attention didn't tokenize unbelievably well",
    "Every morning the old man walked to the bank of the river and sat there for hours watching "
    "the water move past the café",
]

# What every tokenizer is trained on: plain sentences with the words of SENTENCES, but no
# apostrophe and no accent, so that "didn't" and "café" show each tokenizer's way with
# what it never saw (byte fallback, [UNK], byte-level pieces).
CORPUS = """\
The earth is like an orange. The earth turns around the sun, and the sun is bright and warm. \
An orange is round like the earth, and an orange is sweet. We eat an orange every morning. \
The moon moves around the earth, and the earth moves around the sun. The sun is a star, and \
the earth is not.

I sat on the bank of the river. The river is wide and the water is slow. The old man who \
lived by the river walked to the bank every morning. He sat there for hours watching the \
water move past the trees. The bank of the river is green in the spring, and the birds sing \
there all day. The river runs to the sea, and the sea is wide and deep.

The bank raised interest rates. The bank in the town is old, and the people who save money \
there pay attention to the rates. When the bank raised the rates, the interest on the money \
rose. People like low rates when they borrow, and they like high rates when they save. The \
bank pays interest to the people who save, and the people who borrow pay interest to the bank.

Attention is what we pay to the things we like. We pay attention to the river, to the earth \
and to the sun. A tokenizer splits a word into pieces, and a model reads every piece well. \
The model reads the words and pays attention to each of them. Some words are unbelievably \
long, and the tokenizer splits them into many pieces. The pieces are small, but the model \
puts them together again.

The man walked to the town in the morning and to the river in the evening. He liked the \
walk, and he liked the slow water. The trees by the river were old and tall. The birds sat \
in the trees and watched the man walk past. In the evening the sun was low and red, and the \
water was like a mirror. He sat there and did not move for a long time.

Every word has a meaning, and some words have more than one. The word bank can mean the \
side of a river, and it can mean the place where people keep their money. The model has to \
look at the other words to know which one is meant. That is what attention does: it lets \
each word look at the others and take what it needs from them.
"""

OUT = Path(__file__).resolve().parent / "models"
SEED = 0
INIT = 0.3  # initializer_range: scores spread over several units, rows far from uniform
LIFT = 0.1  # the spread of each bias and norm weight around its init
DATE = (1980, 1, 1, 0, 0, 0)  # the .npz members' date, the earliest a zip file holds


# Tokenizers: each trained with the pipeline (normalizer, pre-tokenizer) of the
# transformers class that reads it, and then made as that class makes it from a vocabulary
# (and merges), so that tokenizer.json is what save_pretrained writes for the class.

def train(cls, model, trainer, pre_tokenizer=None) -> dict:
    """The model part of a tokenizer.json (its vocab, and merges for BPE) trained on CORPUS."""
    blank = cls().backend_tokenizer
    tokenizer = tokenizers.Tokenizer(model)
    tokenizer.normalizer = blank.normalizer
    tokenizer.pre_tokenizer = pre_tokenizer or blank.pre_tokenizer
    tokenizer.train_from_iterator(CORPUS.split("\n\n"), trainer)
    return json.loads(tokenizer.to_str())["model"]


def wordpiece(cls=transformers.DistilBertTokenizer):
    """BERT's WordPiece: lowercased, [PAD] [UNK] [CLS] [SEP] [MASK] first. Each letter's
    ##piece is named before training: the trainer would number them in a hash map's order,
    which changes from run to run, and with their numbers which of two pairs as frequent
    it merges first. `cls` is the transformers class that reads it."""
    blank = cls().backend_tokenizer
    letters = sorted({c for c in blank.normalizer.normalize_str(CORPUS) if c.isalnum()})
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"##{c}" for c in letters]
    trained = train(cls, models.WordPiece(unk_token="[UNK]"),
                    trainers.WordPieceTrainer(vocab_size=300, show_progress=False, special_tokens=specials))
    return cls(vocab=trained["vocab"])


def bert_wordpiece():
    return wordpiece(transformers.BertTokenizer)


def byte_level(cls, first: list[str], last: list[str], **kwargs):
    """A byte-level BPE (every byte a piece, Ġ for a space): `first` before the bytes,
    `last` after the merges (as <mask> and <|endoftext|> are last in RoBERTa's and GPT-2's)."""
    trained = train(cls, models.BPE(), trainers.BpeTrainer(
        vocab_size=500, show_progress=False, special_tokens=first,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    vocab = trained["vocab"] | {token: len(trained["vocab"]) + i for i, token in enumerate(last)}
    return cls(vocab=vocab, merges=[tuple(m) for m in trained["merges"]], **kwargs)


def roberta_bpe():
    return byte_level(transformers.RobertaTokenizer, ["<s>", "<pad>", "</s>", "<unk>"], ["<mask>"])


def gpt2_bpe():
    return byte_level(transformers.GPT2Tokenizer, [], ["<|endoftext|>"])


def qwen2_bpe():
    return byte_level(transformers.Qwen2Tokenizer, [], ["<|endoftext|>"])


def unigram():
    """XLM-R's SentencePiece-style Unigram (▁ before each word): <s> <pad> </s> <unk>
    first, the pieces by score, <mask> last, as in XLM-R's vocabulary. The trainer chooses
    the pieces; their scores are made again by rescored, the trainer's own changing from
    run to run (by up to 6e-4: it sums in a hash map's order)."""
    specials = ["<s>", "<pad>", "</s>", "<unk>"]
    trained = train(transformers.XLMRobertaTokenizer, models.Unigram(), trainers.UnigramTrainer(
        vocab_size=300, show_progress=False, special_tokens=specials, unk_token="<unk>"))
    pieces = sorted(piece for piece, _ in trained["vocab"] if piece not in specials)
    first = [(piece, 0.0) for piece in specials]
    return transformers.XLMRobertaTokenizer(vocab=first + rescored(first, pieces) + [("<mask>", 0.0)])


def rescored(specials: list[tuple[str, float]], pieces: list[str], rounds: int = 4) -> list[tuple[str, float]]:
    """Unigram scores for the pieces, by hard EM: CORPUS split by Viterbi, each piece's score
    the log of its share of the pieces, and again; from equal scores (the fewest pieces)."""
    blank = transformers.XLMRobertaTokenizer().backend_tokenizer
    scores = dict.fromkeys(pieces, -1.0)
    for _ in range(rounds):
        tokenizer = tokenizers.Tokenizer(models.Unigram(specials + list(scores.items()), unk_id=3))
        tokenizer.normalizer, tokenizer.pre_tokenizer = blank.normalizer, blank.pre_tokenizer
        counts = Counter(piece for paragraph in CORPUS.split("\n\n") for piece in tokenizer.encode(paragraph).tokens)
        total = sum(counts.values())
        scores = {piece: math.log(max(counts[piece], 0.5) / total) for piece in pieces}
    return sorted(scores.items(), key=lambda item: (-item[1], item[0]))


def sentencepiece_bpe():
    """Llama's SentencePiece BPE: <unk> <s> </s>, the 256 byte pieces <0x00>..<0xFF> a
    character outside the vocabulary falls back to, then the merges; ▁ before each word
    and a BOS <s> before each text. Trained a word at a time (Metaspace's split, as
    SentencePiece splits at spaces), so that no piece runs across a space."""
    trained = train(transformers.LlamaTokenizer, models.BPE(byte_fallback=True), trainers.BpeTrainer(
        vocab_size=560, show_progress=False,
        special_tokens=["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]),
        pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True))
    return transformers.LlamaTokenizer(vocab=trained["vocab"], merges=[tuple(m) for m in trained["merges"]],
                                       add_bos_token=True, add_eos_token=False)


# Configs, from the tokenizer each model reads.

def bert(tok):
    return transformers.BertConfig(
        vocab_size=len(tok), max_position_embeddings=64, num_hidden_layers=2, num_attention_heads=4,
        hidden_size=32, intermediate_size=128, hidden_act="gelu", type_vocab_size=2,
        pad_token_id=tok.pad_token_id, initializer_range=INIT)


def distilbert(tok):
    return transformers.DistilBertConfig(
        vocab_size=len(tok), max_position_embeddings=64, n_layers=2, n_heads=4, dim=32, hidden_dim=128,
        activation="gelu", pad_token_id=tok.pad_token_id, initializer_range=INIT)


def roberta(config_class):
    def config(tok):
        # RoBERTa counts positions from padding_idx + 1 = 2: 64 of them need 66 rows.
        return config_class(
            vocab_size=len(tok), max_position_embeddings=64 + 2, num_hidden_layers=2, num_attention_heads=4,
            hidden_size=32, intermediate_size=128, type_vocab_size=1, layer_norm_eps=1e-5,
            pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
            initializer_range=INIT)
    return config


def gpt2(tok):
    return transformers.GPT2Config(
        vocab_size=len(tok), n_positions=64, n_layer=2, n_head=4, n_embd=32, n_inner=128,
        activation_function="gelu_new", bos_token_id=tok.eos_token_id, eos_token_id=tok.eos_token_id,
        initializer_range=INIT)


def llama(tok):
    # llama3 scaling with head_dim 16: of the 8 wavelengths 2 pi 10000^(i/8) (6.3 ... 19869),
    # 6.3 is below original_max_position_embeddings / high_freq_factor = 8 and kept, 19.9 is
    # between 8 and 32 and smoothed, the others are above 32 and divided by the factor.
    return transformers.LlamaConfig(
        vocab_size=len(tok), max_position_embeddings=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, hidden_size=64, intermediate_size=160, rms_norm_eps=1e-6,
        rope_parameters={"rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0, "low_freq_factor": 1.0,
                         "high_freq_factor": 4.0, "original_max_position_embeddings": 32},
        tie_word_embeddings=False, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
        initializer_range=INIT)


def qwen2(tok):
    return transformers.Qwen2Config(
        vocab_size=-(-len(tok) // 64) * 64, max_position_embeddings=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=1, hidden_size=32, intermediate_size=96, rms_norm_eps=1e-6,
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}, tie_word_embeddings=True,
        use_sliding_window=False, bos_token_id=None, eos_token_id=tok.eos_token_id, initializer_range=INIT)


def mistral(tok):
    return transformers.MistralConfig(
        vocab_size=len(tok), max_position_embeddings=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, hidden_size=32, intermediate_size=112, rms_norm_eps=1e-6, sliding_window=4,
        rope_parameters={"rope_type": "linear", "rope_theta": 100000.0, "factor": 2.0},
        tie_word_embeddings=False, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
        initializer_range=INIT)


@dataclass(frozen=True)
class Tiny:
    """One tiny model: its class, config and tokenizer, how its weights are stored, and
    for a decoder the module of its final norm."""

    model: type
    config: Callable
    tokenizer: Callable
    dtype: torch.dtype = torch.float32
    shard: str = "50GB"  # save_pretrained's max_shard_size (its default: one file)
    norm: str | None = None


MODELS = {
    "tiny-bert": Tiny(transformers.BertModel, bert, bert_wordpiece),
    "tiny-distilbert": Tiny(transformers.DistilBertModel, distilbert, wordpiece),
    "tiny-roberta": Tiny(transformers.RobertaModel, roberta(transformers.RobertaConfig), roberta_bpe),
    "tiny-xlm-roberta": Tiny(transformers.XLMRobertaModel, roberta(transformers.XLMRobertaConfig), unigram,
                             dtype=torch.float16),
    "tiny-gpt2": Tiny(transformers.GPT2LMHeadModel, gpt2, gpt2_bpe, norm="transformer.ln_f"),
    "tiny-llama": Tiny(transformers.LlamaForCausalLM, llama, sentencepiece_bpe, dtype=torch.bfloat16,
                       shard="100KB", norm="model.norm"),
    "tiny-qwen2": Tiny(transformers.Qwen2ForCausalLM, qwen2, qwen2_bpe, norm="model.norm"),
    "tiny-mistral": Tiny(transformers.MistralForCausalLM, mistral, sentencepiece_bpe, norm="model.norm"),
}


def build(tiny: Tiny, folder: Path) -> None:
    """Train the tokenizer, draw the weights, and save both into folder."""
    tokenizer = tiny.tokenizer()
    torch.manual_seed(SEED)
    model = tiny.model(tiny.config(tokenizer))
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.dim() == 1:
                parameter.add_(torch.randn(parameter.shape) * LIFT)
    if folder.exists():
        shutil.rmtree(folder)
    model.to(tiny.dtype).save_pretrained(folder, max_shard_size=tiny.shard)
    tokenizer.save_pretrained(folder)


def load(tiny: Tiny, folder: Path, **config):
    model = tiny.model.from_pretrained(folder, local_files_only=True, attn_implementation="eager",
                                       dtype=torch.float32, **config)
    return model.to("cpu").eval()


def run(model, tokenizer, text: str, norm: str | None) -> dict[str, np.ndarray]:
    enc = tokenizer(text, return_offsets_mapping=True, return_tensors="pt")
    seen = {}
    if norm:
        hook = model.get_submodule(norm).register_forward_pre_hook(lambda _, args: seen.update(prenorm=args[0]))
    with torch.inference_mode():
        out = model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"],
                    output_attentions=True, output_hidden_states=True)
    result = {
        "ids": enc["input_ids"][0].numpy().astype(np.int32),
        "offsets": enc["offset_mapping"][0].numpy().astype(np.int32),
        "attentions": torch.stack(out.attentions)[:, 0].numpy().astype(np.float32),
        "hidden": torch.stack(out.hidden_states)[:, 0].numpy().astype(np.float32),
    }
    if norm:
        hook.remove()
        with torch.inference_mode():
            # hidden_states' last entry is the final norm's output, not the last layer's
            assert torch.equal(model.get_submodule(norm)(seen["prenorm"])[0], out.hidden_states[-1][0])
        result["prenorm"] = seen["prenorm"][0].numpy().astype(np.float32)
        result["logits"] = out.logits[0].numpy().astype(np.float32)
    return result


def same_pieces(folder: Path, tokenizer, text: str) -> None:
    """tokenizer.json read by the tokenizers library alone (as attncli reads it) splits
    the text as transformers' tokenizer does."""
    raw = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json")).encode(text)
    enc = tokenizer(text, return_offsets_mapping=True)
    assert raw.ids == enc["input_ids"], (text, raw.ids, enc["input_ids"])
    assert [tuple(o) for o in raw.offsets] == [tuple(o) for o in enc["offset_mapping"]], text


def weights_files(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.safetensors"))


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """np.savez_compressed, but each member dated DATE, so that the same arrays give the
    same bytes."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, value in arrays.items():
            info = zipfile.ZipInfo(f"{name}.npy", date_time=DATE)
            info.compress_type = zipfile.ZIP_DEFLATED
            with archive.open(info, "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.asanyarray(value), allow_pickle=False)


def versions(folder: Path) -> list[str]:
    return [
        f"python={platform.python_version()}",
        f"torch={torch.__version__}",
        f"transformers={transformers.__version__}",
        f"tokenizers={tokenizers.__version__}",
        f"safetensors={safetensors.__version__}",
        f"numpy={np.__version__}",
    ] + [f"{path.name} sha256={sha256(path)}" for path in weights_files(folder)]


def check(results: list[dict[str, np.ndarray]], config, decoder: bool) -> None:
    layers, heads = config.num_hidden_layers, config.num_attention_heads
    for r in results:
        T = r["ids"].shape[0]
        assert r["attentions"].shape == (layers, heads, T, T)
        assert r["hidden"].shape == (layers + 1, T, config.hidden_size)
        assert np.allclose(r["attentions"].sum(axis=-1), 1, atol=1e-5)
        if decoder:
            assert r["logits"].shape == (T, config.vocab_size)
            assert not np.array_equal(r["prenorm"], r["hidden"][-1])


def sharpness(results: list[dict[str, np.ndarray]]) -> tuple[float, float, float]:
    """The mean over every row of its largest weight, the same for a uniform row over the
    keys it may see, and the mean spread (largest - smallest) of a row's scores before the
    softmax, recovered from the weights' logarithms."""
    peaks, uniform, spreads = [], [], []
    for r in results:
        rows = r["attentions"].reshape(-1, r["attentions"].shape[-1])
        for row in rows:
            seen = row[row > 0]
            peaks.append(seen.max())
            uniform.append(1 / len(seen))
            spreads.append(np.log(seen.max()) - np.log(seen.min()))
    return float(np.mean(peaks)), float(np.mean(uniform)), float(np.mean(spreads))


def report(name: str, model, tokenizer, folder: Path, results, decoder: bool) -> None:
    print(f"{name}: {sum(p.numel() for p in model.parameters()):,} parameters")
    for path in sorted(folder.iterdir()):
        print(f"  {path.name}: {path.stat().st_size:,} bytes")
    print(f"  pieces of {SENTENCES[0]!r}: {' '.join(tokenizer.convert_ids_to_tokens(results[0]['ids'].tolist()))}")
    peak, uniform, spread = sharpness(results)
    print(f"  mean largest attention weight in a row {peak:.3f} (a uniform row's {uniform:.3f}); "
          f"scores spread over {spread:.2f} in a row")
    if decoder:
        above = max(float(np.abs(np.triu(r["attentions"], k=1)).max()) for r in results)
        print(f"  largest attention weight above the diagonal: {above}")
        assert above == 0.0


def window(tiny: Tiny, folder: Path, tokenizer, windowed: dict[str, np.ndarray], w: int) -> None:
    """Mistral's sliding window, shown: the long sentence's first layer with the window
    and with the full causal mask."""
    full = run(load(tiny, folder, sliding_window=None), tokenizer, SENTENCES[-1], tiny.norm)["attentions"]
    att = windowed["attentions"]
    T = att.shape[-1]
    q, k = np.indices((T, T))
    beyond = q - k >= w  # kept when k > q - w
    print(f"  sliding window {w}: weights at q - k >= {w}: largest {float(att[:, :, beyond].max())} "
          f"with the window, {float(full[:, :, beyond].max()):.4f} with the full causal mask")
    t = T - 1
    print(f"  layer 0 head 0 row {t}, keys {t - w}..{t}: window "
          + " ".join(f"{x:.4f}" for x in att[0, 0, t, t - w:]) + "; full causal "
          + " ".join(f"{x:.4f}" for x in full[0, 0, t, t - w:]))
    assert float(att[:, :, beyond].max()) == 0.0 and float(full[:, :, beyond].min()) > 0.0


def rope(model) -> None:
    """Which of the rotary frequencies the config's scaling changed."""
    config = model.config
    if not getattr(config, "rope_parameters", None) or config.rope_parameters["rope_type"] == "default":
        return
    scaled = model.model.rotary_emb.inv_freq
    plain, _ = model.model.rotary_emb.compute_default_rope_parameters(config)
    ratio = (plain / scaled).tolist()
    print(f"  rope {config.rope_parameters['rope_type']}: inv_freq divided by " + " ".join(f"{r:.3f}" for r in ratio))


def make(name: str) -> None:
    tiny = MODELS[name]
    folder = OUT / name
    build(tiny, folder)
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder, local_files_only=True)
    model = load(tiny, folder)
    for text in SENTENCES:
        same_pieces(folder, tokenizer, text)
    results = [run(model, tokenizer, text, tiny.norm) for text in SENTENCES]
    decoder = tiny.norm is not None
    check(results, model.config, decoder)

    arrays = {f"{key}_{k}": value for k, r in enumerate(results) for key, value in r.items()}
    arrays["sentences"] = np.array(SENTENCES, dtype=np.str_)
    arrays["versions"] = np.array(versions(folder), dtype=np.str_)
    write_npz(OUT / f"{name}.npz", arrays)

    report(name, model, tokenizer, folder, results, decoder)
    print(f"  {name}.npz: {(OUT / f'{name}.npz').stat().st_size:,} bytes")
    if decoder:
        rope(model)
    if getattr(model.config, "sliding_window", None):
        window(tiny, folder, tokenizer, results[-1], model.config.sliding_window)


def main() -> None:
    names = sys.argv[1:] or list(MODELS)
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        sys.exit(f"unknown model {', '.join(unknown)}: one of {', '.join(MODELS)}")
    torch.set_num_threads(1)  # the same sums in the same order each run
    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    OUT.mkdir(exist_ok=True)
    for name in names:
        make(name)


if __name__ == "__main__":
    main()
