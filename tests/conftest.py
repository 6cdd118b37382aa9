import atexit
import os
import shutil
import signal
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import settings

from attncli import load_vectors
from helpers import NINE_WORDS, matrix, write_text

# CI runs a fixed set of examples, so a green main stays green; local runs explore anew
settings.register_profile("ci", derandomize=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

# The processes the tests start stand for a shell's foreground jobs, which a hang-up and a
# Ctrl-C end. Run under nohup, or in the background of a script, the suite has SIGHUP or
# SIGINT ignored, and every child inherits that; attncli then keeps it ignored, as it must
# (cli.ending_signals; Python leaves an ignored SIGINT so), and those tests would wait in vain.
signal.signal(signal.SIGHUP, signal.SIG_DFL)
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# The Hugging Face cache the run sees is its own, empty until a test puts a model in it
# (tests/hubcache.py), never the user's: set before huggingface_hub is imported, which reads
# it once. Nothing reaches a hub either way: attncli reads the cache with local_files_only.
_hub = tempfile.mkdtemp(prefix="attncli-tests-hf-")
atexit.register(shutil.rmtree, _hub, ignore_errors=True)
os.environ.update(HF_HOME=_hub, HF_HUB_CACHE=os.path.join(_hub, "hub"), HF_HUB_OFFLINE="1",
                  HF_HUB_DISABLE_TELEMETRY="1")


@pytest.fixture(autouse=True)
def signal_mask():
    """Each test ends with the signal mask it began with. A signal a test leaves blocked (a
    Ctrl-C as batch's workers start can leave SIGINT so) would be blocked in every process the
    later tests start, and their Ctrl-C, SIGTERM and hang-up tests would wait in vain."""
    before = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    yield
    for signum in signal.sigpending() & (signal.pthread_sigmask(signal.SIG_BLOCK, []) - before):
        signal.sigtimedwait([signum], 0)  # the test's own, held back: not the run's to receive
    signal.pthread_sigmask(signal.SIG_SETMASK, before)


@pytest.fixture(scope="session", autouse=True)
def private_cache(tmp_path_factory):
    """The whole run gets its own vectors cache, never the user's."""
    before = os.environ.get("ATTNCLI_CACHE_DIR")
    os.environ["ATTNCLI_CACHE_DIR"] = str(tmp_path_factory.mktemp("cache"))
    yield
    if before is None:
        del os.environ["ATTNCLI_CACHE_DIR"]
    else:
        os.environ["ATTNCLI_CACHE_DIR"] = before


@pytest.fixture(scope="session")
def glove():
    """The bundled vectors, loaded once for the whole run (a memory map: tests only read them)."""
    return load_vectors()


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    """A test's own vectors cache dir (and no ATTNCLI_VECTORS); files use it for every test
    with pytestmark = pytest.mark.usefixtures("cache")."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("ATTNCLI_CACHE_DIR", str(folder))
    monkeypatch.delenv("ATTNCLI_VECTORS", raising=False)
    return folder


@pytest.fixture
def source(tmp_path) -> tuple[Path, np.ndarray]:
    """A word2vec text file of NINE_WORDS, 4 values each, and its matrix (9, 4)."""
    M = matrix(len(NINE_WORDS), 4, seed=1)
    return write_text(tmp_path / "v.txt", NINE_WORDS, M), M


# Six words of d = 4 values: heads 1, 2 and 4 divide it. Every value exact in float32.
VECTORS4 = """\
6 4
cat 1 0 0 0.5
dog 0 1 0 -1
sat 1 1 0 0
mat 0 0 2 1
the 0.5 0.5 0.5 0.5
on -1 0 1 0.25
"""

# Four words of d = 2 values: projections small enough to do on paper.
VECTORS2 = """\
4 2
a 1 0
b 0 1
c 1 1
d 2 -1
"""


@pytest.fixture(scope="session")
def vectors4_path(tmp_path_factory) -> Path:
    """VECTORS4 written to a file (tiny4.txt)."""
    path = tmp_path_factory.mktemp("vectors") / "tiny4.txt"
    path.write_text(VECTORS4, encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def vectors2_path(tmp_path_factory) -> Path:
    """VECTORS2 written to a file (tiny2.txt)."""
    path = tmp_path_factory.mktemp("vectors") / "tiny2.txt"
    path.write_text(VECTORS2, encoding="utf-8")
    return path


from browser import browser, open_page  # noqa: E402, F401: the fixtures of the page's tests in a real browser
