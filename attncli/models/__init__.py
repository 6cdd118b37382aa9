"""Trained models, each family in a module of its own over what every family shares.

files.py finds a model's folder and reads its files, each checked before it is read:
config.json, the safetensors weights; tokenizer.py reads every family's tokenizer
(tokenizer.json or vocab.txt, and tokenizer_config.json), each family calling its
read(where, config, family=, kinds=, auto=) with its own. layers.py holds the pieces a
forward pass is made of (a linear layer, layer norm, GELU, the overflow check) and the
sizes (Config). A family (bert.py: BERT, MiniLM, RoBERTa, XLM-RoBERTa; distilbert.py:
DistilBERT, bert.py's pass under its own names; gpt2.py: GPT-2; llama.py: Llama, Mistral,
Qwen2) gives what is its own:

    MODEL_TYPES                    config.json's model_type values it runs
    CAUSAL                         whether a piece attends only to itself and those before it
    read_config(raw, path)         config.json's keys, checked, as a Config (or a subclass:
                                   its length_limit() the most pieces a sentence may have)
    expected_shapes(config)        every tensor its forward pass reads, and its shape
    stored_name(name, header)      a tensor's name in the file
    read_tokenizer(where, config)  its tokenizer, checked
    run(ids, weights, config, to)  the forward pass, each layer handed to the consumer `to`
                                   (layers.Consumer) as it is made, with run_bytes(T, config):
                                   its memory beside what `to` keeps; run(..., rows=R) and
                                   run_bytes(T, config, R) the same a block of R query rows
                                   at a time (layers.attention_of), each block's weights
                                   handed to to.rows() and let go
    forward(ids, weights, config, keep=...) -> layers.Pass: run with layers.Kept, keeping
                                   every layer's arrays, with pass_bytes(T, config)
    projections(weights, l)        layer l's W_query, W_key, W_value and their biases
    passed_on(V, weights, l, config)         what each head sends on, f(x_j)

a family that runs GGUF files (llama.py, gpt2.py; gguf_file.py reads the file) besides:

    GGUF_ARCHITECTURES             general.architecture values it runs -> its model_type
    gguf_config(header)            the metadata's keys as its config, checked as config.json's
    GGUF_NAMES, GGUF_LAYERS        its tensors' names -> llama.cpp's, and the prefix of a
                                   layer's (gguf_file.tensor_name: layers.3.self_attn.q_proj.weight
                                   is blk.3.attn_q.weight)
    gguf_transposed(name)          whether the file holds it transposed (GPT-2's Conv1D weights)
    gguf_permuted(name, config, architecture)  the heads over which llama.cpp permuted its rows
                                   for its RoPE (a "llama" file's query and key), 0 for none

and a decoder besides (whose run(..., cache=layers.Cache) runs the pieces after those
cached, at their positions, against every cached key: generation.py's steps):

    mask(T, config, rows)          (T, T), True where a piece may not attend: causal, and
                                   a sliding window where the config declares one
                                   (documents name it: models.encoder.mask_keys); with
                                   `rows` (a slice), those query rows of it (R, T) alone
    logits(X, weights, config)     (T, V): the LM head over the final normed hidden states

and calls attention.py for its attention, never a copy of it. `weights` is the model's
weights.Weights (name -> the tensor widened into the working precision, a layer's at a time;
an embedding's rows by layers.rows_of), or a dict of arrays where a caller changes them.
Pass.hidden is what transformers returns as hidden_states (a decoder's last after its
final norm); Pass.steps hold Q, K, V (T, H d_head) as the scores use them: the queries and
keys turned by RoPE, the keys and values written out for each query head they serve.
"""

from __future__ import annotations

from pathlib import Path

from attncli.errors import ModelError
from attncli.models import bert, chat, distilbert, files, gpt2, llama
# the readers of weights, GGUF files and ollama's store are imported where a model is loaded: not for --help
from attncli.models.files import Model
from attncli.models.tokenizer import read_settings
from attncli.system.home import expand

FAMILIES = {kind: family for family in (bert, distilbert, gpt2, llama) for kind in family.MODEL_TYPES}
# GGUF's general.architecture -> the family that runs it
GGUF_FAMILIES = {arch: family for family in (llama, gpt2) for arch in family.GGUF_ARCHITECTURES}


def family_of(raw: dict, path: Path):
    """The family module that runs a model whose config.json (read from `path`) is `raw`."""
    kind = raw.get("model_type")
    if not isinstance(kind, str) or kind not in FAMILIES:  # a list or an object is no type, nor a key
        raise ModelError(f"{path}: model_type is {kind!r}; attncli runs {', '.join(FAMILIES)} models")
    return FAMILIES[kind]


def load_model(spec: str, revision: str | None = None, check=None, progress=None) -> Model:
    """The model named or found at `spec` (at `revision` in the Hugging Face cache), its
    files checked and read, its weights mapped (weights.Weights); check(name, family), when
    given, is told the family once config.json is read, before its tokenizer and weights are
    (to refuse options the family cannot take, before the work of reading them);
    progress(done, total), when given, the bytes of the weights read as their numbers are
    checked."""
    from attncli.models import weights  # the safetensors reader: not imported for --help

    name, where, commit = locate(spec, revision)
    if not where.is_dir():  # a GGUF file (locate)
        return load_gguf(name, where, check)
    raw = files.read_config(where / "config.json")
    family = family_of(raw, where / "config.json")
    if check is not None:
        check(name, family)
    config = family.read_config(raw, where / "config.json")
    tokenizer = family.read_tokenizer(where, config)
    mapped = weights.read_weights(where, config, family, progress)
    settings = read_settings(where)  # tokenizer_config.json, or {}
    return Model(name=name, path=where, revision=commit, config=config, weights=mapped, tokenizer=tokenizer, family=family,
                 eos=end_of_sequence(raw, where, config),
                 chat_template=chat.template_of(settings.get("chat_template"), str(where / "tokenizer_config.json")))



def end_of_sequence(raw: dict, where: Path, config) -> tuple[int, ...]:
    """The ids that end what a decoder writes, as transformers' generate stops at them:
    generation_config.json's eos_token_id where the folder has one, else config.json's (an
    id or a list of them); each within the vocabulary."""
    path = where / "generation_config.json"
    if path.is_file():
        raw = files.parse_json(files.read(path, files.CONFIG_MOST), path, "", "a generation_config.json")
        raw = raw if isinstance(raw, dict) else {}
    given = raw.get("eos_token_id")
    ids = given if isinstance(given, list) else [] if given is None else [given]
    if not all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < config.vocab_size for i in ids):
        raise ModelError(f"{where}: eos_token_id is {given!r}; it must be an id of the vocabulary, or a list of them")
    return tuple(ids)


def locate(spec: str, revision: str | None = None) -> tuple[str, Path, str | None]:
    """(name, where, commit) of --model: a GGUF file, a model of ollama's store (NAME:TAG,
    ollama:NAME: its GGUF blob), or what files.folder finds (a folder, a known name, the
    Hugging Face cache's snapshot at its commit). A path that is there is taken for one."""
    from attncli.models import gguf_file, ollama  # a GGUF's reader and ollama's store: not imported for --help

    expanded = expand(spec)
    path = Path(expanded if expanded is not None else spec)
    if path.is_file() and gguf_file.is_gguf(path):
        files.unrevised(spec, revision, f"the GGUF file {path.resolve()}, which has no revisions; leave out --revision")
        return path.name, path, None
    if not (path.exists() or path.is_symlink()) and ollama.is_name(spec):
        files.unrevised(spec, revision, "a model of ollama's store, which names a version by its tag; give the tag "
                        "in --model instead")
        return spec, ollama.blob(spec), None
    return files.folder(spec, revision)


def load_gguf(name: str, path: Path, check=None) -> Model:
    """The model of the GGUF file `path`: its header read and checked (gguf_file), its
    family the one that runs its architecture, its config and tokenizer made from its
    metadata, its tensors kept in the file (each dequantized as its layer runs)."""
    from attncli.models import gguf_file, gguf_vocab  # a GGUF's reader: not imported for --help

    header = gguf_file.read_header(path)
    arch = header.architecture
    family = GGUF_FAMILIES.get(arch)
    if family is None:
        raise ModelError(f"{path}: is a GGUF model of architecture {arch!r}; attncli runs GGUF files of "
                         f"{', '.join(GGUF_FAMILIES)}")
    if check is not None:
        check(name, family)
    config = family.gguf_config(header)
    tokenizer = gguf_vocab.read_tokenizer(header, config)
    mapped = gguf_file.read_weights(header, config, family)
    eos = header.get("tokenizer.ggml.eos_token_id")
    return Model(name=name, path=path, revision=None, config=config, weights=mapped, tokenizer=tokenizer,
                 family=family, quantization=header.quantization(), eos=(eos,) if isinstance(eos, int) else (),
                 chat_template=chat.template_of(header.get("tokenizer.chat_template"), str(path)))


def files_read(where: Path) -> list[Path]:
    """The files of a model's folder that load_model reads (a worker elsewhere must see the
    same ones): config.json, the tokenizer's files read_tokenizer takes, the weights' index
    and safetensors files; of a GGUF model, its file."""
    from attncli.models import weights  # the safetensors reader: not imported for --help

    if not where.is_dir():
        return [where]
    tokenizer = where / "tokenizer.json"
    settings = where / "tokenizer_config.json"
    index = where / "model.safetensors.index.json"
    return [where / "config.json", tokenizer if tokenizer.is_file() else where / "vocab.txt",
            *([settings] if settings.is_file() else []),
            *([index] if index.is_file() and not (where / "model.safetensors").exists() else []),
            *weights.weight_files(where)]
