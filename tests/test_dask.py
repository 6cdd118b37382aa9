"""attncli on a Dask cluster: its workers read the very files the client read (paths resolved
by the client, each file's identity checked by the worker before any work), a server that
is not an answering scheduler is one line within seconds, and Dask's own voice never
reaches stderr. Every server here is the test's own, on 127.0.0.1."""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import shutil
import socket
import socketserver
import subprocess
import sys
import threading
import time
import types
from pathlib import Path

import numpy as np
import pytest

from clirunner import CLEAN_ENV, fails, run
from tinybert import TINY, tiny_weights, write_model

distributed = pytest.importorskip("distributed")
import dask.utils  # noqa: E402: with distributed, or skipped

ENTRY_POINT = Path(sys.executable).parent / "attncli"
CORPUS = "the earth is like an orange\nthe river bank\nan orange is like the earth\n"
WORDS = ["the", "earth", "is", "like", "an", "orange", "river", "bank"]
SAME_FILE = ("give every worker the same file, unchanged while the run lasts (a copy keeps its time with cp -p or "
             "rsync -a)")


@pytest.fixture(scope="module")
def workers_folder(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("workers")


@pytest.fixture(scope="module")
def cluster(workers_folder) -> str:
    """A scheduler's address; its two workers started in a folder of their own, as on
    another machine (a worker process starts in the folder its parent is in)."""
    here = os.getcwd()
    os.chdir(workers_folder)
    try:
        local = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                         dashboard_address="127.0.0.1:0", silence_logs=50)
    finally:
        os.chdir(here)
    with local:
        yield local.scheduler_address


def vectors_file(path: Path, seed: int, words=WORDS) -> Path:
    rng = np.random.default_rng(seed)
    lines = [f"{len(words)} 4"] + [f"{w} " + " ".join(f"{x:.6f}" for x in rng.normal(size=4)) for w in words]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def make_files(folder: Path, seed: int, *, larger: bool = False) -> None:
    """v.txt, p.npz and a model's folder m, each of its own numbers for each seed; `larger`:
    each file a little larger than the other seed's (a word more, a d_k of 5, a config.json
    of another activation)."""
    vectors_file(folder / "v.txt", seed, WORDS + ["bird"] if larger else WORDS)
    rng = np.random.default_rng(seed)
    d_k = 5 if larger else 4
    np.savez(folder / "p.npz", W_query=rng.normal(size=(4, d_k)), W_key=rng.normal(size=(4, d_k)),
             W_value=rng.normal(size=(4, d_k)))
    config = {**TINY, "hidden_act": "gelu_new"} if larger else TINY
    write_model(folder / "m", config=config, weights=tiny_weights(TINY, seed))
    (folder / "corpus.txt").write_text(CORPUS, encoding="utf-8")


ARGS = [("--vectors", "v.txt"), ("--vectors", "v.txt", "--qkv", "p.npz"), ("--model", "m")]


def numbers(result, command: str) -> list:
    """What a run computed: batch's weights of each line, stats' records."""
    assert result.exit_code == 0, result.stderr
    docs = [json.loads(line) for line in result.stdout.splitlines()]
    return [doc["weights"] for doc in docs] if command == "batch" else docs


# --- the files the workers read -------------------------------------------------------------

@pytest.mark.parametrize("command", ["batch", "stats"])
@pytest.mark.parametrize("args", ARGS, ids=["vectors", "qkv", "model"])
def test_relative_paths_name_the_files_beside_the_client_not_the_workers(cluster, workers_folder, tmp_path,
                                                                         monkeypatch, command, args):
    make_files(workers_folder, seed=1)  # the same names where the workers started, other numbers
    make_files(tmp_path, seed=0)
    extra = ("--json",) if command == "stats" else ()
    monkeypatch.chdir(workers_folder)
    theirs = numbers(run(command, "corpus.txt", *args, *extra), command)
    monkeypatch.chdir(tmp_path)
    local = numbers(run(command, "corpus.txt", *args, *extra), command)
    remote = numbers(run(command, "corpus.txt", *args, *extra, "--scheduler", cluster), command)
    assert remote == local
    assert local != theirs


def test_generate_s_prompts_on_the_cluster_are_the_same_as_in_one_process(cluster, tmp_path, monkeypatch):
    """generate --file --scheduler: the workers write each prompt with the run's seed, in
    input order, the bytes of one process's run."""
    pytest.importorskip("tokenizers", reason="the model extra: pip install '.[model]'")
    shutil.copytree(Path(__file__).parent / "data" / "models" / "tiny-gpt2", tmp_path / "decoder")
    (tmp_path / "prompts.txt").write_text("The earth is like an orange\nthe river bank\nonce upon\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)  # the model and the prompts named as the client sees them
    args = ["generate", "--file", "prompts.txt", "--model", "decoder", "--max-new-tokens", "5", "--sample", "--seed",
            "4", "--method", "rollout"]
    local, remote = run(*args), run(*args, "--scheduler", cluster)
    assert local.exit_code == 0 and remote.exit_code == 0, local.stderr + remote.stderr
    assert remote.stdout == local.stdout and len(local.stdout.splitlines()) == 3


def test_a_file_only_beside_the_client_is_read_by_the_workers(cluster, tmp_path, monkeypatch):
    vectors_file(tmp_path / "mine.txt", seed=3)
    (tmp_path / "corpus.txt").write_text(CORPUS, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    local = run("batch", "corpus.txt", "--vectors", "mine.txt")
    remote = run("batch", "corpus.txt", "--vectors", "mine.txt", "--scheduler", cluster)
    assert remote.exit_code == local.exit_code == 0 and remote.stderr == ""
    assert remote.stdout == local.stdout


def test_a_worker_that_ran_a_file_before_reads_it_again_once_it_changed(cluster, tmp_path, monkeypatch):
    (tmp_path / "corpus.txt").write_text(CORPUS, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    for seed in (4, 5):  # the same path, other numbers
        vectors_file(tmp_path / "v.txt", seed)
        local = run("batch", "corpus.txt", "--vectors", "v.txt")
        assert run("batch", "corpus.txt", "--vectors", "v.txt", "--scheduler", cluster).stdout == local.stdout


def _when(ns: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ns // 10**9)) + f".{ns % 10**9:09d}"


@pytest.mark.parametrize("command", ["batch", "stats"])
@pytest.mark.parametrize("args,read", [(("--vectors", "links/v.txt"), "links/v.txt"),
                                       (("--vectors", "v.txt", "--qkv", "links/p.npz"), "links/p.npz"),
                                       (("--model", "links/m"), "links/m/config.json")],
                         ids=["vectors", "qkv", "model"])
def test_a_path_that_is_another_file_on_a_worker_is_refused_before_any_work(cluster, workers_folder, tmp_path,
                                                                            monkeypatch, command, args, read):
    # links whose target is in the folder of the process that follows them: on the workers
    # their own files, here this folder's, as one path is two files on two machines
    make_files(workers_folder, seed=1, larger=True)
    make_files(tmp_path, seed=0)
    (tmp_path / "links").mkdir()
    for name in ("v.txt", "p.npz", "m"):
        (tmp_path / "links" / name).symlink_to(f"/proc/self/cwd/{name}")
    monkeypatch.chdir(tmp_path)
    target = read.replace("links/", "")
    there, here = (workers_folder / target).stat().st_size, (tmp_path / target).stat().st_size
    assert there > here
    message = fails(run(command, "corpus.txt", *args, "--scheduler", cluster))
    said = (f" sees another {tmp_path / read} than this run read here ({there:,} bytes there, {here:,} here); "
            + SAME_FILE)
    assert re.fullmatch(r"attncli: error: worker tcp://127\.0\.0\.1:\d+" + re.escape(said), message), message


def same_size_and_time(mine: Path, theirs: Path) -> None:
    """`theirs` made another file of `mine`'s very size, then given its modification time, as
    `cp -p` of another version of it would leave it."""
    if mine.is_dir():
        for name in ("config.json", "model.safetensors", "tokenizer.json"):
            same_size_and_time(mine / name, theirs / name)
        return
    data = bytearray(mine.read_bytes())
    if mine.suffix == ".txt":  # two words' rows swapped: the same bytes, other vectors for them
        lines = data.decode().splitlines(keepends=True)
        a, b = lines[1].split(" ", 1), lines[2].split(" ", 1)
        lines[1], lines[2] = f"{a[0]} {b[1]}", f"{b[0]} {a[1]}"
        data = bytearray("".join(lines).encode())
    elif mine.name != "config.json":  # a number's last byte changed (a tokenizer's id, a weight)
        data[-9] ^= 1 if mine.suffix != ".json" else 0
    theirs.write_bytes(bytes(data))
    st = mine.stat()
    os.utime(theirs, ns=(st.st_atime_ns, st.st_mtime_ns))


@pytest.mark.parametrize("command", ["batch", "stats"])
@pytest.mark.parametrize("args,read,said", [
    (("--vectors", "links/v.txt"), "v.txt", "sees other vectors at {path} than this run read here (the same size and "
                                            "time, other contents); give every worker the same file"),
    (("--vectors", "v.txt", "--qkv", "links/p.npz"), "p.npz", "sees another {path} than this run read here (SHA-256 "),
    (("--model", "links/m"), "m", "sees another {path}/model.safetensors than this run read here (SHA-256 "),
], ids=["vectors", "qkv", "model"])
def test_a_copy_of_another_file_kept_at_the_same_size_and_time_is_refused(cluster, workers_folder, tmp_path,
                                                                         monkeypatch, command, args, read, said):
    """A worker's file of the client's size and time but other contents (cp -p of another
    version): its contents are what is compared, never its numbers used."""
    make_files(tmp_path, seed=0)
    make_files(workers_folder, seed=0)
    same_size_and_time(tmp_path / read, workers_folder / read)
    (tmp_path / "links").mkdir()
    (tmp_path / "links" / read).symlink_to(f"/proc/self/cwd/{read}")
    monkeypatch.chdir(tmp_path)
    message = fails(run(command, "corpus.txt", *args, "--scheduler", cluster))
    expected = said.format(path=tmp_path / "links" / read)
    assert re.match(r"attncli: error: worker tcp://127\.0\.0\.1:\d+ " + re.escape(expected), message), message


@pytest.fixture
def recorded(tmp_path):
    """A vectors file and a batch.Job whose files the client recorded as they are now."""
    from attncli.corpus import batch, survey

    path = vectors_file(tmp_path / "v.txt", seed=0)
    return path, batch.for_workers(batch.Job(source=str(path)))


def _refused(job, cluster) -> str:
    """Both Dask paths' error for `job`, which must be the same; never a result first."""
    from attncli.corpus import cluster as cluster_module, survey
    from attncli.errors import InputError

    said = []
    for results in (cluster_module.run_dask([[(1, "the earth", None)]], survey.StatsJob(job), cluster),
                    cluster_module.run_dask_in_order([[(1, "the earth", None)]], job, cluster)):
        with pytest.raises(InputError) as e:
            next(results)
        said.append(re.sub(r"^worker tcp://127\.0\.0\.1:\d+ ", "worker W ", str(e.value)))
    assert said[0] == said[1]
    return said[0]


def test_a_file_that_grew_after_the_client_recorded_it_is_refused(cluster, recorded):
    path, job = recorded
    before = path.stat().st_size
    vectors_file(path, seed=0, words=WORDS + ["bird"])
    after = path.stat().st_size
    assert _refused(job, cluster) == (f"worker W sees another {path} than this run read here ({after:,} bytes there, "
                                      f"{before:,} here); {SAME_FILE}")


def test_a_file_touched_after_the_client_recorded_it_is_refused(cluster, recorded):
    path, job = recorded
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_500_000_001))  # the same bytes, another time
    assert _refused(job, cluster) == (f"worker W sees another {path} than this run read here ({st.st_size:,} bytes "
                                      f"each, modified {_when(st.st_mtime_ns + 1_500_000_001)} there and "
                                      f"{_when(st.st_mtime_ns)} here); {SAME_FILE}")


def test_a_file_removed_after_the_client_recorded_it_is_refused(cluster, recorded):
    path, job = recorded
    size = path.stat().st_size
    path.unlink()
    assert _refused(job, cluster) == (f"worker W sees another {path} than this run read here (no such file or "
                                      f"directory there, {size:,} bytes here); {SAME_FILE}")


def test_the_job_holds_absolute_paths_and_their_identities(tmp_path, monkeypatch):
    from attncli.corpus import batch, survey
    from attncli.encoder import Options

    make_files(tmp_path, seed=0)
    monkeypatch.chdir(tmp_path)
    job = batch.for_workers(batch.Job(source="v.txt", opts=Options(qkv="p.npz")))
    assert (job.source, job.opts.qkv) == (str(tmp_path / "v.txt"), str(tmp_path / "p.npz"))
    assert job.files == tuple((str(tmp_path / name), (os.stat(name).st_size, os.stat(name).st_mtime_ns))
                              for name in ("v.txt", "p.npz"))
    model = batch.for_workers(batch.Job(model="m"))
    assert model.model == str(tmp_path / "m")
    assert [path for path, _ in model.files] == [str(tmp_path / "m" / name)
                                                 for name in ("config.json", "tokenizer.json", "model.safetensors")]
    assert batch.for_workers(batch.Job()).files == ()  # the bundled vectors: none of the user's files


# --- servers that are not an answering scheduler ----------------------------------------------

def attncli(*args, cwd: Path, env: dict | None = None):
    """The installed attncli as a real process: (the finished process, seconds it took)."""
    base = {k: v for k, v in os.environ.items() if k not in CLEAN_ENV and not k.startswith("DASK_")}
    start = time.monotonic()
    done = subprocess.run([str(ENTRY_POINT), *map(str, args)], capture_output=True, cwd=cwd,
                          env={**base, "PYTHONUTF8": "1", **(env or {})}, timeout=120)
    return done, time.monotonic() - start


class _Handler(socketserver.BaseRequestHandler):
    def handle(self):
        self.server.answer(self.request, self.server.stop)


@contextlib.contextmanager
def server(answer):
    """A TCP server of the test's own on 127.0.0.1 (its port), answering each connection with
    answer(socket, stop): stop is set as the test ends."""
    with socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Handler) as s:
        s.daemon_threads, s.block_on_close = True, False
        s.answer, s.stop = answer, threading.Event()
        threading.Thread(target=s.serve_forever, daemon=True).start()
        try:
            yield s.server_address[1]
        finally:
            s.stop.set()
            s.shutdown()


def silent(conn, stop):  # accepts, reads nothing, says nothing
    stop.wait()


def http(conn, stop):
    conn.recv(65536)
    conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")


def random_bytes(conn, stop):
    rng = random.Random(0)
    with contextlib.suppress(OSError):  # the client hangs up
        while not stop.is_set():
            conn.sendall(rng.randbytes(4096))
            time.sleep(0.01)


def closes(conn, stop):  # accepts, then hangs up at once
    pass


NO_ANSWER = "no Dask scheduler answers at {address} within 10 s; start one (dask scheduler), or check the address"
NOT_DASK = ("the server at {address} is not a Dask scheduler (it answered, but not in Dask's protocol); check the "
            "address (dask scheduler prints it)")
SERVERS = {
    "silent": (silent, NO_ANSWER),
    "http": (http, NOT_DASK),
    "random": (random_bytes, NOT_DASK),
    "closes": (closes, "the server at {address} closed the connection without answering as a Dask scheduler does; "
                       "check the address (a scheduler that asks for TLS takes tls://)"),
}
NO_TLS = ("{address} asks for TLS, and Dask's configuration gives attncli no certificate to offer; set "
          "distributed.comm.tls.ca-file, .client.cert and .client.key (or DASK_DISTRIBUTED__COMM__TLS__CA_FILE and "
          "the like), or give the scheduler's tcp:// address")


def one_line_within_seconds(command: str, address: str, expected: str, folder: Path, env: dict | None = None) -> None:
    """`command` on a corpus with --scheduler address: exit 1, nothing on stdout, and its
    whole stderr the one line `expected`, within 15 s (the time-out is 10)."""
    (folder / "corpus.txt").write_text(CORPUS, encoding="utf-8")
    done, seconds = attncli(command, "corpus.txt", "--scheduler", address, cwd=folder, env=env)
    assert (done.returncode, done.stdout) == (1, b"")
    assert done.stderr.decode() == f"attncli: error: {expected.format(address=address)}\n"
    assert seconds < 15


@pytest.mark.parametrize("command", ["stats", "batch"])
@pytest.mark.parametrize("kind", SERVERS)
def test_a_server_that_is_not_an_answering_scheduler_is_one_line_within_seconds(kind, command, tmp_path):
    answer, expected = SERVERS[kind]
    with server(answer) as port:
        one_line_within_seconds(command, f"tcp://127.0.0.1:{port}", expected, tmp_path)


def test_an_address_where_nothing_listens_is_one_line_within_seconds(tmp_path):
    with socket.create_server(("127.0.0.1", 0)) as s:
        port = s.getsockname()[1]  # closed again: nothing listens there
    one_line_within_seconds("batch", f"tcp://127.0.0.1:{port}",
                            NO_ANSWER.replace("10 s", "10 s (Connection refused)"), tmp_path)


@pytest.mark.parametrize("key", ["CA_FILE", "CLIENT__CERT", "CLIENT__KEY"])
def test_a_tls_file_that_is_a_fifo_is_refused_unopened(key, tmp_path):
    """Dask opens the TLS files its configuration names as a client is made, for tcp:// too:
    a FIFO there would hold the run for ever; it is named and refused, at once."""
    fifo = tmp_path / "tls.fifo"
    os.mkfifo(fifo)
    env = {f"DASK_DISTRIBUTED__COMM__TLS__{key}": str(fifo)}
    with server(silent) as port:
        one_line_within_seconds("batch", f"tcp://127.0.0.1:{port}", "Dask's TLS configuration cannot be used ("
                                f"{fifo}: not a regular file (a device, FIFO or socket); give "
                                f"distributed.comm.tls.{key.lower().replace('__', '.').replace('_', '-')} a regular "
                                "file)", tmp_path, env=env)


@pytest.mark.parametrize("scheme", ["tls", "wss"])
def test_tls_without_certificates_is_one_line_before_connecting(scheme, tmp_path):
    with server(silent) as port:
        one_line_within_seconds("stats", f"{scheme}://127.0.0.1:{port}", NO_TLS, tmp_path)


def test_websockets_to_a_server_that_is_not_dask_are_one_line(tmp_path):
    with server(random_bytes) as port:
        one_line_within_seconds("batch", f"ws://127.0.0.1:{port}", NOT_DASK, tmp_path)


@pytest.fixture(scope="module")
def certificate(tmp_path_factory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key, made by openssl."""
    if shutil.which("openssl") is None:
        pytest.skip("makes its certificate with openssl")
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert, "-days",
                    "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"], check=True,
                   capture_output=True)
    return cert, key


def test_tls_takes_dasks_tls_configuration(certificate, tmp_path):
    cert, key = certificate
    security = distributed.Security(tls_ca_file=str(cert), tls_scheduler_cert=str(cert), tls_scheduler_key=str(key),
                                    tls_worker_cert=str(cert), tls_worker_key=str(key), tls_client_cert=str(cert),
                                    tls_client_key=str(key), require_encryption=True)
    configured = {"DASK_DISTRIBUTED__COMM__TLS__CA_FILE": str(cert),
                  "DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT": str(cert),
                  "DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY": str(key)}
    make_files(tmp_path, seed=0)
    local, _ = attncli("batch", "corpus.txt", "--vectors", "v.txt", cwd=tmp_path)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, protocol="tls://",
                                  host="127.0.0.1", security=security, dashboard_address="127.0.0.1:0",
                                  silence_logs=50) as tls:
        address = tls.scheduler_address
        remote, _ = attncli("batch", "corpus.txt", "--vectors", "v.txt", "--scheduler", address, cwd=tmp_path,
                            env=configured)
        assert (remote.returncode, remote.stderr, remote.stdout) == (0, b"", local.stdout)
        plain = address.replace("tls://", "tcp://")
        one_line_within_seconds("batch", plain, SERVERS["closes"][1], tmp_path, env=configured)
        one_line_within_seconds("batch", address, f"Dask's TLS configuration cannot be used ({tmp_path / 'none.pem'}: "
                                "no such file; give distributed.comm.tls.ca-file a file that exists)", tmp_path,
                                env={**configured, "DASK_DISTRIBUTED__COMM__TLS__CA_FILE": str(tmp_path / "none.pem")})


def test_a_workers_address_is_not_the_schedulers(cluster, tmp_path):
    with distributed.Client(cluster, set_as_default=False) as client:
        worker = next(iter(client.scheduler_info()["workers"]))
    one_line_within_seconds("stats", worker, "the server at {address} is a Dask worker, not the scheduler; give the "
                                             "scheduler's address (dask scheduler prints it)", tmp_path)


def test_a_scheduler_without_workers_is_an_error_not_a_wait():
    from attncli.corpus import cluster as cluster_module
    from attncli.errors import InputError

    with distributed.LocalCluster(n_workers=0, host="127.0.0.1", dashboard_address="127.0.0.1:0",
                                  silence_logs=50) as empty:
        address = empty.scheduler_address
        with pytest.raises(InputError) as e:
            cluster_module.connect(address, timeout=2)
    assert str(e.value) == (f"the Dask scheduler at {address} has no worker (none joined within 2 s); start one: "
                            f"dask worker {address}")


@pytest.mark.parametrize("ordered", [True, False], ids=["batch", "stats"])
def test_a_cluster_left_with_no_worker_ends_the_run(monkeypatch, ordered):
    """Every worker gone mid-run: Dask would wait for a new one for ever; the run ends once
    the cluster has had none for cluster.WORKERLESS seconds, in one line."""
    from attncli.corpus import batch, cluster as cluster_module, survey
    from attncli.errors import InputError

    monkeypatch.setattr(cluster_module, "WORKERLESS", 2.0)
    chunks = ([(n * 8 + k + 1, "the cat sat on the mat", None) for k in range(8)] for n in range(10_000))
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address="127.0.0.1:0", silence_logs=50) as local:
        job = batch.for_workers(batch.Job())
        results = (cluster_module.run_dask_in_order(chunks, job, local.scheduler_address) if ordered
                   else cluster_module.run_dask(chunks, survey.StatsJob(job, shuffled=False, random_seeds=0),
                                        local.scheduler_address))
        next(results)
        local.scale(0)
        started = time.monotonic()
        with pytest.raises(InputError) as e:
            for _ in results:
                pass
        waited = time.monotonic() - started
    assert re.fullmatch(rf"the Dask cluster at {re.escape(local.scheduler_address)} has had no worker for 2 s, and "
                        r"[\d,]+ chunks of lines wait; start workers \(dask worker \S+\) and run again", str(e.value))
    assert 2 <= waited < 30


def test_a_run_on_a_cluster_says_nothing_on_stderr(cluster, tmp_path):
    make_files(tmp_path, seed=0)
    for command in ("batch", "stats"):
        local, _ = attncli(command, "corpus.txt", "--vectors", "v.txt", cwd=tmp_path)
        remote, _ = attncli(command, "corpus.txt", "--vectors", "v.txt", "--scheduler", cluster, cwd=tmp_path)
        assert (remote.returncode, remote.stderr) == (0, b"")
        assert remote.stdout == local.stdout != b""


@pytest.mark.parametrize("lost", ["cancelled", "closed"])
def test_either_way_dask_says_the_scheduler_is_gone_is_the_one_line(lost):
    """A scheduler killed mid-run reaches the client as a cancelled future or, when a result
    was coming back, as its own connection closed under the gather (CommClosedError, seen
    once in a loaded run of the test below): both are the connection lost, never "a task
    failed"."""
    import concurrent.futures

    from distributed.comm import CommClosedError

    from attncli.corpus import cluster
    from attncli.errors import InputError

    error = concurrent.futures.CancelledError() if lost == "cancelled" else CommClosedError(
        "in <TCP (closed) ConnectionPool.gather>: ConnectionResetError: [Errno 104] Connection reset by peer")
    with pytest.raises(InputError, match=r"^the connection to the Dask scheduler at tcp://127\.0\.0\.1:1 was lost "
                                         r"mid-run; check that it still runs, and run again$"):
        with cluster._cluster_errors("tcp://127.0.0.1:1"):
            raise error
    with pytest.raises(InputError, match="failed a task: ValueError: a worker's own"):
        with cluster._cluster_errors("tcp://127.0.0.1:1"):
            raise ValueError("a worker's own")


def test_a_scheduler_lost_mid_run_is_one_line_not_dasks_traceback(tmp_path):
    # Dask's client logs the reconnections it tries, tracebacks and all
    bin_folder = Path(sys.executable).parent
    lines = [" ".join(random.Random(n).choices(WORDS, k=12)) for n in range(20_000)]
    (tmp_path / "corpus.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    found = tmp_path / "scheduler.json"
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, "cwd": tmp_path}
    scheduler = subprocess.Popen([bin_folder / "dask", "scheduler", "--host", "127.0.0.1", "--port", "0",
                                  "--dashboard-address", "127.0.0.1:0", "--scheduler-file", found], **quiet)
    worker = subprocess.Popen([bin_folder / "dask", "worker", "--scheduler-file", found, "--nthreads", "1",
                               "--dashboard-address", "127.0.0.1:0", "--host", "127.0.0.1"], **quiet)
    try:
        deadline = time.monotonic() + 60
        while not found.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        address = json.loads(found.read_text())["address"]
        base = {k: v for k, v in os.environ.items() if k not in CLEAN_ENV and not k.startswith("DASK_")}
        batch_run = subprocess.Popen([ENTRY_POINT, "batch", "corpus.txt", "--scheduler", address], cwd=tmp_path,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=base)
        assert batch_run.stdout.readline().startswith(b'{"line":1,')  # under way
        scheduler.kill()
        _, err = batch_run.communicate(timeout=120)
    finally:
        for process in (scheduler, worker):
            process.kill()
            process.wait()
    assert batch_run.returncode == 1
    assert re.fullmatch(rf"attncli: error: the connection to the Dask scheduler at {re.escape(address)} was lost "
                        r"mid-run; check that it still runs, and run again \(the output holds the results of lines 1 "
                        r"to [\d,]+ of corpus\.txt, whole; those from line [\d,]+ on are missing\)\n",
                        err.decode()), err.decode()


def test_only_dasks_unraisable_exceptions_are_kept_quiet():
    from attncli.cli.output import _of_dask

    assert _of_dask(types.SimpleNamespace(object=distributed.Client.__del__, exc_traceback=None))
    assert not _of_dask(types.SimpleNamespace(object=json.loads, exc_traceback=None))
    with pytest.raises(ValueError) as raised:
        dask.utils.parse_bytes("a lot")  # raised in dask's own code
    assert _of_dask(types.SimpleNamespace(object=None, exc_traceback=raised.value.__traceback__))


def test_a_file_train_wrote_is_shown_with_its_heads_and_mask_on_the_workers(cluster, tmp_path, monkeypatch):
    """The client settles the file's heads and mask: the workers get them whole."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(CORPUS * 40, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert run("train", "corpus.txt", "-o", "t.npz", "--steps", "3", "--batch", "16", "--out-vocab", "8",
               "--heads", "2", "--json").exit_code == 0
    remote = run("batch", "corpus.txt", "--qkv", "t.npz", "--scheduler", cluster)
    local = run("batch", "corpus.txt", "--qkv", "t.npz", "--heads", "2", "--mask", "self")
    assert remote.exit_code == local.exit_code == 0 and remote.stderr == ""
    docs, given = ([json.loads(line) for line in r.stdout.splitlines()] for r in (remote, local))
    assert [d["weights"] for d in docs] == [d["weights"] for d in given]
    settled = {(d["qkv"]["heads"], d["mask"], tuple(d["qkv"]["from_file"])) for d in docs}
    assert settled == {(2, "self", ("heads", "mask"))}
    records = [json.loads(line) for line in
               run("stats", "corpus.txt", "--qkv", "t.npz", "--scheduler", cluster, "--json").stdout.splitlines()]
    assert [r["head"] for r in records] == [1, 2]
