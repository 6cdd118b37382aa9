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
    arrays["prompts"] = np.array(PROMPTS, dtype=np.str_)
    arrays["versions"] = np.array([f"python={platform.python_version()}", f"torch={torch.__version__}",
                                   f"transformers={transformers.__version__}", f"numpy={np.__version__}"],
                                  dtype=np.str_)
    write_npz(ROOT / "generation.npz", arrays)
    print(f"wrote {ROOT / 'generation.npz'} ({(ROOT / 'generation.npz').stat().st_size:,} bytes)")


if __name__ == "__main__":
    sys.exit(main())
