"""Rotary position embeddings and grouped-query attention: what the Llama family's attention
does to its queries, keys and values before Step I (attention.py). Each takes and gives the
ordinary (T, H * d_head) arrays, so that the heads are split and merged in attention.py
alone.
"""

from __future__ import annotations

import numpy as np

from attncli import attention
from attncli.errors import OptionError, positive, whole


def rope_frequencies(d: int, theta: float) -> np.ndarray:
    """The inverse frequencies of Su et al., "RoFormer" (2021), theta_i = base^(-2i / d) for
    i = 0 .. d/2 - 1 (base: config.json's rope_theta): pair i of a head's d features turns
    by the angle m theta_i at position m, the first pairs fastest. (d/2,)"""
    d = whole("d", d, 2)
    if d % 2:
        raise OptionError(f"rotary embeddings turn pairs of features, so d must be even, got {d}")
    return 1.0 / positive("theta", theta) ** (np.arange(0, d, 2) / d)  # (d/2,)


def llama3_frequencies(inv_freq: np.ndarray, factor: float, low_freq_factor: float, high_freq_factor: float,
                       original_max_positions: int) -> np.ndarray:
    """Llama 3.1's rescaled frequencies, banded by wavelength, exactly as transformers'
    modeling_rope_utils._compute_llama3_parameters computes them (its old_context_len is
    original_max_positions):

        low_freq_wavelen = old_context_len / low_freq_factor
        high_freq_wavelen = old_context_len / high_freq_factor
        wavelen = 2 * math.pi / inv_freq
        # wavelen < high_freq_wavelen: do nothing
        # wavelen > low_freq_wavelen: divide by factor
        inv_freq_llama = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
        # otherwise: interpolate between the two, using a smooth factor
        smooth_factor = (old_context_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
        smoothed_inv_freq = (1 - smooth_factor) * inv_freq_llama / factor + smooth_factor * inv_freq_llama
        is_medium_freq = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
        inv_freq_llama = torch.where(is_medium_freq, smoothed_inv_freq, inv_freq_llama)

    The fast pairs, which turn many times within the trained context, keep their frequency;
    the slow ones, which never turned a whole turn in it, are slowed `factor` times, so
    that a longer context turns them no further than training did; the band between moves
    smoothly from one to the other. (d/2,) -> (d/2,)"""
    factor, low, high = positive("factor", factor), positive("low_freq_factor", low_freq_factor), \
        positive("high_freq_factor", high_freq_factor)
    if high <= low:
        raise OptionError(f"high_freq_factor must be above low_freq_factor, got {high:g} and {low:g}")
    old = whole("original_max_positions", original_max_positions, 1)
    low_wavelen, high_wavelen = old / low, old / high
    wavelen = 2 * np.pi / inv_freq  # (d/2,)
    slowed = np.where(wavelen > low_wavelen, inv_freq / factor, inv_freq)  # (d/2,)
    smooth = (old / wavelen - low) / (high - low)  # (d/2,): 0 at the slow edge of the band, 1 at its fast edge
    smoothed = (1 - smooth) * slowed / factor + smooth * slowed  # (d/2,)
    medium = ~(wavelen < high_wavelen) & ~(wavelen > low_wavelen)  # (d/2,)
    return np.where(medium, smoothed, slowed)  # (d/2,)


def rope_angles(positions: np.ndarray, inv_freq: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin of every position's angles m theta_i, each pair's angle written twice, at
    feature i and at feature i + d/2, as rotate pairs them. (T,), (d/2,) -> (T, d) twice"""
    angles = np.asarray(positions, dtype=np.float64)[:, None] * inv_freq[None, :]  # (T, d/2)
    angles = np.concatenate([angles, angles], axis=-1)  # (T, d)
    return attention.floating(np.cos(angles)), attention.floating(np.sin(angles))  # float64, then the working one


def rotate_half(X: np.ndarray) -> np.ndarray:
    """(x_1, x_2) -> (-x_2, x_1) for the two halves of each row: feature i is paired with
    feature i + d/2 (transformers' rotate_half; not RoFormer's neighbouring pairs 2i, 2i + 1,
    which the checkpoints' q_proj and k_proj rows were permuted from)."""
    half = X.shape[-1] // 2
    return np.concatenate([-X[..., half:], X[..., :half]], axis=-1)  # (..., d)


def rotate(M: np.ndarray, heads: int, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """Rotary position embeddings on queries or keys M (..., T, heads * d): each head's
    pair (i, i + d/2) of features at position m turned by the angle m theta_i,
    x cos + rotate_half(x) sin, with cos and sin (T, d) from rope_angles. A rotation keeps
    every head's norm, and q_m . k_n after it depends on m - n alone: the scores see where
    two tokens are from each other, not where they are. -> (..., T, heads * d)"""
    Mh = attention.split_heads(attention.floating(M), heads)  # (..., H, T, d)
    return attention.merge_heads(Mh * cos + rotate_half(Mh) * sin)  # (..., T, H * d)


def share_heads(M: np.ndarray, kv_heads: int, heads: int) -> np.ndarray:
    """Grouped-query attention (Ainslie et al., "GQA", 2023): keys or values M
    (..., T, kv_heads * d) of kv_heads heads, each serving heads / kv_heads query heads
    in turn, written out for every query head: query head h uses key/value head
    h // (heads / kv_heads), as transformers' repeat_kv lays them out. So multi_head runs
    heads heads over them as over any other. -> (..., T, heads * d)"""
    kv_heads, heads = whole("kv_heads", kv_heads, 1), whole("heads", heads, 1)
    if heads % kv_heads:
        raise OptionError(f"kv_heads must divide heads = {heads:,}, got {kv_heads}")
    Mh = attention.split_heads(M, kv_heads)  # (..., KV, T, d)
    return attention.merge_heads(np.repeat(Mh, heads // kv_heads, axis=-3))  # (..., H, T, d) -> (..., T, H * d)
