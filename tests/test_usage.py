"""What a command line attncli cannot parse is told: the command or option meant, where it
belongs, and how this command takes its input."""

from __future__ import annotations

import click
import pytest

import ptys
from clirunner import fails, run
from test_help import tree

COMMANDS = {" ".join(path): command for path, command in tree() if path}


@pytest.mark.parametrize("args,said", [
    (["scor"], "No such command 'scor'. Did you mean 'scores'? (see 'attncli --help')"),
    (["contxt", "the cat"], "No such command 'contxt'. Did you mean 'context'?"),
    (["vectors", "inf"], "No such command 'inf'. Did you mean 'info'? (see 'attncli vectors --help')"),
    (["qkv", "int"], "No such command 'int'. Did you mean 'init'?"),
    (["help", "scor"], "No such command 'scor'. Did you mean 'scores'?"),
    (["help", "vectors", "lst"], "No such command 'lst'. Did you mean 'list'?"),
    (["frobnicate"], "No such command 'frobnicate'. (see 'attncli --help')"),
])
def test_no_such_command_names_the_nearest(args, said):
    assert said in fails(run(*args), code=2)


def test_every_command_is_suggested_for_itself_misspelt():
    for name in (path for path in COMMANDS if " " not in path):
        misspelt = name[:-1] + "x"  # its last letter mistyped
        assert f"Did you mean '{name}'" in fails(run(misspelt), code=2), name


QKV = [path for path, command in COMMANDS.items() if any(p.name == "qkv" for p in command.params)]


@pytest.mark.parametrize("path", QKV)
@pytest.mark.parametrize("value,meant", [("randon", "random"), ("Random", "random"), ("identiy", "identity"),
                                         ("IDENTITY", "identity"), ("none", None), ("", None)])
def test_a_qkv_that_is_no_path_is_a_usage_error(path, value, meant):
    trained = "random" not in COMMANDS[path].params[[p.name for p in COMMANDS[path].params].index("qkv")].metavar
    takes = "identity or FILE.npz" if trained else "identity, random or FILE.npz"
    meant = None if trained and meant == "random" else meant
    line = fails(run(*path.split(), "--qkv", value), f"Invalid value for '--qkv': {value!r} names no file", code=2)
    assert line.split("; give ")[1].startswith(takes)
    assert ("(did you mean" in line) == (meant is not None) and (meant is None or f"(did you mean {meant}?)" in line)


@pytest.mark.parametrize("value", ["randon.npz", "proj.npz", "d/randon", "./randon"])
def test_a_qkv_that_is_a_path_is_read_as_one(value, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    fails(run("scores", "the cat", "--qkv", value), f"{value}: no such file; give --qkv a file that exists", code=1)


def test_a_file_named_like_a_word_of_qkv_is_read(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "randon").write_text("not numpy")
    fails(run("scores", "the cat", "--qkv", "randon"), "randon: not a .npz file", code=1)


@pytest.mark.parametrize("args,owners,reads", [
    (["context", "the cat", "--file", "x.txt"], "generate, scores, not of context",
     "attncli context reads its input as [SENTENCE], or from standard input when that is left out "
     "(attncli context ... < x.txt)"),
    (["explain", "--document"], "scores", "attncli explain reads its input as [SENTENCE]"),
    (["batch", "--window", "3"], "scores", "attncli batch reads its input as [FILE], or from standard input"),
    (["neighbors", "orange", "--raw"], "scores, not of neighbors", "attncli neighbors reads its input as WORD"),
    (["vectors", "list", "--raw"], "scores, not of list", None),
    (["vectors", "info", "--jobs", "2"], "batch, faithfulness, generate, stats", None),
    (["stats", "--neighbors", "3"], "batch, compare, context, neighbors, not of stats",
     "attncli stats reads its input as [CORPUS], or from standard input when that is left out (attncli stats ... < FILE)"),
])
def test_an_option_of_other_commands_says_whose_it_is(args, owners, reads):
    line = fails(run(*args), code=2)
    assert f"No such option '{args[-2] if args[-1][0] != '-' else args[-1]}': it is an option of {owners}" in line
    assert (reads in line) if reads else "reads its input" not in line


def test_an_option_no_command_has_keeps_click_s_suggestions():
    assert fails(run("context", "the cat", "--feilds", "x"), code=2) == (
        "attncli: error: No such option '--feilds'. (Did you mean one of: '--fields', '--heads'?) (see 'attncli context --help')")


@pytest.mark.parametrize("args,quoted", [
    (["scores", "earth", "is", "like", "an", "orange"], "attncli scores 'earth is like an orange'"),
    (["context", "--token", "orange", "The", "earth", "is"], "attncli context 'The earth is'"),
    (["neighbors", "orange", "--context", "The", "earth"], "attncli neighbors ... --context 'The earth'"),
    (["vectors", "info", "extra"], '"The earth is like an orange"'),
])
def test_words_past_the_arguments_say_to_quote_the_sentence(args, quoted):
    line = fails(run(*args), "Got unexpected extra argument", code=2)
    assert f"; quote a sentence to give it as one argument: {quoted} (see '" in line


@pytest.mark.parametrize("args,other", [
    (["context", "--token", "orange"], "give a SENTENCE argument, or pipe it on standard input"),
    (["explain"], "give a SENTENCE argument, or pipe it on standard input"),
    (["scores"], "give a SENTENCE argument, or a document with --file DOC.txt, or pipe it on standard input"),
    (["scores", "--document"], "--document reads the document from standard input; give --file DOC.txt"),
    (["batch"], "give FILE, or pipe it on standard input"),
    (["stats"], "give CORPUS, or --probe repeated, or pipe it on standard input"),
])
def test_no_input_on_a_terminal_says_what_this_command_takes(args, other):
    status, out, err, _ = ptys.run(args, on_tty=("stdin",))
    assert (status, out) == (2, b"")
    assert err.decode().startswith(f"attncli: error: no input: {other}") and err.count(b"\n") == 1
