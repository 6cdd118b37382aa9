"""A command takes an attention or token option only if it uses it: every such option a
command accepts changes its result; neighbors takes them only with --context, where they
shape the context vector, and refuses them without it."""

from __future__ import annotations

import numpy as np
import pytest

from attncli.cli import cli
from clirunner import fails, ok, run

SENTENCE = "The earth, is like an zzqx orange"  # punctuation and a word with no vector
OTHER = "The earth is round"

# each option with a value that changes a result, and the options its effect needs
CHANGES = {
    "--top-k": (["--top-k", "1"], []),
    "--include-self": (["--include-self"], []),
    "--heads": (["--heads", "2"], []),
    "--mask": (["--mask", "causal"], []),
    "--scale": (["--scale", "1"], []),
    "--temperature": (["--temperature", "2"], []),
    "--qkv": (["--qkv", "random"], []),
    "--d-k": (["--d-k", "10"], ["--qkv", "random"]),
    "--seed": (["--seed", "1"], ["--qkv", "random"]),
    "--keep-punct": (["--keep-punct"], []),
    "--oov": (["--oov", "zero"], []),
}

# each command that computes attention, as a run that gives JSON (args, standard input)
RUNS = {
    "scores": (["scores", SENTENCE, "--json"], None),
    "context": (["context", SENTENCE, "--token", "earth", "--json"], None),
    "compare": (["compare", SENTENCE, OTHER, "--token", "earth", "--json"], None),
    "explain": (["explain", SENTENCE, "--token", "earth", "--json"], None),
    "batch": (["batch"], SENTENCE + "\n" + OTHER + "\n"),
    "neighbors": (["neighbors", "earth", "--context", SENTENCE, "--k", "3", "--json"], None),
    "contributions": (["contributions", SENTENCE, "--method", "value-zeroing", "--json"], None),
}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """Projections as attncli train writes them (its record beside W, d_k = d): neighbors'
    only --qkv other than the identity."""
    path = tmp_path_factory.mktemp("trained") / "proj.npz"
    rng = np.random.default_rng(0)
    W = {name: np.eye(50) + rng.normal(scale=0.3, size=(50, 50)) for name in ("W_query", "W_key", "W_value")}
    np.savez(path, **W, train=np.array(["{}"]))
    return path


def options_of(name: str) -> list[str]:
    return [opt for param in cli.get_command(None, name).params for opt in param.opts if opt in CHANGES]


CASES = [(name, opt) for name in RUNS for opt in options_of(name)]


def result(name: str, extra: list[str]) -> list[dict]:
    args, stdin = RUNS[name]
    return ok(run(*args, *extra, input=stdin), stderr=None)


@pytest.mark.parametrize("name,option", CASES, ids=[f"{n} {o}" for n, o in CASES])
def test_every_attention_option_a_command_takes_changes_its_result(name, option, trained):
    changed, needs = CHANGES[option]
    if name == "neighbors" and option == "--qkv":  # the projections whose context vectors are words
        changed = ["--qkv", str(trained)]
    assert result(name, needs + changed) != result(name, needs), f"{name} takes {option} and ignores it"


def test_the_commands_take_what_they_use():
    assert set(options_of("explain")) == set(CHANGES) - {"--top-k", "--include-self"}  # explain lists no top attended
    # the raw vectors only, and no top-attended list
    assert set(options_of("neighbors")) == {"--qkv", "--heads", "--mask", "--scale", "--temperature", "--keep-punct",
                                            "--oov"}
    for name in ("scores", "context", "compare", "batch", "contributions"):
        assert set(options_of(name)) == set(CHANGES), name
    # a model's own attention and word pieces; its --seed seeds its random baseline and bootstrap
    assert options_of("faithfulness") == ["--seed"]


@pytest.mark.parametrize("option", ["--qkv", "--heads", "--mask", "--scale", "--temperature", "--keep-punct", "--oov"])
def test_neighbors_without_context_refuses_attention_options(option):
    changed, _ = CHANGES[option]
    fails(run("neighbors", "earth", *changed), option, "needs --context", code=2)


@pytest.mark.parametrize("option", ["--top-k", "--include-self", "--d-k", "--seed"])
def test_neighbors_has_no_options_it_cannot_use(option):
    fails(run("neighbors", "earth", "--context", SENTENCE, *CHANGES[option][0]), "no such option", code=2)


def test_neighbors_of_a_trained_context_vector_and_not_of_random_projections(trained):
    from attncli.encoder import Options, attend
    from attncli.words.load import load_vectors

    doc = ok(run("neighbors", "earth", "--context", OTHER, "--qkv", trained, "--k", "3", "--json"))[0]
    vectors = load_vectors()
    # "earth", by the library, as the CLI shows a file train wrote: its mask, self
    z = attend(OTHER, vectors, Options(qkv=str(trained), mask="self")).context[1]
    M = np.asarray(vectors.matrix, dtype=np.float64)
    cos = M @ z / (np.linalg.norm(M, axis=1) * np.linalg.norm(z))
    np.testing.assert_allclose(doc["context"], z, rtol=0, atol=0)
    assert [n["cosine"] for n in doc["neighbors"]] == pytest.approx(
        sorted((c for i, c in enumerate(cos) if vectors.vocab.word(i) != "earth"), reverse=True)[:3], abs=1e-6)
    fails(run("neighbors", "earth", "--context", OTHER, "--qkv", "random"), "need identity projections, or ones attncli")
