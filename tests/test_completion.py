"""Shell completion through click's own mechanism, as docs/reference/shell.md shows it:
commands, options, the words of a choice, and file paths after every option or argument
that takes a file (the shell lists the files itself when told "file")."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from attncli.cli import cli

BIN = Path(sys.executable).parent  # the installed attncli of this environment


@pytest.mark.parametrize("shell,marker", [("bash", "complete -o nosort -F"), ("zsh", "compdef"), ("fish", "complete --no-files --command attncli")])
def test_completion_script(shell, marker):
    result = CliRunner().invoke(cli, [], prog_name="attncli", env={"_ATTNCLI_COMPLETE": f"{shell}_source"})
    assert result.exit_code == 0
    assert marker in result.stdout


def complete(words: str) -> list[str]:
    """What click answers bash for the command line `words`, completing its last word
    (empty when `words` ends in a space): one 'type,value' a line."""
    env = {"_ATTNCLI_COMPLETE": "bash_complete", "COMP_WORDS": words, "COMP_CWORD": str(len(words.split(" ")) - 1)}
    result = CliRunner().invoke(cli, [], prog_name="attncli", env=env)
    assert result.exit_code == 0
    return [line for line in result.stdout.split("\n") if line]


def test_completes_commands_and_options():
    assert complete("attncli sc")[:1] == ["plain,scores"]
    assert {"plain,--token", "plain,--top-k"} <= set(complete("attncli context --to"))


# every place that takes a file: the options and arguments, in a command that has them
FILE_PLACES = [
    "attncli scores --vectors ", "attncli scores --vectors glo", "attncli vectors info --vectors ",
    "attncli scores --qkv pro", "attncli rnn --weights ", "attncli scores --file ", "attncli qkv init -o ",
    "attncli qkv init --output ", "attncli batch ", "attncli batch corp", "attncli vectors convert ",
    "attncli scores --svg ", "attncli scores --html ", "attncli scores --png ", "attncli faithfulness corp",
    "attncli faithfulness --model ", "attncli faithfulness --png ",
]


@pytest.mark.parametrize("words", FILE_PLACES)
def test_completes_file_paths_where_a_file_goes(words):
    incomplete = words.split(" ")[-1]
    assert complete(words) == [f"file,{incomplete}"]


def test_qkv_completes_its_words_and_paths():
    assert complete("attncli scores --qkv ") == ["file,", "plain,identity", "plain,random"]
    assert complete("attncli scores --qkv r") == ["file,r", "plain,random"]


def test_no_file_where_none_goes():
    assert not [c for c in complete("attncli scores --token ") if c.startswith("file,")]
    assert complete("attncli scores --mask ") == ["plain,none", "plain,causal", "plain,self"]


def test_the_installed_command_completes_paths_in_a_real_process():
    env = {**os.environ, "_ATTNCLI_COMPLETE": "bash_complete", "COMP_WORDS": "attncli scores --vectors ",
           "COMP_CWORD": "3"}
    proc = subprocess.run([str(BIN / "attncli")], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["file,"]


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
@pytest.mark.parametrize("words,cword,reply,opts", [
    (["attncli", "scores", "--vectors", ""], 3, [], ["-o default"]),  # bash completes file names itself
    (["attncli", "batch", ""], 2, [], ["-o default"]),
    (["attncli", "scores", "--qkv", ""], 3, ["identity", "random"], ["-o default"]),
    (["attncli", "scores", "--qkv", "ran"], 3, ["random"], ["-o default"]),
    (["attncli", "vect"], 1, ["vectors"], []),
])
def test_bash_runs_the_completion_script(tmp_path, words, cword, reply, opts):
    """bash itself sources the script attncli gives, and calls its function as it would on
    Tab; compopt (only callable while bash completes interactively) is recorded instead."""
    script = f"""
eval "$(_ATTNCLI_COMPLETE=bash_source attncli)"
compopt() {{ printf 'compopt %s %s\\n' "$1" "$2"; }}  # "$*" would join with the script's IFS, a newline
COMP_WORDS=({" ".join(f"'{w}'" for w in words)})
COMP_CWORD={cword}
_attncli_completion attncli
for r in "${{COMPREPLY[@]}}"; do printf 'reply %s\\n' "$r"; done
"""
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    proc = subprocess.run(["bash", "--norc", "--noprofile", "-c", script], env=env, capture_output=True, text=True,
                          timeout=60, cwd=tmp_path)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    lines = proc.stdout.splitlines()
    assert [line[6:] for line in lines if line.startswith("reply ")] == reply
    assert [line[8:] for line in lines if line.startswith("compopt ")] == opts
