"""attncli generate: the pieces a decoder writes, held against transformers' generate and its
forward pass over what it wrote (tests/data/generation.npz, made by
make_generation_references.py); the cached steps against a whole pass; sampling; bad input."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("safetensors", reason="the model extra: pip install '.[model]'")
from clirunner import fails, one, run  # noqa: E402

from attncli import attention  # noqa: E402
from attncli.models import generation, load_model  # noqa: E402

HERE = Path(__file__).parent
MODELS = HERE / "data" / "models"
REFERENCE = np.load(HERE / "data" / "generation.npz")
PROMPTS = [str(p) for p in REFERENCE["prompts"]]
DECODERS = ["tiny-gpt2", "tiny-llama", "tiny-qwen2", "tiny-mistral"]


@pytest.mark.parametrize("name", DECODERS)
@pytest.mark.parametrize("k", range(len(PROMPTS)))
def test_greedy_pieces_log_probabilities_and_every_head_are_transformers(name, k):
    key = name.replace("-", "_")
    ids, P = REFERENCE[f"{key}__ids_{k}"], REFERENCE[f"{key}__prompt_{k}"].item()
    attentions, logprobs = REFERENCE[f"{key}__attentions_{k}"], REFERENCE[f"{key}__logprobs_{k}"]
    model = load_model(str(MODELS / name))
    assert model.encode(PROMPTS[k]).ids.tolist() == ids[:P].tolist()
    out = generation.generate(model, ids[:P], 8, eos=model.eos)
    assert out.ids == ids[P:].tolist()
    for n, step in enumerate(out.steps):
        assert step.logprob == pytest.approx(float(logprobs[n]), abs=1e-5)
        np.testing.assert_allclose(step.weights, attentions[:, :, P - 1 + n, :P + n], atol=1e-5, rtol=0)


@pytest.mark.parametrize("name", DECODERS)
def test_each_cached_step_is_the_whole_pass_over_everything_before_it(name):
    """Every step runs its one new piece against the cached keys and values; a forward pass
    over the prompt and every piece written gives the same rows and scores within 1e-12."""
    model = load_model(str(MODELS / name))
    prompt = model.encode(PROMPTS[1]).ids
    out = generation.generate(model, prompt, 12, sampling=generation.Sampling(1.0, seed=3))
    ids, P = np.concatenate([prompt, out.ids]), len(prompt)
    whole = model.family.forward(ids, model.weights, model.config)
    logp = attention.log_softmax(model.family.logits(np.asarray(whole.hidden)[-1], model.weights, model.config))
    for n, step in enumerate(out.steps):
        np.testing.assert_allclose(step.weights, np.asarray(whole.weights)[:, :, P - 1 + n, :P + n], atol=1e-12,
                                   rtol=0)
        assert step.logprob == pytest.approx(logp[P - 1 + n, step.id], abs=1e-12)
        assert [j for j, _ in step.likeliest] == list(np.argsort(-logp[P - 1 + n], kind="stable")[:5])


class Fixed:
    """A generator whose draws are given."""

    def __init__(self, *draws):
        self.draws = list(draws)

    def random(self):
        return self.draws.pop(0)


def test_a_draw_falls_where_its_running_sum_says():
    z = np.log(np.array([0.1, 0.4, 0.2, 0.3]))  # ranked: 1 (0.4), 3 (0.3), 2 (0.2), 0 (0.1)
    everything = generation.Sampling(1.0)
    assert [generation.choose(z, everything, Fixed(u)) for u in (0.0, 0.39, 0.41, 0.69, 0.71, 0.89, 0.91)] == \
        [1, 1, 3, 3, 2, 2, 0]
    top2 = generation.Sampling(1.0, top_k=2)  # 0.4 and 0.3, renormalized: 4/7 and 3/7
    assert [generation.choose(z, top2, Fixed(u)) for u in (0.5, 0.58, 0.99)] == [1, 3, 3]
    nucleus = generation.Sampling(1.0, top_p=0.65)  # 0.4 + 0.3 reach 0.65: the two
    assert {generation.choose(z, nucleus, Fixed(u)) for u in np.linspace(0, 0.999, 50)} == {1, 3}
    cold = generation.Sampling(0.05)  # temperature 0.05: 0.4 ** 20 against 0.3 ** 20, the first almost surely
    assert generation.choose(z, cold, Fixed(0.99)) == 1
    assert generation.choose(z, generation.Sampling(), None) == 1  # greedy


def test_the_same_seed_writes_the_same_pieces(tmp_path):
    args = ["generate", PROMPTS[0], "--model", MODELS / "tiny-gpt2", "--max-new-tokens", "10", "--sample",
            "--temperature", "1.5", "--seed", "11", "--json"]
    a, b = one(run(*args)), one(run(*args))
    assert a["generated"] == b["generated"] and a["sampling"]["seed"] == 11
    other = one(run(*args[:-2], "12", "--json"))
    assert other["generated"] != a["generated"]
    greedy = one(run("generate", PROMPTS[0], "--model", MODELS / "tiny-gpt2", "--max-new-tokens", "10", "--json"))
    top1 = one(run(*args[:-3], "--top-k", "1", "--json"))
    assert top1["generated"] == greedy["generated"]


def test_the_document_holds_each_piece_s_row_its_sink_and_top():
    doc = one(run("generate", PROMPTS[1], "--model", MODELS / "tiny-llama", "--max-new-tokens", "5", "--json"))
    P, N = doc["prompt_length"], len(doc["generated"])
    assert doc["tokens"][P:] == doc["generated"] and len(doc["tokens"]) == P + N == len(doc["ids"])
    assert doc["layer"] == 2 and doc["head"] is None and doc["stop"] == "length"
    for k, row in enumerate(doc["weights"]):
        assert len(row) == P + k and sum(row) == pytest.approx(1, abs=1e-12)
        heads = np.array(doc["heads"][k])  # (H, P + k)
        np.testing.assert_allclose(row, heads.mean(axis=0), atol=1e-15)
        assert doc["sink"][k] == row[0]
        top = doc["top"][k]
        assert [t["index"] for t in top] == list(np.argsort(-np.array(row[1:P]), kind="stable")[:3] + 1)
        assert doc["alternatives"][k][0]["id"] == doc["ids"][P + k]  # greedy: the likeliest
    headed = one(run("generate", PROMPTS[1], "--model", MODELS / "tiny-llama", "--max-new-tokens", "5", "--layer",
                     "1", "--head", "3", "--json"))
    assert headed["layer"] == 1 and headed["head"] == 3 and "heads" not in headed
    assert headed["generated"] == doc["generated"]


def test_generation_stops_at_the_end_of_sequence_piece():
    model = load_model(str(MODELS / "tiny-gpt2"))
    prompt = model.encode(PROMPTS[0]).ids
    first = generation.generate(model, prompt, 12).ids
    n = next(i for i in range(1, 12) if first[i] not in first[:i])  # a piece written once, after others
    out = generation.generate(model, prompt, 12, eos=(first[n],))
    assert out.ids == first[:n + 1] and out.stop == "eos"


def test_bad_input_is_one_line():
    model = ["--model", MODELS / "tiny-gpt2"]
    fails(run("generate", PROMPTS[0], *model, "--max-new-tokens", "0"), "--max-new-tokens", code=2)
    fails(run("generate", PROMPTS[0], *model, "--max-new-tokens", "70"), "past its 64 positions",
          "ask for at most 59")
    fails(run("generate", " ".join(["orange"] * 80), *model), "the prompt is 81 word pieces long", "reads at most 64")
    fails(run("generate", PROMPTS[0], *model, "--temperature", "0.5"), "add --sample", code=2)
    fails(run("generate", PROMPTS[0]), "give --model", code=2)
    fails(run("generate", PROMPTS[0], "--model", MODELS / "tiny-bert"), "is an encoder", code=2)


def test_a_table_shows_the_text_with_its_control_characters_visible():
    result = run("generate", "The [bold]earth[/bold] \x1b[31mis", "--model", MODELS / "tiny-gpt2",
                 "--max-new-tokens", "3", "--format", "table")
    assert result.exit_code == 0, result.stderr
    assert "[bold]earth[/bold]" in result.stdout and "\x1b" not in result.stdout
    assert "looked at:" in result.stdout and "the sink" in result.stdout


def test_generate_as_an_installed_process():
    env = {**os.environ, "NO_COLOR": "1"}
    done = subprocess.run([sys.executable, "-m", "attncli", "generate", PROMPTS[0], "--model",
                           str(MODELS / "tiny-qwen2"), "--max-new-tokens", "4", "--json"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    P = REFERENCE["tiny_qwen2__prompt_0"].item()
    assert doc["ids"] == REFERENCE["tiny_qwen2__ids_0"][:P + 4].tolist()


def chat_model(tmp_path, template) -> Path:
    """tiny-llama's files, its tokenizer_config.json given `template` as its chat_template."""
    import shutil

    folder = tmp_path / "chat"
    shutil.copytree(MODELS / "tiny-llama", folder)
    settings = json.loads((folder / "tokenizer_config.json").read_text())
    settings["chat_template"] = template
    (folder / "tokenizer_config.json").write_text(json.dumps(settings))
    return folder


LLAMA2_CHAT = ("{% for message in messages %}{{ bos_token + '[INST] ' + message['content'] + ' [/INST]' }}"
               "{% endfor %}")


def test_chat_puts_the_prompt_in_the_model_s_template(tmp_path):
    folder = chat_model(tmp_path, LLAMA2_CHAT)
    result = run("generate", "the earth", "--model", folder, "--max-new-tokens", "3", "--chat", "--json")
    doc = one(result, stderr=None)
    assert doc["chat"] == "<s>[INST] the earth [/INST]"
    assert "chat template" in result.stderr
    model = load_model(str(folder))
    expected = model.tokenizer.encode("<s>[INST] the earth [/INST]", add_special_tokens=False).ids
    assert doc["ids"][:doc["prompt_length"]] == expected and expected.count(1) == 1  # one BOS, the template's
    out = generation.generate(model, np.array(expected), 3, eos=model.eos)
    assert doc["ids"][doc["prompt_length"]:] == out.ids


@pytest.mark.parametrize("template, words", [
    ("{% for m in messages %}{{ m['content'] ", ("cannot be rendered", "TemplateSyntaxError")),
    ("{{ ''.__class__.__mro__[1].__subclasses__() }}", ("cannot be rendered", "SecurityError")),
    ("{{ messages.append(1) }}", ("cannot be rendered",)),
    ("{% for i in range(100000) %}{% for j in range(100000) %}xx{% endfor %}{% endfor %}", ("more than 1,000,000",)),
    ("{{ raise_exception('only user and assistant roles') }}", ("only user and assistant roles",)),
])
def test_a_chat_template_that_is_not_one_or_reaches_out_is_refused(tmp_path, template, words):
    folder = chat_model(tmp_path, template)
    fails(run("generate", "the earth", "--model", folder, "--chat"), *words)


def test_chat_without_a_template_says_so():
    fails(run("generate", "the earth", "--model", MODELS / "tiny-gpt2", "--chat"), "has no chat template",
          "leave out --chat")


def test_a_picture_of_the_written_rows(tmp_path):
    pytest.importorskip("matplotlib")
    png = tmp_path / "written.png"
    doc = one(run("generate", PROMPTS[0], "--model", MODELS / "tiny-llama", "--max-new-tokens", "4", "--png", png,
                  "--json"))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and len(doc["weights"]) == 4


def test_rollout_attributes_each_piece_by_the_rollout_of_a_whole_pass():
    doc = one(run("generate", PROMPTS[1], "--model", MODELS / "tiny-qwen2", "--max-new-tokens", "4", "--method",
                  "rollout", "--json"))
    model = load_model(str(MODELS / "tiny-qwen2"))
    ids, P = np.array(doc["ids"]), doc["prompt_length"]
    A = np.asarray(model.family.forward(ids[:-1], model.weights, model.config).weights).mean(axis=1)  # (L, T, T)
    R = None
    for layer in A:  # Abnar & Zuidema's rollout, a layer at a time
        step = 0.5 * layer + 0.5 * np.eye(len(layer))
        step /= step.sum(axis=1, keepdims=True)
        R = step if R is None else step @ R
    assert doc["method"] == "rollout"
    for k, row in enumerate(doc["attribution"]):
        np.testing.assert_allclose(row, R[P + k - 1, :P + k], atol=1e-12)


class Final:
    """A consumer that keeps the final state of a pass's last row."""

    def begin(self, X):
        pass

    def layer(self, l, X, steps):
        pass

    def end(self, X):
        self.last = X[-1]


def logprobs_stepped(model, prompt, written):
    """Each written piece's log-probability, the prompt's pass cached and the pieces fed one at a time."""
    from attncli.models import layers

    cache, out, row = layers.Cache(model.config.layers, len(prompt) + len(written)), [], Final()
    model.family.run(np.asarray(prompt), model.weights, model.config, row, cache=cache)
    for i in written:
        logp = attention.log_softmax(model.family.logits(row.last[None], model.weights, model.config)[0])
        out.append(logp[i])
        row = Final()
        model.family.run(np.array([i]), model.weights, model.config, row, cache=cache)
    return np.array(out)


def test_leave_one_out_is_the_fall_of_each_piece_s_log_probability_without_a_prompt_piece():
    doc = one(run("generate", PROMPTS[0], "--model", MODELS / "tiny-gpt2", "--max-new-tokens", "3", "--method",
                  "leave-one-out", "--json"))
    model = load_model(str(MODELS / "tiny-gpt2"))
    ids, P = doc["ids"], doc["prompt_length"]
    written = ids[P:]
    whole = logprobs_stepped(model, ids[:P], written)
    np.testing.assert_allclose(whole, doc["logprobs"], atol=1e-12)
    effects = np.array(doc["attribution"])  # (N, P)
    assert effects.shape == (len(written), P)
    for j in range(P):
        without = logprobs_stepped(model, ids[:j] + ids[j + 1:P], written)
        np.testing.assert_allclose(effects[:, j], whole - without, atol=1e-12)


@pytest.mark.parametrize("name", ["tiny-gpt2", "tiny-llama"])
def test_alti_attributes_each_piece_by_the_rolled_out_alti_row_of_the_position_before_it(name):
    """Each row is row P + k - 1 of ALTI rolled out to the layer shown, as `contributions`
    computes it (held against its authors' code in test_contributions.py) over the prompt
    and what was written before the last piece: a share of the row, summing to 1."""
    from attncli.mixing import contributions

    doc = one(run("generate", PROMPTS[1], "--model", MODELS / name, "--max-new-tokens", "4", "--method", "alti",
                  "--layer", "1", "--json"))
    model = load_model(str(MODELS / name))
    ids, P = np.array(doc["ids"]), doc["prompt_length"]
    blocks = model.family.blocks(ids[:-1], model.weights, model.config)
    R = contributions.layer_matrices("alti", blocks[:1])[-1]
    for k, row in enumerate(doc["attribution"]):
        assert len(row) == P + k and sum(row) == pytest.approx(1, abs=1e-12)
        np.testing.assert_allclose(row, R[P + k - 1, :P + k], atol=1e-12)
    last = one(run("generate", PROMPTS[1], "--model", MODELS / name, "--max-new-tokens", "4", "--method", "alti",
                   "--json"))  # every layer: a different roll
    assert last["attribution"] != doc["attribution"]


def test_alti_logit_is_its_authors_on_tiny_gpt2():
    """Each written piece's ALTI-Logit row, and its contrast with FOIL, against the authors'
    formulation run in torch a step at a time (make_generation_references.py's alti_logit),
    float64 both: within 1e-9 of rows whose largest is about 1."""
    foil = REFERENCE["tiny_gpt2__foil"].item()
    model = load_model(str(MODELS / "tiny-gpt2"))
    for k, prompt in enumerate(PROMPTS):
        ids, P = REFERENCE[f"tiny_gpt2__ids_{k}"], REFERENCE[f"tiny_gpt2__prompt_{k}"].item()
        args = ["generate", prompt, "--model", MODELS / "tiny-gpt2", "--max-new-tokens", str(len(ids) - P),
                "--method", "alti-logit", "--json"]
        plain, against = one(run(*args)), one(run(*args, "--contrast", model.piece(foil)))
        assert plain["ids"] == ids.tolist() and against["contrast"] == {"token": model.piece(foil), "id": foil}
        for name, doc in ((f"tiny_gpt2__alti_logit_{k}", plain), (f"tiny_gpt2__alti_logit_contrast_{k}", against)):
            for n, row in enumerate(doc["attribution"]):
                assert len(row) == P + n
                np.testing.assert_allclose(row, REFERENCE[name][n, :P + n], atol=1e-9, rtol=0)
        np.testing.assert_allclose([p["logit"] for p in plain["logit"]], REFERENCE[f"tiny_gpt2__logit_{k}"],
                                   atol=1e-9, rtol=0)


@pytest.mark.parametrize("name", DECODERS)
def test_alti_logit_s_positions_and_terms_add_up_to_the_logit(name):
    """The decomposition is exact: the positions' shares and the terms outside the attention
    sum to the logit within 1e-9, the logit is the model's own (a whole pass and its head),
    and the positions' sum is the layers' attention updates summed (ALTI's rows sum to 1).
    Against a piece, the same of the two logits' difference."""
    doc = one(run("generate", PROMPTS[1], "--model", MODELS / name, "--max-new-tokens", "5", "--method",
                  "alti-logit", "--json"))
    model = load_model(str(MODELS / name))
    ids, P = np.array(doc["ids"]), doc["prompt_length"]
    whole = model.family.forward(ids[:-1], model.weights, model.config)
    z = model.family.logits(np.asarray(whole.hidden)[-1], model.weights, model.config)  # (T - 1, V)
    foil = int(ids[1])
    against = one(run("generate", PROMPTS[1], "--model", MODELS / name, "--max-new-tokens", "5", "--method",
                      "alti-logit", "--contrast", model.piece(foil), "--json"))
    for d, minus in ((doc, 0.0), (against, z[:, foil])):
        for k, (row, parts) in enumerate(zip(d["attribution"], d["logit"])):
            actual = z[P - 1 + k, ids[P + k]] - (minus[P - 1 + k] if d is against else 0.0)
            assert parts["logit"] == pytest.approx(actual, abs=1e-9)
            terms = parts["embedding"] + parts["attention_bias"] + parts["feed_forward"] + parts["norm_bias"]
            assert sum(row) + terms == pytest.approx(actual, abs=1e-9)
            assert parts["positions"] == pytest.approx(sum(row), abs=1e-12)
            assert sum(parts["layers"]) == pytest.approx(sum(row), abs=1e-9)
            assert len(row) == P + k and len(parts["layers"]) == model.config.layers


def test_contrast_takes_one_piece_of_the_vocabulary():
    model = ["--model", MODELS / "tiny-gpt2", "--max-new-tokens", "1"]
    spelled = one(run("generate", PROMPTS[0], *model, "--method", "alti-logit", "--contrast", "Ġsea", "--json"))
    written = one(run("generate", PROMPTS[0], *model, "--method", "alti-logit", "--contrast", " sea", "--json"))
    assert spelled["contrast"] == written["contrast"] and spelled["contrast"]["token"] == "Ġsea"
    fails(run("generate", PROMPTS[0], *model, "--method", "alti-logit", "--contrast", "orangutan"),
          "--contrast 'orangutan' is no piece of tiny-gpt2's vocabulary", "give one piece")
    fails(run("generate", PROMPTS[0], *model, "--method", "alti-logit", "--contrast", ""), "--contrast ''")
    fails(run("generate", PROMPTS[0], *model, "--contrast", "Ġsea"), "add --method alti-logit", code=2)
    fails(run("generate", PROMPTS[0], *model, "--method", "rollout", "--contrast", "Ġsea"), "add --method alti-logit",
          code=2)


FILE_PROMPTS = ["The earth is like an orange", "I sat on the bank of the river and", "", "Once upon a time",
                "the cat"]


def test_a_file_of_prompts_gives_a_document_a_line_in_order_the_same_in_one_process_or_two(tmp_path):
    """--file: JSON Lines, a document a prompt with its "line", in input order (the blank line
    skipped, its number kept); sampled with one seed, each line's pieces are the single
    prompt's, and two workers write the same bytes as one."""
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("\n".join(FILE_PROMPTS) + "\n", encoding="utf-8")
    args = ["generate", "--file", prompts, "--model", MODELS / "tiny-llama", "--max-new-tokens", "6", "--sample",
            "--seed", "11", "--top-k", "20", "--method", "alti-logit"]
    one_job, two_jobs = run(*args), run(*args, "--jobs", "2")
    assert one_job.exit_code == 0 and two_jobs.exit_code == 0, one_job.stderr + two_jobs.stderr
    assert one_job.stdout == two_jobs.stdout
    docs = [json.loads(line) for line in one_job.stdout.splitlines()]
    assert [d["line"] for d in docs] == [1, 2, 4, 5]
    for d in docs:
        alone = one(run("generate", FILE_PROMPTS[d["line"] - 1], *args[3:], "--json"))
        assert {k: v for k, v in d.items() if k != "line"} == alone


def test_a_file_s_options_go_together():
    model = ["--model", MODELS / "tiny-gpt2"]
    fails(run("generate", "the cat", "--file", "-", *model), "not both", code=2)
    fails(run("generate", "the cat", "--jobs", "2", *model), "add --file FILE", code=2)
    fails(run("generate", "--file", "-", "--format", "table", *model), "--file writes JSON Lines", code=2)
    fails(run("generate", "--file", "/nonexistent/prompts.txt", *model), "/nonexistent/prompts.txt")


def test_show_draws_the_page_of_what_a_decoder_writes():
    """attncli.show(prompt, model=, generate=N): the page of generate's own document, greedy,
    its method's attribution with it; an encoder or no N is one line."""
    import attncli
    from attncli.errors import InputError
    from attncli.views.page import data_of

    page = attncli.show(PROMPTS[0], model=str(MODELS / "tiny-llama"), generate=3, method="alti-logit")
    doc = one(run("generate", PROMPTS[0], "--model", MODELS / "tiny-llama", "--max-new-tokens", "3", "--method",
                  "alti-logit", "--json"))
    shown = data_of(page.to_html())["docs"][0]
    assert shown["command"] == "generate" and shown["generated"] == doc["generated"]
    np.testing.assert_allclose(shown["attribution"][2], doc["attribution"][2], atol=5e-5)
    with pytest.raises(InputError, match="is an encoder"):
        attncli.show(PROMPTS[0], model=str(MODELS / "tiny-bert"), generate=3)
    with pytest.raises(InputError, match="generate=N"):
        attncli.show(PROMPTS[0], model=str(MODELS / "tiny-gpt2"), view="generate")


def test_a_generation_memory_cannot_hold_is_refused_before_its_first_step(monkeypatch):
    """Its cached keys and values and each step's rows weighed first: refused in one line,
    naming what, before the prompt's pass."""
    from attncli.system import limits

    model = load_model(str(MODELS / "tiny-gpt2"))
    need = generation.held_bytes(6, 20, model)
    monkeypatch.setattr(limits, "available", lambda: need - 1)
    ran = []
    monkeypatch.setattr(model.family, "run", lambda *a, **k: ran.append(1))
    with pytest.raises(limits.ResourceError, match="writing 20 pieces after a prompt of 6 through tiny-gpt2"):
        generation.generate(model, np.arange(6), 20)
    assert ran == []
    monkeypatch.setattr(limits, "available", lambda: need)
    monkeypatch.undo()
    assert len(generation.generate(model, np.arange(6), 20).steps) == 20


@pytest.mark.parametrize("name", ["tiny-gpt2", "tiny-llama"])
def test_the_heads_means_of_the_first_layers_run_no_layer_after_them(name, monkeypatch):
    model = load_model(str(MODELS / name))
    ids = model.encode(PROMPTS[1]).ids
    every = generation.head_means(model, ids)
    ran = []
    layer = model.family.layer
    monkeypatch.setattr(model.family, "layer",
                        lambda X, weights, l, *a, **k: ran.append(l) or layer(X, weights, l, *a, **k))
    np.testing.assert_array_equal(generation.head_means(model, ids, 1), every[:1])
    assert ran == [0]


def test_alti_logit_where_alti_s_rollout_is_undefined_is_null_and_the_run_goes_on(tmp_path):
    """A model whose first layer gives a position the zero vector (its attention's output
    projection, and that piece's word and position rows, zeroed): ALTI's rows there are
    undefined, so are the shares drawing on them and their sum, null in JSON and
    "undefined" in the table; a file of prompts still writes every line."""
    from safetensors.numpy import load_file, save_file

    folder = tmp_path / "zeroed"
    shutil.copytree(MODELS / "tiny-gpt2", folder)
    weights = load_file(folder / "model.safetensors")
    for name in weights:
        if ".h.0.attn.c_proj." in f".{name}":
            weights[name] = np.zeros_like(weights[name])
    wte = next(n for n in weights if n.endswith("wte.weight"))
    wpe = next(n for n in weights if n.endswith("wpe.weight"))
    weights[wte][66] = 0  # "c" of "The capital"
    weights[wpe][2] = 0
    save_file(weights, str(folder / "model.safetensors"))
    args = ["--model", folder, "--max-new-tokens", "2", "--method", "alti-logit"]
    doc = one(run("generate", "The capital", *args, "--json"))
    assert doc["logit"][0]["positions"] is None and None in doc["attribution"][0]
    table = run("generate", "The capital", *args, "--format", "table")
    assert table.exit_code == 0 and "positions undefined" in table.stdout
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("The capital\nthe cat\n", encoding="utf-8")
    lines = run("generate", "--file", prompts, *args)
    assert lines.exit_code == 0, lines.stderr
    assert [json.loads(line)["line"] for line in lines.stdout.splitlines()] == [1, 2]


def test_a_scheduler_in_the_environment_is_for_a_file_and_one_prompt_runs_here():
    doc = one(run("generate", "the cat", "--model", MODELS / "tiny-gpt2", "--max-new-tokens", "2", "--json",
                  env={"ATTNCLI_DASK_SCHEDULER": "tcp://127.0.0.1:9"}))
    assert len(doc["generated"]) == 2


def test_a_file_with_chat_on_a_model_without_a_template_is_refused_once(tmp_path):
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("the cat\nthe dog\n", encoding="utf-8")
    result = run("generate", "--file", prompts, "--model", MODELS / "tiny-gpt2", "--chat")
    fails(result, "tiny-gpt2 has no chat template")
    assert result.stdout == ""


def test_show_refuses_what_it_cannot_write_after_or_show():
    import attncli
    from attncli.errors import InputError, OptionError

    gpt2 = str(MODELS / "tiny-gpt2")
    with pytest.raises(InputError, match="the prompt is empty"):
        attncli.show("  ", model=gpt2, generate=2)
    with pytest.raises(OptionError, match="method must be one of"):
        attncli.show("the cat", model=gpt2, generate=2, method="alti_logit")
    with pytest.raises(OptionError, match='view="heads" shows none of it'):
        attncli.show("the cat", model=gpt2, generate=2, view="heads")
    assert len(attncli.show("the cat", model=gpt2, generate=np.int64(2)).docs[0]["generated"]) == 2


def test_a_document_memory_cannot_hold_is_refused_before_it_writes(monkeypatch):
    from attncli.documents.generation import document_bytes, generate_doc
    from attncli.models import encoder
    from attncli.system import limits

    source = encoder.load(str(MODELS / "tiny-gpt2"))
    P = len(source.model.encode("the cat").ids)
    monkeypatch.setattr(limits, "available", lambda: document_bytes(P, 30, 4) - 1)
    with pytest.raises(limits.ResourceError, match="the document of 30 pieces written after"):
        generate_doc("the cat", source, 30)
