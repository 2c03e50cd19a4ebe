"""The PPO loss as a pure function of arrays."""

from __future__ import annotations

from typing import NamedTuple, Optional, Tuple

import jax
import jax.numpy as jnp


class LossInfo(NamedTuple):
    policy_loss: jax.Array
    value_loss: jax.Array
    entropy: jax.Array
    approx_kl: jax.Array  # mean of (ratio - 1) - log ratio, always >= 0
    clip_frac: jax.Array  # share of samples with |ratio - 1| > clip_eps


def ppo_loss(
    log_prob: jax.Array,
    entropy: jax.Array,
    value: jax.Array,
    old_log_prob: jax.Array,
    old_value: jax.Array,
    advantages: jax.Array,
    returns: jax.Array,
    *,
    clip_eps: float | jax.Array,
    vf_coef: float | jax.Array,
    ent_coef: float | jax.Array,
    clip_value: bool,
) -> Tuple[jax.Array, LossInfo]:
    """Clipped-surrogate PPO loss over a minibatch; every array is `[N]`.

    `advantages` are used as given (normalize them first with `normalize_advantages`).
    The value loss is 0.5 * squared error, maximized with its clipped twin when `clip_value`.
    """
    log_ratio = log_prob - old_log_prob
    ratio = jnp.exp(log_ratio)
    surrogate = jnp.minimum(
        ratio * advantages, jnp.clip(ratio, 1.0 - clip_eps, 1.0 + clip_eps) * advantages
    )
    value_error = jnp.square(value - returns)
    if clip_value:
        clipped = old_value + jnp.clip(value - old_value, -clip_eps, clip_eps)
        value_error = jnp.maximum(value_error, jnp.square(clipped - returns))
    # All five means in one reduction (one kernel instead of five on CPU).
    policy_loss, value_loss, mean_entropy, approx_kl, clip_frac = jnp.stack([
        -surrogate,
        0.5 * value_error,
        entropy,
        jax.lax.stop_gradient((ratio - 1.0) - log_ratio),
        jax.lax.stop_gradient((jnp.abs(ratio - 1.0) > clip_eps).astype(ratio.dtype)),
    ]).mean(axis=-1)
    loss = policy_loss + vf_coef * value_loss - ent_coef * mean_entropy
    return loss, LossInfo(policy_loss, value_loss, mean_entropy, approx_kl, clip_frac)


def normalize_advantages(advantages: jax.Array, axis_name: Optional[str] = None) -> jax.Array:
    """(A - mean) / (std + 1e-8) over the last axis (a minibatch: `[..., N]`), with the
    statistics pooled across `axis_name` devices."""
    mean = advantages.mean(axis=-1, keepdims=True)
    mean_sq = jnp.square(advantages).mean(axis=-1, keepdims=True)
    if axis_name is not None:
        mean, mean_sq = jax.lax.pmean((mean, mean_sq), axis_name)
    std = jnp.sqrt(jnp.maximum(mean_sq - jnp.square(mean), 0.0))
    return (advantages - mean) / (std + 1e-8)
