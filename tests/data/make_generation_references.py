"""Make tests/data/generation.npz: what transformers + torch write after a prompt with each
decoder of tests/data/models (tiny-gpt2, tiny-llama, tiny-qwen2, tiny-mistral), greedy, and
its forward pass over the prompt and what it wrote, against which tests/test_generate.py
holds `attncli generate`. The tests never import torch.

Run in the environment of the other references, from the clone's root:

    . venv-torch/bin/activate
    HF_HUB_OFFLINE=1 python tests/data/make_generation_references.py

For each model NAME (its dashes as _) and prompt k of PROMPTS:

    NAME__ids_k          int32 (T,)            the prompt's ids (the tokenizer's, its markers
                                               with them) and what generate(do_sample=False,
                                               max_new_tokens=NEW) wrote after them, stopping
                                               at the model's end-of-sequence piece
    NAME__prompt_k       int32 (1,)            the prompt's length P
    NAME__attentions_k   float32 (L, H, T, T)  the eager forward pass over the T ids
    NAME__logprobs_k     float32 (T - P,)      each written piece's log-probability at the
                                               position before it, log_softmax of the logits

Each model runs in float32, loaded from its folder, eval mode, one thread, seeds fixed.

And for tiny-gpt2, ALTI-Logit as its authors formulate it (Ferrando et al. 2023, "Explaining
How Transformers Use Context to Build Predictions"; their code, mt-upc/logit-explanations:
get_logit_contributions' affine transformed vectors "aff_x_j" through the final layer norm
made linear, tracked to the input by ALTI's rollout as track2input_tokens does), written
here in torch from hooks on the model's own modules, in float64, a step at a time: for the
written piece k, the model over the prefix ids[:P + k] and the logit of ids[P + k] at its
last position:

    tiny_gpt2__alti_logit_k           float64 (N, T - 1)  written piece k's row over the
                                                          positions 0 .. P + k - 1, NaN after
    tiny_gpt2__alti_logit_contrast_k  float64 (N, T - 1)  the same of the logit difference
                                                          of ids[P + k] and FOIL
    tiny_gpt2__logit_k                float64 (N,)        the logit of ids[P + k] there
    tiny_gpt2__foil                   int32 ()            FOIL: the id of the first
                                                          prompt's first piece
"""

from __future__ import annotations

import os
import platform
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402

from make_gguf_references import write_npz  # noqa: E402

ROOT = Path(__file__).resolve().parent
MODELS = ["tiny-gpt2", "tiny-llama", "tiny-qwen2", "tiny-mistral"]
PROMPTS = ["The earth is like an orange", "I sat on the bank of the river and"]
NEW = 8


def main() -> None:
    torch.manual_seed(0)
    torch.set_num_threads(1)
    arrays = {}
    for name in MODELS:
        folder = ROOT / "models" / name
        tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
        model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32,
                                                                  attn_implementation="eager").eval()
        key = name.replace("-", "_")
        for k, prompt in enumerate(PROMPTS):
            ids = torch.tensor([tokenizer(prompt)["input_ids"]])
            P = ids.shape[1]
            with torch.inference_mode():
                written = model.generate(ids, max_new_tokens=NEW, do_sample=False,
                                         pad_token_id=model.generation_config.eos_token_id)
                result = model(written, output_attentions=True)
            logp = torch.log_softmax(result.logits[0], dim=-1)
            chosen = written[0, P:]
            arrays[f"{key}__ids_{k}"] = written[0].numpy().astype(np.int32)
            arrays[f"{key}__prompt_{k}"] = np.array(P, dtype=np.int32)
            arrays[f"{key}__attentions_{k}"] = torch.stack(result.attentions)[:, 0].numpy()
            arrays[f"{key}__logprobs_{k}"] = logp[P - 1:-1].gather(1, chosen[:, None])[:, 0].numpy()
            print(f"{name} {prompt!r}: {tokenizer.convert_ids_to_tokens(chosen.tolist())}")
            if name == "tiny-gpt2":
                arrays.update(alti_logit_arrays(model, written[0], P, k, foil=tokenizer(PROMPTS[0])["input_ids"][0]))
    arrays["prompts"] = np.array(PROMPTS, dtype=np.str_)
    arrays["versions"] = np.array([f"python={platform.python_version()}", f"torch={torch.__version__}",
                                   f"transformers={transformers.__version__}", f"numpy={np.__version__}"],
                                  dtype=np.str_)
    write_npz(ROOT / "generation.npz", arrays)
    print(f"wrote {ROOT / 'generation.npz'} ({(ROOT / 'generation.npz').stat().st_size:,} bytes)")


def alti_logit_arrays(model, ids: torch.Tensor, P: int, k: int, foil: int) -> dict[str, np.ndarray]:
    """ALTI-Logit of each written piece of ids (T,) after the prompt's P, with and without
    the contrast with `foil`, a step's prefix at a time."""
    model = model.double()
    N, T = len(ids) - P, len(ids)
    plain, contrast, logits = np.full((N, T - 1), np.nan), np.full((N, T - 1), np.nan), np.empty(N)
    for n in range(N):
        prefix, target = ids[:P + n], int(ids[P + n])
        plain[n, :P + n], logits[n] = alti_logit(model, prefix, target)
        contrast[n, :P + n], _ = alti_logit(model, prefix, target, foil)
    model.float()
    return {"tiny_gpt2__alti_logit_%d" % k: plain, "tiny_gpt2__alti_logit_contrast_%d" % k: contrast,
            "tiny_gpt2__logit_%d" % k: logits, "tiny_gpt2__foil": np.array(foil, dtype=np.int32)}


@torch.no_grad()
def alti_logit(model, ids: torch.Tensor, target: int, foil: int | None = None) -> tuple[np.ndarray, float]:
    """The authors' ALTI-Logit of the logit of `target` (minus `foil`'s) at the last of `ids`
    (S,) through a GPT2LMHeadModel: -> (the positions' shares (S,), the logit)."""
    seen = {}
    blocks = model.transformer.h
    hooks = [b.ln_1.register_forward_hook(lambda m, i, o, l=l: seen.__setitem__(("x", l), i[0][0]))
             for l, b in enumerate(blocks)]
    hooks += [b.ln_2.register_forward_hook(lambda m, i, o, l=l: seen.__setitem__(("y", l), i[0][0]))
              for l, b in enumerate(blocks)]
    hooks.append(model.transformer.ln_f.register_forward_hook(lambda m, i, o: seen.__setitem__("last", i[0][0])))
    out = model(ids[None], output_attentions=True)
    for h in hooks:
        h.remove()
    H = model.config.n_head
    D = model.config.n_embd
    d = D // H
    lnf = model.transformer.ln_f
    row = model.lm_head.weight[target] - (model.lm_head.weight[foil] if foil is not None else 0)  # (D,)
    last = seen["last"][-1]  # (D,) the final norm's input at the last position

    def through_final_norm(v):  # the final layer norm made linear, its factor the last state's (l_transform)
        centred = v - v.mean(-1, keepdim=True)
        return centred * lnf.weight / torch.sqrt(last.var(unbiased=False) + lnf.eps)

    updates, mixing = [], []
    for l, b in enumerate(blocks):
        x, y = seen[("x", l)], seen[("y", l)]  # (S, D): the layer's input and the attention's residual sum
        alpha = out.attentions[l][0]  # (H, S, S)
        W_v = b.attn.c_attn.weight[:, 2 * D:].reshape(D, H, d)
        b_v = b.attn.c_attn.bias[2 * D:].reshape(H, d)
        W_o = b.attn.c_proj.weight.reshape(H, d, D)
        normed = (x - x.mean(-1, keepdim=True)) * b.ln_1.weight / torch.sqrt(x.var(-1, unbiased=False, keepdim=True)
                                                                           + b.ln_1.eps)  # (S, D), no bias
        values = torch.einsum("sd,dhz->hsz", normed, W_v) + (b.ln_1.bias @ W_v.reshape(D, D)).reshape(H, d)[:, None] \
            + b_v[:, None]  # (H, S, d): the affine part, the norm's and the value's biases in it
        affine = torch.einsum("hts,hsz,hzd->tsd", alpha, values, W_o)  # (S, S, D) aff_x_j
        updates.append(through_final_norm(affine[-1]) @ row)  # (S,) dlogit^l of each j
        parts = affine + torch.diag_embed(x.T).permute(1, 2, 0)  # (S, S, D): the residual on the diagonal
        total = parts.sum(1) + b.attn.c_proj.bias  # (S, D)
        assert torch.allclose(total, y, atol=1e-9), "the decomposition does not rebuild the residual sum"
        scores = torch.clamp(total.abs().sum(-1)[:, None] - (parts - total[:, None]).abs().sum(-1), min=0)  # (S, S)
        mixing.append(scores / scores.sum(-1, keepdim=True))
    rolled = [mixing[0]]
    for C in mixing[1:]:
        rolled.append(C @ rolled[-1])
    shares = updates[0] + sum(updates[l] @ rolled[l - 1] for l in range(1, len(updates)))
    logit = out.logits[0, -1, target] - (out.logits[0, -1, foil] if foil is not None else 0)
    return shares.numpy(), float(logit)


if __name__ == "__main__":
    sys.exit(main())
