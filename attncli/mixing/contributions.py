"""How much each token's representation is made of each other token's: the measures of
context mixing the literature holds beside raw attention, in pure numpy, over the parts of a
layer that a family's block() gives (models/layers.Block).

A layer's attention sublayer sums, for the receiving token i,

    Y_i = r_i + sum_j sum_h alpha^h_ij f^h(x_j) + b_O                         (1)

with f^h(x_j) = v^h_j W_O^h what head h passes on for token j (its value, bias included,
through the head's rows of the output projection), r_i the residual stream (x_i itself) and
b_O the output projection's bias. Writing z_ij = sum_h alpha^h_ij f^h(x_j) + [i = j] r_i,
Y_i = sum_j z_ij + b_O, and each measure below is a T x T matrix, row i receiving:

    raw           alpha_ij, the mean over heads or one head                  weights_matrix
    norm          ||sum_h alpha^h_ij f^h(x_j)||  (Kobayashi et al. 2020)     attention.summed_norms
    norm-res      ||z_ij||                        (Kobayashi et al. 2021)    residual_norms
    norm-res-ln   ||g1_i(z_ij)||                  (Kobayashi et al. 2021)    layernorm_norms
    globenc       ||g2_i(g1_i(z_ij))||            (Modarressi et al. 2022)   encoder_norms
    alti          max(0, ||y_i||_1 - ||y_i - T_i(x_j)||_1), normalised       alti
                                                  (Ferrando et al. 2022)
    value-zeroing the cosine distance of token i's layer output with v_j     value_zeroing
                  zeroed in every head, normalised (Mohebbi et al. 2023)

where g_i is a layer norm made linear by its normalising factor from the forward pass
(layers.Norm.part): LN(y_i) = g_i(y_i) + beta, so that LN1(Y_i) = sum_j g1_i(z_ij) +
g1_i(b_O) + beta_1 exactly (decompose), and T_i(x_j) = g1_i(z_ij). A pre-LN decoder (GPT-2,
the Llama family) norms the attention's input instead, inside f: there g1 and g2 are the
identity, and norm-res-ln and globenc are norm-res.

Across layers (rollout), R_1 = C_1 and R_l = C_l R_{l-1}, as each method's authors roll it
out: for the measures that leave the residual out (raw, norm) each layer's matrix with its
rows normalised, then mixed half and half with the identity, the residual's share (Abnar &
Zuidema 2020 for raw, attention.rollout; GlobEnc's N-FixedRes, Modarressi et al. 2022
eq. 16, for norm); ALTI's and value zeroing's matrices, whose rows sum to 1 already, as
they are; and the norms with the residual (norm-res, norm-res-ln, globenc) as they are, not
normalised, as GlobEnc rolls them out (eq. 12), each R_l's rows normalised only at the end,
which leaves each row's proportions GlobEnc's. (ALTI's "norm" baseline rolls norm-res-ln
out with each layer's rows normalised: rollout(C, identity=False).)

A share that cannot be computed is NaN, never 0, which would read "no token contributes":
a row with nothing to share out (a sum of 0, as ALTI's for an output that is the zero
vector; normalised) and a cosine distance to the zero vector (cosine_distance); a rollout
passes an undefined row on to every row that draws on it (rollout). undefined_rows says why
a layer's rows are undefined, and what takes these numbers in leaves NaN out knowingly
(mixing_ratio, spearman, bootstrap_mean).

The context-mixing ratio of token i (Kobayashi et al. 2021, eq. 18) is how much of its
representation comes from the other tokens: of the vectors each token j gives it, the norm
of those of the others summed, against that and the norm of its own (mixing_ratio_of_sums);
mixing_ratio is the plainer share of a matrix's row, the same for raw attention.

Whole-model measures run the model again, through the callables given: leave_one_out
(erasure) and head_ablation (Michel et al. 2019). Each effect is a cosine distance between a
representation and itself with the token or head taken away, or, for a decoder's sentence,
a fall in log-probability.

Dimensions: T tokens, D the hidden size, H heads, L layers, B a batch of inputs.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from attncli import attention
from attncli.system import limits

METHODS = ("raw", "rollout", "norm", "norm-res", "norm-res-ln", "globenc", "alti", "value-zeroing", "leave-one-out")
ROLLED_BY_DEFAULT = ("rollout", "globenc", "alti")  # as the papers define them: rolled out over the layers
WITHOUT_RESIDUAL = ("raw", "rollout", "norm")  # rolled out with the identity mixed in
AS_THEY_ARE = ("norm-res", "norm-res-ln", "globenc")  # rolled out without normalising each layer (GlobEnc)
ERASURES = ("remove", "mask")  # leave-one-out takes a token out of the input, or puts a mask (or unknown) piece in its place
PER_HEAD = ("raw", "rollout", "norm")  # defined for one head as well as for the layer
SHARES = ("alti", "value-zeroing")  # each layer's rows normalised by the measure itself
# why a row has no share to give (undefined_rows)
ZERO_OUTPUT = "zero output"  # token i's output is the zero vector (ALTI's y_i, value zeroing's x~_i)
NOTHING_NEARER = "nothing nearer"  # ALTI: no part is nearer y_i than ||y_i||_1, every score 0
ZEROED_TO_ZERO = "zeroed to zero"  # value zeroing: zeroing some v_j makes x~_i the zero vector
UNCHANGED = "unchanged"  # value zeroing: zeroing any v_j leaves x~_i's direction as it was
NOTHING_GIVEN = "nothing given"  # a row of zeros: every part i receives is the zero vector
BLOCK_ROWS = 1 << 22  # (rows, T, D) numbers made at a time by the (i, j) decompositions: 32 MB


def _row_blocks(T: int, D: int):
    """Slices of rows such that a (rows, T, D) array holds at most BLOCK_ROWS numbers."""
    step = max(1, BLOCK_ROWS // max(1, T * D))
    return (slice(start, min(start + step, T)) for start in range(0, T, step))


def weights_matrix(block, head: int | None = None) -> np.ndarray:
    """alpha (T, T): the mean over heads, or head `head`'s own (from 0)."""
    return block.weights.mean(axis=0) if head is None else block.weights[head]


def norms_matrix(block, head: int | None = None) -> np.ndarray:
    """||sum_h alpha^h_ij f^h(x_j)|| (T, T) (Kobayashi et al. 2020; Kobayashi et al. 2021,
    eqs. 10-11; GlobEnc's N, Modarressi et al. 2022, eq. 4), or head `head`'s own
    ||alpha^h_ij f^h(x_j)||."""
    if head is None:
        return attention.summed_norms(block.weights, block.passed)
    return attention.weighted_norms(block.weights[head:head + 1], block.passed[head:head + 1])[0]


def parts(block, rows: slice) -> np.ndarray:
    """z_ij = sum_h alpha^h_ij f^h(x_j) + [i = j] r_i for the receiving rows i of `rows`
    (b, T, D): the terms of (1) that sum, with b_O, to Y_i."""
    Z = np.einsum("hij,hjd->ijd", block.weights[:, rows], block.passed)  # (b, T, D)
    i = np.arange(rows.start, rows.stop)
    Z[i - rows.start, i] += block.residual[rows]  # (b, D) on the diagonal
    return Z  # (b, T, D)


def _through_norms(block, Z: np.ndarray, rows: slice, depth: int) -> np.ndarray:
    """The parts Z (b, T, D) of rows `rows` through the first `depth` norms after the
    residual (0, 1 or 2), each made linear by its factor from the forward pass."""
    for norm in block.norms[:depth]:
        Z = norm.part(Z, rows)
    return Z


def _part_norms(block, depth: int) -> np.ndarray:
    """||z_ij|| (T, T) through `depth` of the norms, a block of rows at a time."""
    T, D = block.residual.shape
    out = np.empty((T, T))
    for rows in _row_blocks(T, D):
        out[rows] = np.linalg.norm(_through_norms(block, parts(block, rows), rows, depth), axis=-1)  # (b, T)
    return out


def residual_norms(block) -> np.ndarray:
    """||z_ij|| (T, T): what j gives i through the attention and, for j = i, the residual
    (Kobayashi et al. 2021's ATTNRES-N, eqs. 7 and 10; GlobEnc's N_RES, eq. 5)."""
    return _part_norms(block, 0)


def layernorm_norms(block) -> np.ndarray:
    """||g1_i(z_ij)|| (T, T): the same through the first layer norm, made linear by its
    factor (Kobayashi et al. 2021's ATTNRESLN-N, eqs. 12-13 and 16; GlobEnc's N_RESLN,
    eqs. 6-7); a pre-LN model's is residual_norms, its norm being before the attention."""
    return _part_norms(block, 1)


def encoder_norms(block) -> np.ndarray:
    """||g2_i(g1_i(z_ij))|| (T, T): through both layer norms, the feed-forward network
    between them left out but its sum's normalising factor kept (GlobEnc's N_ENC,
    Modarressi et al. 2022, eq. 11; rolled out by eq. 12)."""
    return _part_norms(block, 2)


def decompose(block) -> tuple[np.ndarray, np.ndarray]:
    """The first norm's output LN1(Y) (T, D) rebuilt from its parts, sum_j g1_i(z_ij) +
    g1_i(b_O) + beta_1, and as the forward pass computed it: the two agree to rounding,
    the decomposition being exact. (A pre-LN model: Y rebuilt as sum_j z_ij + b_O.)"""
    T, D = block.residual.shape
    rebuilt = np.empty((T, D))
    for rows in _row_blocks(T, D):
        Z = _through_norms(block, parts(block, rows), rows, 1)  # (b, T, D)
        rebuilt[rows] = Z.sum(axis=1) + _through_norms(block, np.broadcast_to(block.bias, (rows.stop - rows.start, D)),
                                                         rows, 1)
    if block.norms:
        first = block.norms[0]
        Y = block.total
        actual = first.gamma * (Y - Y.mean(axis=-1, keepdims=True)) * first.factor + first.beta  # (T, D)
        return rebuilt + first.beta, actual
    return rebuilt, block.total


def alti(block) -> np.ndarray:
    """ALTI's contributions (T, T) (Ferrando et al. 2022, section 3; as their code's
    get_contributions computes them, but for its two epsilons, which the formula has not:
    1e-6 added to each coordinate of a distance, and the norm's epsilon to the vector
    rather than to its variance): the transformed vectors
    T_i(x_j) = g1_i(z_ij), each as close to the sublayer's output y_i (LN1(Y_i), or Y_i in
    a pre-LN model) as its Manhattan distance says, d_ij = ||y_i - T_i(x_j)||_1, and

        c_ij = max(0, ||y_i||_1 - d_ij) / sum_k max(0, ||y_i||_1 - d_ik).

    Row i is undefined (NaN) where every max is 0, so that the quotient is 0 / 0: no part is
    nearer y_i than its size, as when y_i is the zero vector (a layer norm of weight and
    bias 0, a pruned or damaged checkpoint's)."""
    T, D = block.residual.shape
    _, y = decompose(block)  # (T, D)
    out = np.empty((T, T))
    for rows in _row_blocks(T, D):
        Tx = _through_norms(block, parts(block, rows), rows, 1)  # (b, T, D)
        d = np.abs(y[rows, None, :] - Tx).sum(axis=-1)  # (b, T)
        out[rows] = np.maximum(0.0, np.abs(y[rows]).sum(axis=-1, keepdims=True) - d)  # (b, T)
    return normalised(out)


def value_zeroing(block, *, batch: int = 1 << 20) -> np.ndarray:
    """Value zeroing (Mohebbi et al. 2023, section 3; their scoring/value_zeroing.py): for
    each token j, the layer run again with v_j
    zeroed in every head, so that Y_i loses sum_h alpha^h_ij f^h(x_j) (f being linear in
    v_j) and the rest of the layer, feed-forward network and norms, gives x~_i^{-j}; the
    score is the cosine distance 1 - cos(x~_i^{-j}, x~_i) (zeroing_distances), rows
    normalised to sum to 1. Row i is undefined (NaN) where x~_i, or some x~_i^{-j}, is the
    zero vector (a cosine with it is undefined: a lone token's output with its own value
    zeroed, say), or where zeroing any v_j leaves x~_i's direction as it was (every
    distance 0: nothing to share out). A batch of j at a time, so that at most `batch`
    numbers of (j, T, D) are made."""
    return normalised(zeroing_distances(block, batch=batch))


def zeroing_distances(block, *, batch: int = 1 << 20) -> np.ndarray:
    """Value zeroing's distances before its rows are normalised (T, T): row i, column j,
    1 - cos(x~_i^{-j}, x~_i), NaN where either is the zero vector."""
    T, D = block.residual.shape
    original = block.rest(block.total)  # (T, D)
    out = np.empty((T, T))
    step = max(1, batch // (T * D))
    for start in range(0, T, step):
        js = slice(start, min(start + step, T))
        lost = np.einsum("hij,hjd->jid", block.weights[:, :, js], block.passed[:, js])  # (b, T, D)
        changed = block.rest(block.total[None] - lost)  # (b, T, D): row b is j = start + b zeroed
        out[:, js] = cosine_distance(changed, original[None]).T  # (T, b)
    return out


def cosine_distance(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """1 - cos(a, b) over the last axis (...,); NaN where either vector is 0: the zero
    vector has no direction, so its cosine is undefined, where 0 would read "unchanged". In
    float64 whatever the vectors' precision: float32's 1 - cos of two vectors a distance of
    1e-6 apart would be 6% off (its spacing below 1 is 6e-8)."""
    A, B = np.asarray(A, dtype=np.float64), np.asarray(B, dtype=np.float64)
    na, nb = np.linalg.norm(A, axis=-1), np.linalg.norm(B, axis=-1)
    dot = (A * B).sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        cos = np.where((na > 0) & (nb > 0), dot / (na * nb), np.nan)
    return np.clip(1.0 - cos, 0.0, 2.0)  # (...,): rounding may put |cos| a hair past 1; NaN stays NaN


def normalised(C: np.ndarray) -> np.ndarray:
    """Each row divided by its sum (..., T), its shares. A row with nothing to share out is
    undefined, NaN through: one whose sum is 0 (every contribution 0) or unknown (it holds
    a NaN)."""
    s = C.sum(axis=-1, keepdims=True)
    return np.divide(C, s, out=np.full_like(C, np.nan), where=s > 0)  # NaN > 0 is False


def rollout(C: np.ndarray, *, identity: bool, per_layer: bool = True) -> np.ndarray:
    """Each layer's contributions rolled out over the layers before it: R_1 = C'_1, R_l =
    C'_l R_{l-1}. With `per_layer`, C'_l is C_l with its rows normalised, then, when
    `identity`, mixed half and half with the identity, the residual the measure leaves out
    (Abnar & Zuidema 2020; GlobEnc's eq. 16 for norms); without, C'_l is C_l as it is
    (GlobEnc's eq. 12), each R_l scaled by a number as it is made, to stay within float64's
    range, and its rows normalised at the end: each row is GlobEnc's up to a factor.
    C (L, T, T) -> R (L, T, T), rows summing to 1.

    An undefined row propagates: a row of C'_l that is (normalised's NaN: nothing to share
    out at that layer) makes row i of R_l undefined, and so does a row k of R_{l-1} that is,
    for every row i that draws on it (C'_l,ik != 0), what reaches i through k being
    unknown; the other rows are the product's, exactly (through). Without `per_layer`, a
    row of R_l that is all 0 (nothing reaches i) is undefined at the end."""
    L, T, _ = C.shape
    R = np.empty((L, T, T))
    for l in range(L):
        if per_layer:
            P = normalised(0.5 * normalised(C[l]) + 0.5 * np.eye(T)) if identity else normalised(C[l])  # (T, T)
        else:
            P = C[l]  # (T, T)
        R[l] = P if l == 0 else through(P, R[l - 1])  # (T, T)
        if not per_layer:
            seen = np.abs(R[l][np.isfinite(R[l])])
            top = seen.max() if seen.size else 0.0
            R[l] /= top if top > 0 else 1.0  # a number for the whole matrix: the proportions stay
    return R if per_layer else normalised(R)  # (L, T, T)


def through(P: np.ndarray, R: np.ndarray) -> np.ndarray:
    """P R (T, T), an undefined row (NaN) of either passed on: row i of the product is
    undefined where P's row i holds a NaN, or where P_ik != 0 for a row k of R that holds
    one; every other row is P R's, the undefined rows of R weighing 0 in it."""
    lost = np.isnan(R).any(axis=-1)  # (T,)
    unknown = np.isnan(P)  # (T, T)
    if not lost.any() and not unknown.any():
        return P @ R  # (T, T)
    known = np.where(unknown, 0.0, P)  # (T, T)
    out = known @ np.where(lost[:, None], 0.0, R)  # (T, T)
    out[unknown.any(axis=-1) | ((known != 0) & lost).any(axis=-1)] = np.nan
    return out


def mixing_ratio(C: np.ndarray) -> np.ndarray:
    """The share of each row i of a matrix of contributions that comes from the other
    tokens, sum_{j != i} c_ij / sum_j c_ij (..., T); NaN for a row of zeros, or an
    undefined one (a NaN in it). For raw
    attention it is Kobayashi et al. (2021)'s ATTN-W ratio, 1 - alpha_ii, and for
    0.5 alpha + 0.5 I their ATTNRES-W; for the norms theirs is mixing_ratio_of_sums."""
    total = C.sum(axis=-1)  # (..., T)
    own = np.diagonal(C, axis1=-2, axis2=-1)  # (..., T)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, (total - own) / np.where(total > 0, total, 1.0), np.nan)


def mixing_ratio_of_sums(block, *, residual: bool = True, depth: int = 0) -> np.ndarray:
    """The context-mixing ratio as Kobayashi et al. (2021, eq. 18) define it, from vectors
    rather than from a matrix of their sizes: for token i, with F_i(x_j) its parts (the
    attention's alone, sum_h alpha^h_ij f^h(x_j), or with the residual, z_ij; through
    `depth` of the norms after it),

        r_i = ||sum_{j != i} F_i(x_j)|| / (||sum_{j != i} F_i(x_j)|| + ||F_i(x_i)||)    (T,)

    the size of what the context brings i against the size of what i keeps of itself; NaN
    for a token given nothing at all (both 0), as mixing_ratio's row of zeros, numpy
    saying nothing of it."""
    T, D = block.residual.shape
    out = np.empty(T)
    for rows in _row_blocks(T, D):
        Z = parts(block, rows)  # (b, T, D)
        i = np.arange(rows.start, rows.stop)
        if not residual:
            Z[i - rows.start, i] -= block.residual[rows]
        Z = _through_norms(block, Z, rows, depth)  # (b, T, D)
        own = Z[i - rows.start, i]  # (b, D)
        context = np.linalg.norm(Z.sum(axis=1) - own, axis=-1)  # (b,)
        with np.errstate(invalid="ignore", divide="ignore"):
            out[rows] = context / (context + np.linalg.norm(own, axis=-1))
    return out


def layer_matrix(method: str, block, head: int | None = None) -> np.ndarray:
    """The method's (T, T) matrix of one layer (for rollout, the raw weights it rolls out)."""
    if head is not None and method not in PER_HEAD:
        raise ValueError(f"{method} is a layer's measure, not one head's")
    if method in ("raw", "rollout"):
        return weights_matrix(block, head)
    if method == "norm":
        return norms_matrix(block, head)
    return {"norm-res": residual_norms, "norm-res-ln": layernorm_norms, "globenc": encoder_norms, "alti": alti,
            "value-zeroing": value_zeroing}[method](block)


def layer_matrices(method: str, blocks: list, head: int | None = None, rolled: bool | None = None) -> np.ndarray:
    """The method's matrix at every layer (L, T, T), rolled out when `rolled` (None: as the
    method's paper does, ROLLED_BY_DEFAULT). "rollout" is raw attention rolled out."""
    C = np.stack([layer_matrix(method, b, head) for b in blocks])  # (L, T, T)
    if method in ROLLED_BY_DEFAULT if rolled is None else rolled:
        return roll_out(method, C)
    return C


def undefined_rows(method: str, block, M: np.ndarray) -> dict[str, np.ndarray]:
    """Why rows of M (T, T), the method's matrix of `block`'s layer (layer_matrix's), have
    no share to give once normalised (a sum of 0, or a NaN): each reason that holds, with
    its rows (T,) bool. ALTI's and value zeroing's rows where the output is the zero vector
    (ZERO_OUTPUT); ALTI's others (NOTHING_NEARER); value zeroing's where zeroing a value
    makes the output the zero vector (ZEROED_TO_ZERO) or leaves it as it was (UNCHANGED);
    any other method's, a row of zeros (NOTHING_GIVEN). Run only where M has such rows:
    value zeroing's distances are computed again."""
    undefined = ~(M.sum(axis=-1) > 0)  # (T,)
    if not undefined.any():
        return {}
    if method == "alti":
        zero = undefined & ~decompose(block)[1].any(axis=-1)  # (T,)
        reasons = {ZERO_OUTPUT: zero, NOTHING_NEARER: undefined & ~zero}
    elif method == "value-zeroing":
        zero = undefined & ~block.rest(block.total).any(axis=-1)  # (T,)
        lost = undefined & ~zero & np.isnan(zeroing_distances(block)).any(axis=-1)  # (T,)
        reasons = {ZERO_OUTPUT: zero, ZEROED_TO_ZERO: lost, UNCHANGED: undefined & ~zero & ~lost}
    else:
        reasons = {NOTHING_GIVEN: undefined}
    return {reason: rows for reason, rows in reasons.items() if rows.any()}


def roll_out(method: str, C: np.ndarray) -> np.ndarray:
    """The method's layer matrices C (L, T, T) rolled out as its authors roll them out:
    with the identity mixed in for those that leave the residual out, each layer's rows
    normalised but for the norms with the residual (GlobEnc's)."""
    return rollout(C, identity=method in WITHOUT_RESIDUAL, per_layer=method not in AS_THEY_ARE)


# What each position gave one logit (Ferrando et al. 2023, "Explaining How Transformers Use
# Context to Build Predictions"; as their code, mt-upc/logit-explanations, computes it:
# get_logit_contributions' "aff_x_j" tracked to the input by track2input_tokens). A decoder's
# logit of the word w after row t, read off the last hidden state x^L_t by the final norm
# held at its factor (a family's readout: logit_w = u . x^L_t + c), splits over the residual
# stream, every layer adding its attention's and its feed-forward's outputs to x^0_t:
#
#     logit_w = u . x^0_t + sum_l sum_j dlogit^l_{w<-j} + sum_l u . b^l_O
#               + sum_l u . m^l_t + c                                                 (L1)
#     dlogit^l_{w<-j} = u . sum_h alpha^h_tj f^h(x^{l-1}_j)                           (L2)
#
# (m^l_t the feed-forward's output at t, f^h as in (1), its value's bias and the norm's
# inside it). ALTI-Logit carries each layer's update back to the input positions s through
# ALTI rolled out over the layers below it (M^{l-1}, rollout of alti; M^0 the identity):
#
#     alti-logit_{w<-s} = sum_l sum_j dlogit^l_{w<-j} M^{l-1}_js                        (L3)
#
# Each row of M sums to 1, so the positions' shares and the terms (L1) leaves outside the
# attention (the row's own embedding, the output biases, the feed-forward's outputs, the
# norm's bias) add up to the logit, exactly but for rounding. A contrastive explanation
# (their section on contrastive examples) reads u and c of the difference of two words'
# logits instead: why w and not another.


def logit_updates(block, u: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """dlogit^l_{k<-j} (N, T) of (L2): what the layer's attention passes from each position j
    to row rows[k]'s logit read by u[k] (N, D)."""
    read = block.passed @ u.T  # (H, T, N): f^h(x_j) . u_k
    return np.einsum("hkj,hjk->kj", block.weights[:, rows, :], read)  # (N, T)


def alti_logit(blocks: list, u: np.ndarray, c: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, dict]:
    """ALTI-Logit (L3) of the logits read by u (N, D) and c (N,) at rows `rows` (N,), every
    layer's block given: the positions' shares (N, T), a row undefined (NaN) where it draws
    on an undefined row of ALTI (through); and the terms of (L1) beside them, each (N,):
    "embedding" (u . x^0_t), "attention_bias", "feed_forward", "norm_bias", and the
    attention's update of each layer, summed over j, "layers" (N, L)."""
    updates = [logit_updates(b, u, rows) for b in blocks]  # L x (N, T)
    shares = updates[0]  # M^0, the identity
    if len(blocks) > 1:
        M = layer_matrices("alti", blocks[:-1])  # (L - 1, T, T): M^1 .. M^{L-1}
        for l in range(1, len(blocks)):
            shares = shares + through(updates[l], M[l - 1])
    terms = {
        "embedding": (blocks[0].residual[rows] * u).sum(axis=-1),
        "attention_bias": sum(u @ b.bias for b in blocks),
        "feed_forward": sum(((b.output[rows] - b.total[rows]) * u).sum(axis=-1) for b in blocks),
        "norm_bias": c,
        "layers": np.stack([d.sum(axis=-1) for d in updates], axis=-1),  # (N, L)
    }
    return shares, terms


# Whole-model measures: the model run again without a token or a head.


def pooled(X: np.ndarray) -> np.ndarray:
    """The sentence's representation: the mean of its tokens' last hidden states (..., T, D)
    -> (..., D), as sentence-transformers pools MiniLM."""
    return X.mean(axis=-2)


def erased(ids: np.ndarray, *, replace: int | None = None) -> np.ndarray:
    """The T inputs with token j taken away, row j: removed ((T, T - 1)), or replaced by
    the piece `replace` ((T, T))."""
    T = len(ids)
    if replace is None:
        keep = ~np.eye(T, dtype=bool)  # (T, T): row j keeps every piece but j
        return np.broadcast_to(ids, (T, T))[keep].reshape(T, T - 1)  # (T, T - 1)
    out = np.array(np.broadcast_to(ids, (T, T)))
    out[np.arange(T), np.arange(T)] = replace
    return out  # (T, T)


def leave_one_out(ids: np.ndarray, final: np.ndarray, run: Callable[[np.ndarray], np.ndarray], *,
                  replace: int | None = None, sentence: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None,
                  batch_bytes: Callable[[int, int], int] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Leave-one-out (erasure): for each token j, the model run again over the input without
    it (or with it replaced by the piece `replace`), and the effect on each other token's
    last hidden state, the cosine distance (T, T) (row i, column j; the diagonal 0 where j is
    removed, no representation of j being left; NaN where a state, with or without j, is
    the zero vector), and on the sentence's (T,): by default the cosine distance of the
    mean-pooled representations (NaN likewise); sentence(ids', final') gives a decoder's
    instead. `final` (T, D) is the whole input's last hidden states and
    run(ids (B, T')) -> (B, T', D) the model; batch_bytes(B, T') the memory of a run, so
    that the T inputs are run in batches memory can hold."""
    T = len(ids)
    inputs = erased(ids, replace=replace)  # (T, T') with T' = T - 1 or T
    outs = np.empty((T,) + (inputs.shape[1], final.shape[1]))  # (T, T', D)
    for rows in _batches(T, inputs.shape[1], batch_bytes):
        outs[rows] = run(inputs[rows])
    effect = np.zeros((T, T))
    for j in range(T):
        if replace is None:
            others = np.delete(np.arange(T), j)  # the tokens left, at places 0 .. T - 2
            effect[others, j] = cosine_distance(outs[j], final[others])
        else:
            effect[:, j] = cosine_distance(outs[j], final)
    if sentence is None:
        on_sentence = cosine_distance(pooled(outs), pooled(final)[None])  # (T,)
    else:
        on_sentence = sentence(inputs, outs)  # (T,)
    return effect, on_sentence


def _batches(n: int, T: int, batch_bytes: Callable[[int, int], int] | None, most: int = 1 << 28):
    """Slices of n inputs of T pieces, each as large a batch as `most` bytes of work hold
    (at least one input, refused where that one cannot fit in memory at all)."""
    if batch_bytes is None:
        yield slice(0, n)
        return
    one = batch_bytes(1, T)
    limits.require(one, f"a forward pass over {T:,} word pieces", "give a shorter sentence")
    step = max(1, min(n, most // max(1, one)))
    for start in range(0, n, step):
        yield slice(start, min(start + step, n))


def head_ablation(blocks: list, run_from: Callable[[np.ndarray, int], np.ndarray],
                  effect: Callable[[np.ndarray], np.ndarray], *, layers=None, heads=None,
                  batch_bytes: Callable[[int, int], int] | None = None) -> np.ndarray:
    """Michel et al. (2019)'s ablation: every head's output zeroed in turn (its context
    vectors, so that Y loses sum_j alpha^h_ij f^h(x_j)) and the model run on from there
    (run_from(X (B, T, D), l + 1), the layers before it unchanged and kept); effect(final
    (B, T, D)) -> (B,) how far each run's result moved. -> (L, H), or (len(layers),
    len(heads)) for the `layers` and `heads` given (from 0); batch_bytes(B, T) the memory
    of a run, so that a layer's heads are run in batches memory can hold."""
    layers = range(len(blocks)) if layers is None else layers
    heads = np.arange(blocks[0].weights.shape[0]) if heads is None else np.asarray(heads)
    T = blocks[0].residual.shape[0]
    out = np.empty((len(layers), len(heads)))
    for row, l in enumerate(layers):
        b = blocks[l]
        for part in _batches(len(heads), T, batch_bytes):
            lost = b.weights[heads[part]] @ b.passed[heads[part]]  # (B, T, D): each head's whole share of Y
            X = b.rest(b.total[None] - lost)  # (B, T, D): the layer's output without it
            # the last layer's rest() is its state as shown (a decoder's after its final norm)
            out[row, part] = effect(X if l == len(blocks) - 1 else run_from(X, l + 1))
    return out


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman's rank correlation of two vectors: Pearson's over their ranks, ties given
    the mean of the ranks they span; NaN where either is constant, or holds an undefined
    value (a NaN, which has no rank: the correlation of what is known would be another
    one's)."""
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        return float("nan")
    ra, rb = _ranks(a), _ranks(b)
    ra, rb = ra - ra.mean(), rb - rb.mean()
    den = np.sqrt((ra * ra).sum() * (rb * rb).sum())
    return float((ra * rb).sum() / den) if den > 0 else float("nan")


def _ranks(x: np.ndarray) -> np.ndarray:
    """Ranks from 1, ties averaged (the 'average' method)."""
    x = np.asarray(x, dtype=np.float64)
    order = np.argsort(x, kind="stable")
    ranks = np.empty(len(x))
    ranks[order] = np.arange(1, len(x) + 1)
    values, inverse = np.unique(x, return_inverse=True)
    sums = np.bincount(inverse, weights=ranks)
    counts = np.bincount(inverse)
    return (sums / counts)[inverse]


def bootstrap_mean(values: np.ndarray, *, resamples: int = 1000, seed: int = 0,
                   level: float = 0.95) -> tuple[float, float, float]:
    """The mean of `values` and its percentile bootstrap interval (Efron 1979): the means of
    `resamples` samples drawn with replacement, their (1 - level) / 2 and (1 + level) / 2
    quantiles. NaNs are left out. The samples are drawn BLOCK_ROWS numbers at a time (the
    same numbers as all at once: a generator's draws run on across calls), so that a long
    `values` does not take resamples x n indices of memory."""
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    if not len(v):
        return float("nan"), float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    means = np.empty(resamples)  # (resamples,)
    step = max(1, BLOCK_ROWS // len(v))
    for start in range(0, resamples, step):
        rows = min(step, resamples - start)
        means[start:start + rows] = v[rng.integers(0, len(v), size=(rows, len(v)))].mean(axis=1)
    low, high = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return float(v.mean()), float(low), float(high)
