"""Word vectors in memory (attncli/words/vectors.py) and the bundled GloVe: the vocabulary, n-grams,
lookups, nearest words and cosines, down to float32's edges; the bundled files, found from
anywhere and as they were released."""

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from attncli import load_vectors
import attncli
from attncli.errors import InputError, VectorsError
from attncli.words.encoder import embed
from attncli.words.vectors import Vectors, Vocabulary, fnv1a, ngrams
from helpers import brute_nearest

# A numpy overflow warning would be a second line on stderr in a real run: make it fail here.
pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")

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


def test_bundled_files_match_the_checksums_in_their_readme():
    import hashlib
    import re
    from pathlib import Path

    from attncli.words.entry import bundled_prefix

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


# --------------------------------------------------------------------------- the vocabulary, n-grams, nearest words


def test_vocabulary_finds_every_word_and_only_those():
    words = ["a", "ab", "abc", "abd", "b", "ba", "é", "éa", "e", "東", "東京", "東京都", "Z", "zz", "z",
             "\ufffd", "😀", "😀x", "ß", "ss", "İ", "i̇"]
    vocab = Vocabulary.from_words(words)
    assert len(vocab) == len(words)
    for row, word in enumerate(words):
        assert vocab.find(word) == row and word in vocab
        assert vocab.word(row) == word
    for absent in ["", "abcd", "aa", "A", "É", "c", "東京タワー", "京", "zzz", "Zz", "😀y", "s", "a ", " a", "a\n"]:
        assert vocab.find(absent) is None and absent not in vocab, absent


def test_vocabulary_on_many_random_words_against_a_dict():
    rng = np.random.default_rng(42)
    alphabet = list("abcdeéñ東京😀ß-'")
    words = list(dict.fromkeys("".join(rng.choice(alphabet, size=rng.integers(1, 7))) for _ in range(3000)))
    vocab = Vocabulary.from_words(words)
    index = {w: i for i, w in enumerate(words)}
    probes = words + ["".join(rng.choice(alphabet, size=rng.integers(1, 8))) for _ in range(3000)]
    for word in probes:
        assert vocab.find(word) == index.get(word), word
    order = [bytes(vocab.blob[vocab.offsets[i]: vocab.offsets[i + 1] - 1]) for i in vocab.order]
    assert order == sorted(w.encode() for w in words)


def test_vocabulary_refuses_a_line_break():
    with pytest.raises(VectorsError, match="line break"):
        Vocabulary.from_words(["ok", "bad\nword"])


NGRAM_WORDS = ["", "a", "ab", "cat", "caterpillar", "café", "naïve", "東京", "東京都", "😀x", "ß", "e\u0301"]


@pytest.mark.parametrize("min_n,max_n", [(1, 1), (1, 3), (2, 4), (3, 6), (5, 5), (1, 10), (4, 3)])
def test_ngrams_equal_gensims(min_n, max_n):
    from gensim.models.fasttext_inner import compute_ngrams_bytes, ft_hash_bytes

    for word in NGRAM_WORDS:
        ours = ngrams(word, min_n, max_n)
        assert ours == compute_ngrams_bytes(word, min_n, max_n), (word, min_n, max_n)
        assert [fnv1a(g) for g in ours] == [ft_hash_bytes(g) for g in ours]


def test_fnv1a_equals_gensims_on_every_byte_and_some_strings():
    from gensim.models.fasttext_inner import ft_hash_bytes

    samples = [bytes([b]) for b in range(256)] + [b"", b"<cat>", "<東京>".encode(), bytes(range(256)), b"\x80\xff\x7f"]
    for data in samples:
        assert fnv1a(data) == ft_hash_bytes(data), data


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_nearest_equals_brute_force_over_several_blocks(seed):
    rng = np.random.default_rng(seed)
    n, d = 53, 6
    M = rng.normal(size=(n, d)).astype(np.float32)
    M[[4, 17, 40]] = 0  # zero rows are never near
    words = [f"w{i}" for i in range(n)]
    v = Vectors("random", Vocabulary.from_words(words), M, False)
    q = rng.normal(size=d)
    M64 = M.astype(np.float64)
    norms = np.linalg.norm(M64, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        cos = np.where(norms > 0, M64 @ q / (norms * np.linalg.norm(q)), -np.inf)
    ranking = [i for i in np.argsort(-cos) if np.isfinite(cos[i])]
    for k, exclude in [(1, set()), (5, set()), (5, {words[ranking[0]], words[ranking[3]], "absent"}),
                       (12, {words[ranking[1]]}), (n, set())]:
        got = v.nearest(q, k, exclude=exclude, block=7)
        expected = [i for i in ranking if words[i] not in exclude][:k]
        assert [w for w, _ in got] == [words[i] for i in expected], (k, exclude)
        np.testing.assert_allclose([c for _, c in got], cos[expected], rtol=1e-5, atol=1e-6)
        whole = v.nearest(q, k, exclude=exclude)  # one block: the same words (float32 sums may differ in the last bit)
        assert [w for w, _ in whole] == [w for w, _ in got]
        np.testing.assert_allclose([c for _, c in whole], [c for _, c in got], rtol=1e-6, atol=1e-6)
    assert len(v.nearest(q, n)) == n - 3
    assert v.nearest(q, 0) == [] and v.nearest(np.zeros(d), 3) == []


def test_nearest_looks_further_down_when_keep_refuses_the_best():
    rng = np.random.default_rng(7)
    words = [f"w{i:03d}" for i in range(300)]
    M = rng.standard_normal((300, 8)).astype(np.float32)
    vectors = Vectors("random", Vocabulary.from_words(words), M, cased=False)
    v = rng.standard_normal(8)
    rows = {w: M[i].astype(np.float64) for i, w in enumerate(words)}
    ranked = brute_nearest(rows, v, 300, set())
    refused = {w for w, _ in ranked[:60]}  # the 60 best are all refused
    keep = lambda w: w not in refused  # noqa: E731
    for k, exclude, block in [(5, set(), 1 << 16), (5, {ranked[60][0]}, 7), (1, set(), 64), (12, set(), 1)]:
        got = vectors.nearest(v, k, exclude, keep=keep, block=block)
        expected = [(w, c) for w, c in ranked if w not in refused and w not in exclude][:k]
        assert len(got) == k
        assert [w for w, _ in got] == [w for w, _ in expected]
        np.testing.assert_allclose([c for _, c in got], [c for _, c in expected], rtol=0, atol=2e-6)
    # more than there are: every kept word, best first
    got = vectors.nearest(v, 1000, set(), keep=keep)
    assert [w for w, _ in got] == [w for w, _ in ranked if w not in refused]
    assert vectors.nearest(v, 5, set(), keep=lambda w: False) == []


# --------------------------------------------------------------------------- cosines at the edges of the range


def exact_cosines(rows: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Cosines computed apart from numpy, in Python floats: each vector divided by its
    largest entry first, its sums by math.fsum."""
    out = []
    for row in rows:
        top = max(abs(float(x)) for x in row)
        a = [float(x) / top for x in row]
        t = max(abs(float(x)) for x in v)
        b = [float(x) / t for x in v]
        out.append(math.fsum(x * y for x, y in zip(a, b)) / math.sqrt(math.fsum(x * x for x in a))
                   / math.sqrt(math.fsum(y * y for y in b)))
    return np.array(out)


@pytest.mark.parametrize("size", [3e38, 1e30, 1e20, 1e-20, 1e-30, 1e-38, 1e-44])
def test_nearest_at_any_size_float32_holds(size):
    """Rows whose squares overflow float32 (3e38, 1e30, 1e20) or underflow it (1e-20 down to
    denormal 1e-44) keep their cosines: 1, 1/3 and -1 here, as at an ordinary size."""
    M = np.array([[3, 0], [1, 2 * math.sqrt(2)], [-3, 0], [0.5, 0.5]], dtype=np.float64) * size / 3
    M = M.astype(np.float32)
    vectors = Vectors("edge", Vocabulary.from_words(["alpha", "beta", "gamma", "delta"]), M, cased=False)
    got = dict(vectors.nearest(M[0], 3, {"alpha"}))
    expected = dict(zip(["beta", "gamma", "delta"], exact_cosines(M[1:], M[0])))
    assert set(got) == set(expected)
    for word, c in got.items():
        assert c == pytest.approx(expected[word], abs=2e-6), (word, c, expected[word])
    assert got["gamma"] == pytest.approx(-1.0, abs=1e-6) and got["delta"] == pytest.approx(math.sqrt(0.5), abs=1e-6)


def test_nearest_mixes_huge_tiny_and_ordinary_rows_in_one_block():
    rng = np.random.default_rng(3)
    M = rng.standard_normal((200, 6))
    M[::7] *= 1e37
    M[3::11] *= 1e-39
    M = M.astype(np.float32)
    vectors = Vectors("mixed", Vocabulary.from_words([f"w{i}" for i in range(200)]), M, cased=False)
    v = rng.standard_normal(6) * 1e300  # a float64 query far past float32's range
    got = vectors.nearest(v, 200, block=64)
    expected = exact_cosines(M.astype(np.float64), v)
    assert [w for w, _ in got] == [f"w{i}" for i in np.argsort(-expected, kind="stable")]
    np.testing.assert_allclose([c for _, c in got], np.sort(expected)[::-1], atol=2e-6)


def test_cosines_do_not_depend_on_the_vectors_size():
    """vectors.cosines of rows scaled by powers of two is bit for bit the same, from 2^-1000
    to 2^1000, and by other factors the same to rounding; a zero row's cosines are NaN."""
    from attncli.words.vectors import cosines

    rng = np.random.default_rng(5)
    M = rng.standard_normal((4, 9))
    base = cosines(M)
    for e in (-1000, -500, -60, 60, 500, 1000):
        np.testing.assert_array_equal(cosines(np.ldexp(M, e)), base)
    np.testing.assert_allclose(cosines(M * 1e300), base, atol=1e-15)
    np.testing.assert_allclose(cosines(M * 1e-300), base, atol=1e-15)
    M[2] = 0
    C = cosines(M)
    assert np.isnan(C[2]).all() and np.isnan(C[:, 2]).all()
    assert np.isfinite(np.delete(np.delete(C, 2, 0), 2, 1)).all()


def test_a_vectors_cosine_with_itself_is_one_and_no_cosine_leaves_the_range():
    """The diagonal of vectors.cosines is 1 exactly, and so is the cosine of a row with its
    copy or a power-of-two multiple of it; nearly parallel and nearly opposite rows, whose
    products round past 1 in size, stay within [-1, 1]; a zero row's stay NaN."""
    from attncli.words.vectors import cosines

    rng = np.random.default_rng(11)
    for _ in range(200):
        a = rng.standard_normal(rng.integers(2, 60))
        M = np.stack([a, a + rng.standard_normal(len(a)) * 1e-9, -a * 3.7, a * 2.0 ** 40, a.copy(),
                      rng.standard_normal(len(a)), np.zeros(len(a))])
        C = cosines(M)
        defined = C[:6, :6]
        assert (np.diag(defined) == 1.0).all()
        assert C[0, 3] == C[3, 0] == C[0, 4] == C[3, 4] == 1.0
        assert (np.abs(defined) <= 1.0).all()
        np.testing.assert_array_equal(defined, defined.T)
        assert np.isnan(C[6]).all() and np.isnan(C[:, 6]).all()


def test_nearest_gives_a_rows_own_direction_one_and_nothing_past_one(glove):
    vectors = glove
    for r in range(0, vectors.size, 500):
        v = np.asarray(vectors.matrix[r])
        (word, c), *others = vectors.nearest(v, 3)
        assert (word, c) == (vectors.vocab.word(r), 1.0)
        assert all(-1.0 <= c <= 1.0 for _, c in others)
        assert vectors.nearest(v * 8, 1)[0][1] == 1.0  # a power-of-two multiple: the same direction
