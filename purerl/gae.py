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

    def combine(later, earlier):
        # Each step is the affine map A -> delta + decay * A of the next step's advantage;
        # `earlier` after `later` is their composition.
        later_decay, later_delta = later
        earlier_decay, earlier_delta = earlier
        return earlier_decay * later_decay, earlier_delta + earlier_decay * later_delta

    # A parallel prefix over time (log T levels of whole-array ops) rather than a T-step loop,
    # whose per-step kernel calls dominate on CPU; the same sums up to float rounding.
    _, advantages = jax.lax.associative_scan(combine, (decays, deltas), reverse=True)
    return advantages, advantages + values
