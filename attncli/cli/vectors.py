"""vectors info, convert, list, verify and clear: the sources and the cache."""

from __future__ import annotations

import os
import sys
import time

import click
from attncli.cli import ExitStatus
from attncli.cli.options import complete_path, output_options, vectors_options
from attncli.cli.output import emit, one_line, progress, warn
from attncli.cli.sections import Group
from attncli.errors import AttncliError
from attncli.system.limits import size
from attncli.visible import count
from attncli.words import cache
from attncli.words.entry import entry_bytes, verify_entry


@click.group(cls=Group, short_help="word vectors: what a source holds, and the cache")
def vectors():
    """Word vectors: what a source holds, and the cache that makes its second load fast.

    The first load of a source reads it through gensim (slowly, once) and writes a cache
    entry: the matrix as a .npy file that later runs memory-map, and the words in a form
    searched without building a dictionary. ATTNCLI_CACHE_DIR sets where entries go.

    \b
    Examples:
      attncli vectors info
      attncli vectors convert ~/vectors/glove.840B.300d.txt
      attncli vectors info --vectors glove-wiki-gigaword-300
      attncli vectors list
      attncli vectors verify
      attncli vectors clear
    """


def _info(vectors, seconds: float) -> dict:
    meta = vectors.meta
    return {
        "name": vectors.name, "words": vectors.size, "dim": vectors.dim, "cased": vectors.cased,
        "subwords": vectors.subwords is not None, "source": vectors.source,
        "format": (meta.get("source") or {}).get("format", "attncli-vectors"),
        "cache_entry": meta.get("entry"),
        "load_seconds": round(seconds, 4),
    }


@vectors.command(short_help="what a vectors source holds, and how long it took to load")
@vectors_options
@output_options
def info(source, out):
    """Name, words, dimension, case, source and cache entry of the vectors, and the time
    this load took (the first load of a source includes reading and caching it).

    \b
    Examples:
      attncli vectors info
      attncli vectors info --vectors GoogleNews-vectors-negative300.bin
      attncli vectors info --vectors vectors.txt --limit 50000 --json
    """
    start = time.perf_counter()
    vectors = source.load()
    emit([_info(vectors, time.perf_counter() - start)], out, "info_view")


@vectors.command(short_help="read a source once and cache it")
@click.argument("source", shell_complete=complete_path)
@vectors_options(source_option=False)
@output_options
def convert(source, out):
    """Read SOURCE (any --vectors source) and write its cache entry now, so that the first
    real run is fast too. An entry already there is kept if it verifies (every file as it
    was written: see vectors verify), else written again.

    \b
    Examples:
      attncli vectors convert ~/vectors/glove.840B.300d.txt
      attncli vectors convert cc.en.300.bin
      attncli vectors convert my-model.kv --trust-pickle
    """
    start = time.perf_counter()
    vectors = source.vectors(must_cache=True, verify=True)
    emit([_info(vectors, time.perf_counter() - start)], out, "info_view")


@vectors.command(name="list", short_help="the cache entries and their sizes")
@output_options
def list_(out):
    """Every cache entry: its source, words, dimension and size on disk. "stale" means the
    source has changed or gone since, so the entry will not be used again; "damaged" says
    what is wrong with an entry whose files changed after they were written (its source is
    converted again on its next use).

    \b
    Examples:
      attncli vectors list
      attncli vectors list --json | jq -s 'map(.bytes) | add'
    """
    docs = [_entry_doc(entry) for entry in cache.entries()]
    emit([{"entries": docs, "cache_dir": str(cache.cache_dir())}], out, "entries_view", json_docs=docs)


def _confirm_clear() -> None:
    """Ask on stderr (stdout is the result's), No by default; declined: an error, so that
    `attncli vectors clear && ...` goes no further."""
    entries = cache.entries()
    if not entries:
        return  # nothing to lose
    total = sum(entry["bytes"] for entry in entries)
    what = "the cache entry" if len(entries) == 1 else f"the {len(entries):,} cache entries"
    question = one_line(f"Remove {what} in {cache.cache_dir()} ({size(total)})?")
    try:
        removing = click.confirm(question, default=False, err=True)
    except click.Abort:  # Ctrl-D, the end of the input: no answer is no
        click.echo(err=True)
        removing = False
    if not removing:
        raise AttncliError("nothing removed; answer y to remove them, or give --yes")


def _entry_doc(entry: dict) -> dict:
    # a damaged entry's metadata may be anything, or nothing: only fields of the right type are shown
    source = entry.get("source") if isinstance(entry.get("source"), dict) else {}
    options = entry.get("options") if isinstance(entry.get("options"), dict) else {}
    try:
        st = os.stat(source.get("path", ""))
        stale = (st.st_size, st.st_mtime_ns) != (source.get("size"), source.get("mtime_ns"))
    except (OSError, TypeError, ValueError):
        stale = True
    return {"path": entry["path"], "name": entry.get("name"), "words": entry.get("words"), "dim": entry.get("dim"),
            "bytes": entry["bytes"], "source": source.get("path"), "limit": options.get("limit"),
            "created": entry.get("created"), "stale": stale, "damaged": entry.get("damaged")}


LARGE = 64 << 20  # bytes to hash for which verify draws a bar: a second or more off a disk


@vectors.command(short_help="check entries, every byte, against their SHA-256s")
@click.argument("name", required=False)
@output_options
def verify(name, out):
    """Check the cache entry NAME (its name, folder or path, as vectors list shows them;
    glove.6B.50d.100k for the bundled vectors), or without NAME every entry and the bundled
    vectors, against the SHA-256 of each of its files recorded as it was written. A load
    checks sizes, times and the small files, but reads only the rows of the matrix it needs:
    a row edited in place, its file's size and time kept, is found only here. Every file is
    read whole (a bar on stderr for a large entry).

    One line an entry: ok; damaged, with which file and what differs; or not checked, for
    an entry written before attncli recorded SHA-256s. Exit status 0 when every entry
    verifies, else 1. vectors convert SOURCE writes a damaged or unchecked entry again.

    \b
    Examples:
      attncli vectors verify
      attncli vectors verify glove.6B.50d.100k
      attncli vectors verify --json | jq 'select(.ok | not) | .path'
    """
    targets = cache.to_verify(name)
    total, done = sum(entry_bytes(prefix) for prefix, _ in targets), 0
    with progress("MB", shown=total >= LARGE, streaming=False) as update:
        def hashed(n: int) -> None:
            nonlocal done
            done += n
            update(done >> 20, total >> 20)

        docs = [verify_entry(prefix, bundled=bundled, hashed=hashed) for prefix, bundled in targets]
    emit([{"entries": docs}], out, "verified_view", json_docs=docs)
    failed = sum(not doc["ok"] for doc in docs)
    if failed:
        click.echo(f"attncli: {failed:,} of {count(len(docs), 'entry', 'entries')} did not verify", err=True)
        return ExitStatus.ERROR


@vectors.command(short_help="remove every cache entry")
@click.option("-y", "--yes", is_flag=True, help="Remove without asking first.")
@output_options
def clear(yes, out):
    """Remove every cache entry; a source is read again on its next use. On a terminal
    (standard input one), it asks first, and an answer other than y removes nothing (exit
    status 1); --yes removes without asking, and so does a script, whose standard input
    is no terminal.

    Only folders attncli made (each holds its marker file, .attncli-entry) are touched, and
    only the files attncli wrote in them: anything else in the cache directory, or added to
    an entry, is left as it is, and said so ("kept"). A temporary folder that a run killed
    while converting left is removed; one that a run is writing now (it holds a lock on the
    marker) is kept, and said so.

    \b
    Examples:
      attncli vectors clear
      attncli vectors clear --yes
    """
    if not yes and sys.stdin.isatty():
        _confirm_clear()
    done = cache.clear()
    for kept in done["kept"]:
        warn(f"{kept['path']}: left as it is: {kept['reason']}")
    for link in done["links"]:
        warn(f"{link['path']}: a symbolic link to {link['target']}, removed; what it points to was left as it is")
    emit([{"removed": done["removed"], "bytes": done["bytes"], "cache_dir": str(cache.cache_dir()),
           "kept": done["kept"], "links": done["links"]}], out, "cleared_view")
