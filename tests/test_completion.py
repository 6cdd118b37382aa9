"""Shell completion through click's own mechanism, as the README shows it."""

import pytest
from click.testing import CliRunner

from attncli.cli import cli


@pytest.mark.parametrize("shell,marker", [("bash", "complete -o nosort -F"), ("zsh", "compdef"), ("fish", "complete --no-files --command attncli")])
def test_completion_script(shell, marker):
    result = CliRunner().invoke(cli, [], prog_name="attncli", env={"_ATTNCLI_COMPLETE": f"{shell}_source"})
    assert result.exit_code == 0
    assert marker in result.stdout


def test_completes_commands_and_options():
    env = {"_ATTNCLI_COMPLETE": "bash_complete", "COMP_WORDS": "attncli sc", "COMP_CWORD": "1"}
    result = CliRunner().invoke(cli, [], prog_name="attncli", env=env)
    assert result.stdout.split("\n")[:1] == ["plain,scores"]
    env = {"_ATTNCLI_COMPLETE": "bash_complete", "COMP_WORDS": "attncli context --to", "COMP_CWORD": "2"}
    result = CliRunner().invoke(cli, [], prog_name="attncli", env=env)
    assert "plain,--token" in result.stdout.split("\n") and "plain,--top-k" in result.stdout.split("\n")
