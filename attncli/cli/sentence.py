"""The commands over a sentence but scores (scores.py): context, compare, neighbors, explain, heads."""

from __future__ import annotations

import click
from attncli.cli.inputs import compute_all, note_large_json, read_sentences
from attncli.documents.context import compare_doc, context_doc, explain_doc, neighbors_doc
from attncli.documents.sentence import heads_doc
from attncli.encoder import Options
from attncli.cli.options import (CONTEXT_FIELDS, TextParam, attention_options, fields_option, given_options,
                                 model_options, neighbors_count, neighbors_option, output_options, png_option,
                                 predict_option, refuse_predict, sentence_argument, vectors_options)
from attncli.cli.output import emit, warn
from attncli.cli.sections import Command
from attncli.errors import AttncliError, InputError


@click.command(cls=Command, short_help="one token's attention, context vector and nearest words")
@sentence_argument
@click.option("--token", metavar="WORD", type=TextParam("--token"),
              help="The token whose attention and context vector to show.")
@click.option("--index", type=click.IntRange(min=0), metavar="N",
              help="Its position among the tokens (from 0), when it occurs more than once; alone, picks the token at N.")
@click.option("--all", "all_contexts", is_flag=True, help="Also give every token's context vector.")
@neighbors_option()
@vectors_options
@model_options
@predict_option
@attention_options
@png_option
@fields_option(CONTEXT_FIELDS + ("predict",))
@output_options
def context(sentence, token, index, all_contexts, neighbors, predict, source, opts, out):
    """One token's attention over SENTENCE and its context vector.

    Step III: the context vector z_i = sum_j alpha_ij x_j mixes every token's vector by
    the token's weights. Shown: the token's weights ranked, its context vector, and the
    vocabulary words nearest (cosine) to the context vector beside those nearest to the
    token's own vector, to see whether context moved its meaning. SENTENCE absent or "-":
    one sentence per line of standard input.

    \b
    Examples:
      attncli context "The earth is like an orange" --token orange
      echo "Orange is a bright color" | attncli context --token orange --format json
      attncli context "the cat saw the dog" --token the --index 3
      attncli context "The earth is like an orange" --all
      attncli context "The earth is like an orange" --token orange --model gpt2 --predict 3
    """
    refuse_predict(predict, source)
    if token is None and index is None and not all_contexts:
        raise click.UsageError("say which token: --token WORD (or --index N), or --all for every token")
    sentences = read_sentences(sentence)
    vectors = source.load()
    docs = compute_all(
        sentences,
        lambda text: context_doc(text, vectors, opts, token=token, index=index,
                                 all_contexts=all_contexts, neighbors=neighbors, predict=predict or 0),
    )
    emit(docs, out, "context_view")


@click.command(cls=Command, short_help="one word in several sentences: has context moved its meaning?")
@click.argument("sentences", nargs=-1, metavar="SENTENCE_A SENTENCE_B [...]", type=TextParam("a sentence"))
@click.option("--token", metavar="WORD", required=True, type=TextParam("--token"),
              help="The word to follow through the sentences.")
@click.option("--index", "indices", type=click.IntRange(min=0), metavar="N", multiple=True,
              help="Its position among a sentence's tokens (from 0), where it occurs more than once: once for "
                   "every sentence, or repeated, one for each sentence in their order.")
@neighbors_option()
@vectors_options
@model_options
@attention_options
@png_option
@output_options
def compare(sentences, token, indices, neighbors, source, opts, out):
    """The same word in two or more sentences: in each, what it attends to and its context
    vector; between them, the cosine of the context vectors beside the cosine of the raw
    vectors (1 for the same word); and the words nearest each, the moved ones marked.

    With raw pretrained vectors and no learned projections the context vectors of one word
    stay close whatever the sentence: attention alone, untrained, barely moves a meaning.
    That is why the trainable form learns W_Q, W_K and W_V.

    \b
    Examples:
      attncli compare "The earth is like an orange" "Orange is a bright color" --token orange
      attncli compare "I sat on the bank" "The bank raised rates" "A river bank" --token bank --json
      attncli compare "the cat saw the dog" "the dog saw a cat" --token the --index 3 --index 0
    """
    if len(sentences) < 2:
        raise click.UsageError(f"compare needs two sentences or more, and got {len(sentences)}")
    if len(indices) not in (0, 1, len(sentences)):
        raise click.UsageError(f"--index is given once for every sentence, or once for each in their order: "
                               f"{len(sentences)} sentences and {len(indices)} --index")
    indices = indices * len(sentences) if len(indices) == 1 else indices
    for n, text in enumerate(sentences, start=1):
        if not text.strip():
            raise InputError(f"sentence {n} is empty")
    vectors = source.load()
    doc = compare_doc(list(sentences), vectors, opts, token=token, neighbors=neighbors, indices=list(indices) or None)
    if source.model:  # beside the model, what attention over the word vectors makes of the same word
        static = source.vectors()
        try:
            plain = compare_doc(list(sentences), static, Options(), token=token, neighbors=0,
                                indices=_same_occurrences(doc, static) if indices else None)
            doc["static"] = {"vectors": static.name, "context_cosine": plain["context_cosine"],
                             "raw_cosine": plain["raw_cosine"]}
        except AttncliError as e:
            warn(f"no comparison with the word vectors {static.name}: {e}")
    emit([doc], out, "compare_view")


def _same_occurrences(doc: dict, static) -> list[int]:
    """--index counts a model's word pieces ([CLS] first): the positions among the word
    vectors' tokens of the same occurrences of the word (its second, say) in each sentence,
    a piece standing for the text under it (GPT-2's "Ġbank" for "bank")."""
    from attncli.models.files import piece_texts  # the model's code, imported only with --model

    shown = []
    for sentence in doc["sentences"]:
        i, text = sentence["index"], sentence["sentence"]
        texts = [t and t.lower() for t in piece_texts(text, sentence["offsets"], sentence["special"])]
        word = texts[i] or sentence["tokens"][i]  # a part of a word (None: no text of its own) by its piece
        nth = texts[:i].count(texts[i]) if texts[i] else 0
        words = static.embed_sentence(text, Options(), list_missing=False).tokens
        at = [j for j, w in enumerate(words) if w == word]
        if nth >= len(at):
            raise InputError(f"{text!r} holds {word!r} fewer times among its words than among the model's word "
                             "pieces")
        shown.append(at[nth])
    return shown


@click.command(cls=Command, short_help="the vocabulary words nearest a word, or its context vector")
@click.argument("word", type=TextParam("WORD"))
@neighbors_option(default=10, least=1)
@click.option("-k", "--k", "k", type=click.IntRange(min=1), hidden=True)  # --neighbors' old name, for scripts
@click.option("--context", "sentence", metavar="SENTENCE", type=TextParam("--context"),
              help="Use WORD's context vector in SENTENCE instead of its own vector.")
@click.option("--index", type=click.IntRange(min=0), metavar="N",
              help="With --context: WORD's position among the sentence's tokens (from 0), where it occurs more "
                   "than once.")
@vectors_options
@attention_options(top=False, projections="trained")
@output_options
def neighbors(word, neighbors, k, sentence, index, source, opts, out):
    """The N vocabulary words nearest (cosine) WORD's vector, or, with --context, its context
    vector in SENTENCE; the word itself and punctuation left out. Exact: every word of the
    vocabulary is compared. The attention and token options shape the context vector, so
    they need --context; it is a point among the word vectors without projections, or with
    those attncli train learned (--qkv FILE.npz), not with others.

    \b
    Examples:
      attncli neighbors orange
      attncli neighbors orange --context "The earth is like an orange" --neighbors 5
      attncli neighbors bank --context "I sat on the bank of the river" --qkv proj.npz --mask self
      attncli neighbors the --context "the cat saw the dog" --index 3
    """
    if sentence is None:
        unused = given_options(click.get_current_context(),
                               ("index", "qkv", "heads", "mask", "scale", "temperature", "keep_punct", "oov"))
        if unused:
            raise click.UsageError(f"{unused[0]} needs --context SENTENCE: without it, neighbors uses WORD's own "
                                   "vector, and no sentence is read or attended")
    vectors = source.load()
    k = neighbors_count(neighbors, k)
    emit([neighbors_doc(word, vectors, opts, k=k, sentence=sentence, index=index)], out, "neighbors_view")


@click.command(cls=Command, short_help="walk a sentence through every step of attention")
@sentence_argument
@click.option("--token", metavar="WORD", type=TextParam("--token"), help="Follow this token's row through each step.")
@click.option("--index", type=click.IntRange(min=0), metavar="N", help="Its position, when it occurs more than once.")
@vectors_options
@model_options
@attention_options(top=False)
@png_option
@output_options
def explain(sentence, token, index, source, opts, out):
    """Every step of attention over SENTENCE, each with its shape: the embeddings X (T x d),
    the queries Q = X W_Q, keys K = X W_K and values V = X W_V (T x d_k), the raw scores
    Q K^T, the scaled scores, the weights, and the context vectors Z = A V. With --token,
    one token's row through each step: its ω, scaled score and α for each token, the mean
    over the heads, or with --model and --head that head's (its steps alone shown).
    --format json gives every matrix under "steps".

    \b
    Examples:
      attncli explain "The earth is like an orange"
      attncli explain "The earth is like an orange" --qkv random --seed 0 --heads 2 --mask causal
      attncli explain "The earth is like an orange" --token orange --json | jq '.row.weights'
      attncli explain "The earth is like an orange" --model minilm --layer 1 --head 3 --token orange
    """
    sentences = read_sentences(sentence)
    vectors = source.load()
    note_large_json(sentences, vectors, opts, {"steps": 3 * vectors.heads(opts)}, out,
                    "attncli scores --fields tokens,top writes no matrix" if source.model
                    else "attncli scores --file DOC.txt streams a long text, a line a token")
    docs = compute_all(sentences, lambda text: explain_doc(text, vectors, opts, token=token, index=index))
    emit(docs, out, "explain_view")


@click.command(cls=Command, short_help="every layer and head of a sentence's attention at a glance")
@sentence_argument
@click.option("--ablate", is_flag=True,
              help="With --model: also each head's ablation effect (Michel et al. 2019), its output zeroed and the "
                   "model run on: an encoder's cosine distance of the mean of its last hidden states, a decoder's "
                   "rise in its mean next-piece loss; a layers x heads grid, under \"ablation\" in JSON.")
@vectors_options
@model_options(every=True)
@attention_options(top=False)
@png_option
@output_options
def heads(sentence, ablate, source, opts, out):
    """Each head's T x T weights over SENTENCE as a small picture, layer by layer: with
    --model every layer x head of the trained model (a head that puts more than half its
    attention on [CLS] and [SEP], or a decoder's on its first piece, marked *), or the
    heads of one --layer, or one --head of
    every layer; over word vectors the --heads heads of one layer. --format json gives
    "weights" as layers x heads x T x T of those shown, and with --model "layer" and "head"
    (null: every one). --ablate zeroes each head shown in turn and runs the model on from
    there (L x H runs of the layers after the head's, one layer's heads in a batch).

    \b
    Examples:
      attncli heads "The earth is like an orange" --model minilm
      attncli heads "The earth is like an orange" --model minilm --layer 2
      attncli heads "The earth is like an orange" --qkv random --heads 5
      attncli heads "I sat on the bank of the river" --model minilm --json | jq '.special_share'
      attncli heads "The earth is like an orange" --model minilm --ablate
    """
    if ablate and not source.model:
        raise click.UsageError("--ablate zeroes a trained model's heads in turn and runs the model on; it needs "
                               "--model NAME|DIR")
    sentences = read_sentences(sentence)
    vectors = source.load()
    layer, head = source.layer, source.head  # with --model
    layers = 1 if layer else vectors.layers
    note_large_json(sentences, vectors, opts, {"weights": layers * (1 if head else vectors.heads(opts))}, out,
                    "--layer and --head show fewer heads" if source.model
                    else "attncli scores --file DOC.txt streams a long text, a line a token")
    from attncli.mixing import documents as mixing  # the measures of context mixing: only heads --ablate needs them

    make = mixing.heads_doc if ablate else heads_doc
    docs = compute_all(sentences, lambda text: make(text, vectors, opts, layer=layer, head=head,
                                                    **({"ablate": True} if ablate else {})),
                       said=lambda doc: doc.get("notes", []))
    emit(docs, out, "heads_view")
