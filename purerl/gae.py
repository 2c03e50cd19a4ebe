"""Generalized advantage estimation, truncation-aware, time-major."""

from __future__ import annotations

from typing import Tuple

import chex
import jax
import jax.numpy as jnp


def compute_gae(
    rewards: jax.Array,
    values: jax.Array,
    next_values: jax.Array,
    terminated: jax.Array,
    truncated: jax.Array,
    *,
    gamma: float | jax.Array,
    gae_lambda: float | jax.Array,
) -> Tuple[jax.Array, jax.Array]:
    """Advantages and returns of a rollout.

    Args:
      rewards: float `[T, B]`, the reward of step t.
      values: float `[T, B]`, V(obs_t).
      next_values: float `[T, B]`, V of the true next observation of step t (on an episode's last
        step, of its final observation, not of the reset one).
      terminated: bool or float `[T, B]`; a terminated step does not bootstrap.
      truncated: bool or float `[T, B]`; a truncated step bootstraps from next_values.
      gamma, gae_lambda: scalars (Python floats or traced arrays).

    Returns:
      (advantages, returns), float `[T, B]`, with returns = advantages + values. The advantage
      recursion stops at any episode end (terminated or truncated).
    """
    chex.assert_rank([rewards, values, next_values, terminated, truncated], 2)
    chex.assert_equal_shape([rewards, values, next_values, terminated, truncated])
    dtype = values.dtype
    not_terminated = 1.0 - terminated.astype(dtype)
    not_ended = (1.0 - jnp.maximum(terminated.astype(dtype), truncated.astype(dtype)))
    deltas = rewards.astype(dtype) + gamma * not_terminated * next_values - values
    decays = gamma * gae_lambda * not_ended

    def backward(carry, step):
        delta, decay = step
        advantage = delta + decay * carry
        return advantage, advantage

    _, advantages = jax.lax.scan(
        backward, jnp.zeros_like(values[0]), (deltas, decays), reverse=True
    )
    return advantages, advantages + values
