"""The vectors layer: the bundled GloVe, users' files through gensim, lookups, neighbours."""

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import attncli
from attncli import load_vectors
from attncli.errors import InputError, VectorsError
from attncli.sources import detect, resolve
from attncli.vectors import Vectors, Vocabulary, embed

# Lines of Stanford's glove.6B.50d.txt, as released.
GLOVE_THE = (
    "0.418 0.24968 -0.41242 0.1217 0.34527 -0.044457 -0.49688 -0.17862 -0.00066023 -0.6566 0.27843 "
    "-0.14767 -0.55677 0.14658 -0.0095095 0.011658 0.10204 -0.12792 -0.8443 -0.12181 -0.016801 -0.33279 "
    "-0.1552 -0.23131 -0.19181 -1.8823 -0.76746 0.099051 -0.42125 -0.19526 4.0071 -0.18594 -0.52287 "
    "-0.31681 0.00059213 0.0074449 0.17778 -0.15897 0.012041 -0.054223 -0.29871 -0.15749 -0.34758 "
    "-0.045637 -0.44251 0.18785 0.0027849 -0.18411 -0.11514 -0.78581"
)
GLOVE_KING_START = "0.50451 0.68607 -0.59517 -0.022801 0.60046 -0.13498"


def test_bundled_shape_order_and_case(glove):
    assert glove.matrix.shape == (100_000, 50) and glove.matrix.dtype == np.float32
    assert [glove.vocab.word(i) for i in range(5)] == ["the", ",", ".", "of", "to"]  # GloVe's own frequency order
    assert not glove.cased
    assert glove.size == 100_000


def test_bundled_values_are_glove_values(glove):
    np.testing.assert_array_equal(glove.vector("the"), np.array(GLOVE_THE.split(), dtype=np.float32))
    np.testing.assert_array_equal(glove.vector("king")[:6], np.array(GLOVE_KING_START.split(), dtype=np.float32))


def test_bundled_loads_from_any_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert load_vectors().dim == 50


REPO = Path(attncli.__file__).resolve().parent.parent  # the source tree these tests run from
SITE = Path(np.__file__).resolve().parent.parent  # the environment's site-packages
source_tree = pytest.mark.skipif(not (REPO / "embeddings").is_dir(), reason="runs from a source tree")


def python_m_attncli(cwd: Path, path: list[Path], tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    """`python -m attncli ARGS` in `cwd`, with `path` then the environment's site-packages on
    sys.path after the folder Python itself puts first (cwd, for -m), and no site hooks (-S):
    so no editable-install finder, as with a plain install."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ATTNCLI_", "PYTHON"))}
    env.update(PYTHONPATH=os.pathsep.join(map(str, [*path, SITE])), ATTNCLI_CACHE_DIR=str(tmp_path / "cache"))
    return subprocess.run([sys.executable, "-S", "-m", "attncli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)


def installed_copy(folder: Path, *, embeddings: bool = True) -> Path:
    """What `pip install .` puts in site-packages: the package, and embeddings/ inside it as
    attncli.embeddings (here its data as symbolic links to the repository's, to stay cheap)."""
    shutil.copytree(REPO / "attncli", folder / "attncli", ignore=shutil.ignore_patterns("__pycache__"))
    if embeddings:
        (folder / "attncli" / "embeddings").mkdir()
        for f in (REPO / "embeddings").iterdir():
            if f.name != "__pycache__":
                (folder / "attncli" / "embeddings" / f.name).symlink_to(f)
    return folder


@source_tree
@pytest.mark.parametrize("where", ["the clone's root, installed", "the clone's root, not installed",
                                   "elsewhere, installed"])
def test_python_m_attncli_finds_the_bundled_vectors(tmp_path, where):
    site = installed_copy(tmp_path / "site")
    cwd = tmp_path if where.startswith("elsewhere") else REPO
    path = [] if where.endswith("not installed") else [site]
    proc = python_m_attncli(cwd, path, tmp_path, "scores", "the cat")
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert json.loads(proc.stdout)["tokens"] == ["the", "cat"]


@source_tree
def test_python_m_attncli_in_the_editable_install_from_the_clones_root(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("ATTNCLI_")}
    proc = subprocess.run([sys.executable, "-m", "attncli", "scores", "the cat"], cwd=REPO, capture_output=True,
                          text=True, timeout=120, env={**env, "ATTNCLI_CACHE_DIR": str(tmp_path / "cache")})
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert json.loads(proc.stdout)["tokens"] == ["the", "cat"]


@source_tree
def test_a_copy_without_the_bundled_vectors_says_what_to_run(tmp_path):
    site = installed_copy(tmp_path / "site", embeddings=False)
    proc = python_m_attncli(tmp_path, [site], tmp_path, "scores", "the cat")
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("attncli: error: the bundled vectors are not "
                                                                   "installed"), proc.stderr
    assert "pip install ." in proc.stderr and "--vectors" in proc.stderr
    other = tmp_path / "v.txt"  # other vectors still work there
    other.write_text("2 2\nthe 1 0\ncat 0 1\n")
    proc = python_m_attncli(tmp_path, [site], tmp_path, "scores", "the cat", "--vectors", str(other))
    assert proc.returncode == 0 and json.loads(proc.stdout)["vectors"]["words"] == 2


def three_words(cased=False):
    """cat (or Cat), dog and car in two dimensions, in memory."""
    words = ["Cat", "dog", "car"] if cased else ["cat", "dog", "car"]
    return Vectors("tiny", Vocabulary.from_words(words), np.array([[1, 0], [0.8, 0.6], [0, 1]], dtype=np.float32), cased)


@pytest.mark.parametrize("n", [1, 2, 1000, 99_999])
def test_limit_gives_the_first_words_of_the_bundled_vectors(glove, n):
    first = load_vectors(limit=n)
    assert first.size == n and first.matrix.shape == (n, 50)
    assert isinstance(first.matrix, np.memmap) and not first.matrix.flags.owndata  # a view of the mapped rows
    np.testing.assert_array_equal(first.matrix, glove.matrix[:n])
    for row in sorted({0, n // 2, n - 1}):
        word = glove.vocab.word(row)
        assert first.vocab.word(row) == word and first.row(word) == row
    for row in (n, n + 7, 99_999):  # the words past the limit are not there
        if row < glove.size and row >= n:
            assert first.row(glove.vocab.word(row)) is None
    words = [first.vocab.word(int(r)) for r in first.vocab.order]
    assert len(words) == n and [w.encode() for w in words] == sorted(w.encode() for w in words)


def test_limit_at_or_past_the_vocabulary_is_all_of_it(glove):
    assert load_vectors(limit=100_000).size == load_vectors(limit=10 ** 9).size == 100_000


def test_limit_is_honoured_by_every_command_on_the_bundled_vectors():
    from clirunner import fails, ok, one, run

    info = one(run("vectors", "info", "--limit", "1000"))
    assert info["words"] == 1000
    rows = ok(run("neighbors", "the", "--limit", "50", "--k", "100"))
    first = {load_vectors().vocab.word(i) for i in range(50)}
    assert rows[0]["vectors"]["words"] == 50
    assert {n["word"] for n in rows[0]["neighbors"]} <= first - {"the"}
    fails(run("neighbors", "orange", "--limit", "50"), "'orange' is not a word")
    result = run("scores", "the orange", "--limit", "50")
    doc = one(result, stderr=None)
    assert doc["tokens"] == ["the"] and doc["oov"] == ["orange"] and doc["vectors"]["words"] == 50
    lines = ok(run("batch", "--limit", "50", input="the orange\nof the\n"))
    assert [d["tokens"] for d in lines] == [["the"], ["of", "the"]]


def test_nearest_against_brute_force(glove):
    rng = np.random.default_rng(0)
    v = rng.normal(size=50).astype(np.float32)
    got = glove.nearest(v, 7, exclude={"the"})
    M = glove.matrix.astype(np.float64)
    cos = M @ v / (np.linalg.norm(M, axis=1) * np.linalg.norm(v))
    words = [glove.vocab.word(i) for i in range(glove.size)]
    expected = [words[i] for i in np.argsort(-cos) if words[i] != "the"][:7]
    assert [w for w, _ in got] == expected
    np.testing.assert_allclose([c for _, c in got], [cos[words.index(w)] for w in expected], rtol=1e-5)


def test_nearest_excludes_and_handles_zero():
    v = three_words()
    # cos((1, 0.1), (0.8, 0.6)) = 0.86 / (1.00499 * 1) = 0.85573; cos((1, 0.1), (0, 1)) = 0.1 / 1.00499
    got = v.nearest(np.array([1.0, 0.1]), 2, exclude={"cat"})
    assert [w for w, _ in got] == ["dog", "car"]
    np.testing.assert_allclose([c for _, c in got], [0.86 / np.sqrt(1.01), 0.1 / np.sqrt(1.01)], rtol=1e-6)
    assert v.nearest(np.zeros(2), 3) == []


def test_embed_oov_policies():
    v = three_words()
    e = embed(["cat", "zebra", "car"], v, oov="skip")
    assert e.tokens == ["cat", "car"] and e.oov == ["zebra"] and e.lookups == ["word", "word"]
    np.testing.assert_array_equal(e.X, [[1, 0], [0, 1]])
    z = embed(["cat", "zebra"], v, oov="zero")
    assert z.tokens == ["cat", "zebra"] and z.oov == ["zebra"] and z.lookups == ["word", "zero"]
    np.testing.assert_array_equal(z.X, [[1, 0], [0, 0]])
    with pytest.raises(InputError, match="zebra"):
        embed(["cat", "zebra"], v, oov="error")
    with pytest.raises(InputError, match="none of the tokens"):
        embed(["zebra"], v)


def test_a_vector_with_nan_is_refused_by_name():
    v = Vectors("tiny", Vocabulary.from_words(["cat", "dog"]), np.array([[1, 0], [np.nan, 1]], dtype=np.float32), False)
    assert embed(["cat"], v).tokens == ["cat"]
    with pytest.raises(InputError, match="'dog'.*NaN"):
        embed(["cat", "dog"], v)


def test_cased_vectors_fall_back_to_lowercase():
    v = three_words(cased=True)
    assert v.key("Cat") == "Cat" and v.key("DOG") == "dog" and v.key("cat") is None


def write_text(path, header=True, rows=None):
    rows = rows or {"The": [1.0, 0.0, 0.5], "earth": [0.25, -1.0, 2.0]}
    lines = [f"{len(rows)} 3"] if header else []
    lines += [w + " " + " ".join(map(str, vals)) for w, vals in rows.items()]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def kind(path):
    fmt = detect(resolve(str(path)))
    return fmt.kind, fmt.compression


def test_detects_word2vec_text_glove_text_and_binary(tmp_path):
    from gensim.models import KeyedVectors

    assert kind(write_text(tmp_path / "a.txt")) == ("word2vec-text", None)
    assert kind(write_text(tmp_path / "b.txt", header=False)) == ("glove", None)
    kv = KeyedVectors(vector_size=3)
    kv.add_vectors(["The", "earth"], np.array([[1.0, 0.0, 0.5], [0.25, -1.0, 2.0]], dtype=np.float32))
    kv.save_word2vec_format(str(tmp_path / "c.bin"), binary=True)
    assert kind(tmp_path / "c.bin") == ("word2vec-binary", None)
    with gzip.open(tmp_path / "d.txt.gz", "wt") as f:
        f.write((tmp_path / "a.txt").read_text())
    assert kind(tmp_path / "d.txt.gz") == ("word2vec-text", "gzip")
    for name in ("a.txt", "b.txt", "c.bin", "d.txt.gz"):
        v = load_vectors(tmp_path / name)
        assert [v.vocab.word(i) for i in range(v.size)] == ["The", "earth"] and v.cased and v.dim == 3, name
        np.testing.assert_array_equal(v.vector("earth"), np.array([0.25, -1.0, 2.0], dtype=np.float32))


@pytest.mark.parametrize(
    "content,message",
    [
        ("", "is empty, not a word vectors file"),
        ("hello world, this is prose\n", "not a word vectors file"),
        ("2 3\ncat 1 0 0\ndog 1 0\n", "line 3"),
        ("cat 1 0 0\ndog 1 0 0\nbird 1 x 0\n", "line 3"),
    ],
)
def test_bad_files(tmp_path, content, message):
    path = tmp_path / "bad.txt"
    path.write_text(content)
    with pytest.raises(VectorsError, match=message) as e:
        load_vectors(path)
    assert str(path) in str(e.value)


def test_missing_and_directory(tmp_path):
    with pytest.raises(VectorsError, match="no such file"):
        load_vectors(tmp_path / "nope.txt")
    with pytest.raises(VectorsError, match="directory"):
        load_vectors(tmp_path)


def test_bundled_files_match_the_checksums_in_their_readme():
    import hashlib
    import re
    from pathlib import Path

    from attncli.cache import bundled_prefix

    readme = (Path(__file__).resolve().parent.parent / "embeddings" / "README.md").read_text(encoding="utf-8")
    listed = dict(re.findall(r"^\| `(glove\.6B\.50d\.100k\.[\w.]+)` \|.*\| `([0-9a-f]{64})` \|$", readme, flags=re.M))
    assert len(listed) == 5
    folder = bundled_prefix().parent
    for name, digest in listed.items():
        assert hashlib.sha256((folder / name).read_bytes()).hexdigest() == digest, name


def test_a_word_past_the_limit_is_said_to_be_past_it():
    from clirunner import fails, run

    fails(run("neighbors", "orange", "--limit", "50"), "'orange' is not a word of the first 50 words of",
          "(--limit 50)")
    fails(run("neighbors", "zzqqxx"), "'zzqqxx' is not a word of glove.6B.50d.100k;")


def test_sizes_of_the_cache_views_are_written_as_everywhere_else():
    from attncli.views import vectors

    text = vectors.cleared_view({"removed": 1, "bytes": 1500, "cache_dir": "/c", "kept": [], "links": []}).plain
    assert "(1.5 kB)" in text and "MB" not in text
