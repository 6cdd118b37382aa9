"""Make tests/data/gguf.npz: what transformers + torch compute from GGUF files of the tiny
reference models, loaded by transformers' own GGUF loader (from_pretrained(..., gguf_file=),
which dequantizes each tensor with gguf-py and undoes llama.cpp's permutation of a "llama"
file's query and key rows), against which tests/test_gguf.py holds attncli's reading of the
same files. The tests never import torch.

The files are made by tests/tinygguf.py (FILES: tiny-llama in F32, F16, BF16 and Q8_0,
tiny-qwen2 in F32, Q8_0 and Q4_0, a Llama of rows 256 wide in Q4_K and Q5_1, tiny-gpt2 in
F32 and Q8_0, whose tokenizer alone is held here: transformers' loader gives a gpt2 file
GPT-2's 1,024 positions whatever its context_length), laid out as
llama.cpp's converter lays them out; a run writes the same bytes, so that the tests make the
files again rather than keep them. Run in the environment of the other references, from
the clone's root, with gguf besides:

    . venv-torch/bin/activate && pip install gguf
    PYTHONPATH=.:tests HF_HUB_OFFLINE=1 python tests/data/make_gguf_references.py

For each file F (its name's dots and dashes as _) and sentence k of SENTENCES, the npz holds

    F__ids_k         int32 (T,)             the ids transformers' GGUF tokenizer gives
    F__attentions_k  float32 (L, H, T, T)   every layer's attention (eager, float32)
    F__hidden_k      float32 (L + 1, T, D)  hidden_states, the last after the final norm
    F__logits_0      float32 (T, V)         the LM head's, of the first sentence

and for each tokenizer (tiny-llama's, tiny-qwen2's, tiny-gpt2's, from their F32 files), the ids and
offsets it gives each of TEXTS (hostile and multilingual): TOKENIZER__ids_k, __offsets_k;
and `sentences`, `texts`, `versions` (each package's, and each file's SHA-256).
"""

from __future__ import annotations

import hashlib
import os
import platform
import sys
import tempfile
import zipfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import gguf  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402

import tinygguf  # noqa: E402

ROOT = Path(__file__).resolve().parent
SENTENCES = ["The earth is like an orange", "I sat on the bank of the river, didn't I?"]
TEXTS = ["The earth is like an orange", "  two  spaces\tand a tab\nand a line", "café naïve Ünïcödé",
         "日本語のテキスト", "emoji 🍊 and 👩‍👩‍👧", "<s> a marker in the text </s>", "<|endoftext|> again",
         "\u202eright-to-left\u202c and \x1b[31mred\x1b[0m", "ÿþ\u0000nul", "ABC abc 123 4567 3.14"]
TOKENIZERS = {"tiny_llama": "tiny-llama-F32.gguf", "tiny_qwen2": "tiny-qwen2-F32.gguf", "tiny_gpt2": "tiny-gpt2-F32.gguf"}


def key(name: str) -> str:
    return name.replace(".", "_").replace("-", "_")


def run(folder: Path, name: str) -> dict[str, np.ndarray]:
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32,
                                                              attn_implementation="eager").eval()
    out = {}
    for k, text in enumerate(SENTENCES):
        ids = tokenizer(text)["input_ids"]
        with torch.inference_mode():
            result = model(torch.tensor([ids]), output_attentions=True, output_hidden_states=True)
        out[f"ids_{k}"] = np.array(ids, dtype=np.int32)
        out[f"attentions_{k}"] = torch.stack(result.attentions)[:, 0].numpy()
        out[f"hidden_{k}"] = torch.stack(result.hidden_states)[:, 0].numpy()
        if k == 0:  # one sentence's logits say what the LM head is; each is T x V
            out[f"logits_{k}"] = result.logits[0].numpy()
        rows = out[f"attentions_{k}"].sum(-1)
        assert np.allclose(rows, 1, atol=1e-5), name
    print(f"{name}: {type(tokenizer).__name__}, pieces {tokenizer.convert_ids_to_tokens(out['ids_0'])}, "
          f"largest weight a row {out['attentions_0'].max(-1).mean():.3f}")
    return out


def pieces(folder: Path, name: str) -> dict[str, np.ndarray]:
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder, gguf_file=name)
    out = {}
    for k, text in enumerate(TEXTS):
        encoded = tokenizer(text, return_offsets_mapping=True)
        out[f"ids_{k}"] = np.array(encoded["input_ids"], dtype=np.int32)
        out[f"offsets_{k}"] = np.array(encoded["offset_mapping"], dtype=np.int32).reshape(-1, 2)
    return out


def main() -> None:
    torch.manual_seed(0)
    torch.set_num_threads(1)
    arrays = {}
    with tempfile.TemporaryDirectory() as tmp:
        files = tinygguf.write_files(ROOT / "models", Path(tmp))
        for name, _, _ in tinygguf.FILES:
            path = files[name]
            for k, value in run(path.parent, name).items():
                arrays[f"{key(name)}__{k}"] = value
        for which, name in TOKENIZERS.items():
            for k, value in pieces(files[name].parent, name).items():
                arrays[f"{which}__{k}"] = value
        sums = [f"{name} sha256={hashlib.sha256(path.read_bytes()).hexdigest()}" for name, path in files.items()]
    arrays["sentences"] = np.array(SENTENCES, dtype=np.str_)
    arrays["texts"] = np.array(TEXTS, dtype=np.str_)
    arrays["versions"] = np.array([f"python={platform.python_version()}", f"torch={torch.__version__}",
                                   f"transformers={transformers.__version__}", f"numpy={np.__version__}",
                                   f"gguf={gguf.__version__ if hasattr(gguf, '__version__') else 'installed'}",
                                   *sums], dtype=np.str_)
    write_npz(ROOT / "gguf.npz", arrays)
    print(f"wrote {ROOT / 'gguf.npz'} ({(ROOT / 'gguf.npz').stat().st_size:,} bytes)")


def write_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """The arrays in a zip of .npy files with a fixed date, so that a second run writes the same bytes."""
    import io

    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, array in sorted(arrays.items()):
            buffer = io.BytesIO()
            np.lib.format.write_array(buffer, np.ascontiguousarray(array), allow_pickle=False)
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(2026, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, buffer.getvalue())


if __name__ == "__main__":
    sys.exit(main())
