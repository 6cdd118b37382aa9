"""The README's sample output and JSON example are what the tool prints today."""

import json
import re
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from attncli.cli import cli

README = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
SAMPLES = re.findall(r"```console\n\$ attncli ([^\n]*)\n(.*?)```", README, flags=re.S)


def run(args):
    result = CliRunner().invoke(cli, args, env={"COLUMNS": "80", "NO_COLOR": None, "FORCE_COLOR": None})
    assert result.exit_code == 0, result.stderr
    return result.stdout


@pytest.mark.parametrize("command,shown", SAMPLES, ids=[c for c, _ in SAMPLES])
def test_sample_output_is_real(command, shown):
    assert run(shlex.split(command)) == shown


def test_there_are_samples_of_both_commands():
    assert {c.split()[0] for c, _ in SAMPLES} == {"scores", "context"}


def test_json_example_matches_a_real_run():
    example = json.loads(re.search(r"```json\n(.*?)```", README, flags=re.S).group(1))
    real = json.loads(run(["context", example["sentence"], "--token", example["token"], "--format", "json"]))
    assert list(example) == list(real)
    for key, value in example.items():
        if key in ("context", "neighbors", "token_neighbors"):  # shortened in the README
            assert value == real[key][: len(value)]
        else:
            assert value == real[key], key


def test_contract_table_names_every_key():
    documented = set(re.findall(r"^\| `(\w+)`(?:, `(\w+)`)? \|", README, flags=re.M))
    keys = {k for pair in documented for k in pair if k}
    scores = json.loads(run(["scores", "The earth is like an orange", "--json"]))
    context = json.loads(run(["context", "The earth is like an orange", "--token", "orange", "--all", "--json"]))
    assert set(scores) | set(context) <= keys


def test_library_example_runs(capsys):
    example = re.search(r"```python\n(.*?)```", README, flags=re.S).group(1)
    exec(compile(example, "README.md", "exec"), {})
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == 2 and all(line.split()[0] in {"the", "earth", "is", "like", "an", "color", "bright", "a"} for line in printed)
