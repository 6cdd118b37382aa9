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


def test_the_precision_of_numbers_is_as_documented(tmp_path):
    """float64 from the vectors for a sentence; float32 numbers for a document's rows and for
    nearest words' cosines, as the JSON section says, within about six digits of float64."""
    import numpy as np

    from attncli import load_vectors
    from attncli.analyze import Options, attend

    paragraph = README[README.index("## JSON"):README.index("The keys are a stable contract")]
    assert "float32" in paragraph and "`--file`" in paragraph and "`token_neighbors`" in paragraph
    text = "The earth is like an orange , and the moon is like a lemon that the sun warms"
    doc_file = tmp_path / "doc.txt"
    doc_file.write_text(text)
    rows = [json.loads(line) for line in run(["scores", "--file", str(doc_file), "--json", "--top-k", "20"]).splitlines()]
    att = attend(text, load_vectors(), Options())
    f32 = lambda x: float(np.float32(x)) == x  # noqa: E731
    for row in rows:
        i, z = row["index"], np.array(row["context"])
        assert all(map(f32, row["context"])) and all(f32(t["weight"]) for t in row["top"])
        assert np.max(np.abs(z - att.context[i])) < 1e-6 * np.linalg.norm(att.context[i])
        assert all(abs(t["weight"] - att.mean_weights[i, t["index"]]) < 1e-6 for t in row["top"])
    sentence = json.loads(run(["context", text, "--token", "orange", "--json"]))
    assert not all(map(f32, sentence["context"]))  # a sentence's numbers are float64
    assert all(f32(n["cosine"]) for n in sentence["neighbors"] + sentence["token_neighbors"])
