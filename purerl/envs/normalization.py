"""Running statistics for observation and reward normalization, as pure functions of arrays.

The statistics live in the runner state, not inside a per-env wrapper, so that one estimate is
shared by all envs of a seed and combined across devices (one all-reduce per update).
Rewards are scaled the way Stable-Baselines3's VecNormalize does it: divided by the running
standard deviation of each env's discounted return, which restarts at every episode end.
"""

from __future__ import annotations

from typing import NamedTuple, Optional, Tuple

import jax
import jax.numpy as jnp

EPSILON = 1e-8  # added to the variance before dividing by its square root
INITIAL_COUNT = 1e-4  # the prior's weight: the first batch replaces mean 0 / variance 1


class RunningMeanStd(NamedTuple):
    """Mean and (population) variance of everything seen so far, per element of `shape`."""

    count: jax.Array  # float32 []
    mean: jax.Array  # float32 [*shape]
    var: jax.Array  # float32 [*shape]


class Normalizer(NamedTuple):
    """The normalization part of a runner state (one seed; `returns` for this device's envs)."""

    obs: RunningMeanStd  # of the observations, [*obs_shape]
    ret: RunningMeanStd  # of the envs' running discounted returns, []
    returns: jax.Array  # float32 [B], each env's discounted return of its running episode


def init_running_stats(shape: Tuple[int, ...]) -> RunningMeanStd:
    """The prior of the statistics: mean 0, variance 1, weight `INITIAL_COUNT`.

    Args:
        shape: the shape of one sample, e.g. `obs_shape`, `()` for a scalar.

    Returns:
        `RunningMeanStd`: `count` float32 `[]`, `mean` and `var` float32 `[*shape]`.
    """
    return RunningMeanStd(jnp.float32(INITIAL_COUNT), jnp.zeros(shape, jnp.float32),
                          jnp.ones(shape, jnp.float32))


def init_normalizer(obs_shape: Tuple[int, ...], num_envs: int) -> Normalizer:
    """A seed's `Normalizer` before its first rollout.

    Args:
        obs_shape: the shape of one observation.
        num_envs: the envs `B` of this device's share of the seed.

    Returns:
        `Normalizer`: `obs` stats `[*obs_shape]`, `ret` stats `[]`, `returns` zeros `[B]`.
    """
    return Normalizer(init_running_stats(obs_shape), init_running_stats(()),
                      jnp.zeros((num_envs,), jnp.float32))


def update_running_stats(stats: RunningMeanStd, batch: jax.Array,
                         axis_name: Optional[str] = None) -> RunningMeanStd:
    """`stats` updated with `batch` `[N, *shape]`, and with the batches of every device on
    `axis_name` (Chan et al.'s parallel combination of means and sums of squared deviations).

    Args:
        stats: the statistics so far, `mean` and `var` `[*shape]`.
        batch: the new samples `[N, *shape]`.
        axis_name: the device axis to combine every device's batch over; None on one device.

    Returns:
        The updated `RunningMeanStd`, `count` grown by N (by the sum of N over devices).
    """
    batch = batch.astype(jnp.float32)
    count = jnp.float32(batch.shape[0])
    mean = batch.mean(axis=0)
    sq_dev = jnp.square(batch - mean).sum(axis=0)
    if axis_name is not None:
        total, weighted_sum = jax.lax.psum((count, count * mean), axis_name)
        global_mean = weighted_sum / total
        sq_dev = jax.lax.psum(sq_dev + count * jnp.square(mean - global_mean), axis_name)
        count, mean = total, global_mean
    new_count = stats.count + count
    delta = mean - stats.mean
    new_mean = stats.mean + delta * count / new_count
    m2 = stats.var * stats.count + sq_dev + jnp.square(delta) * stats.count * count / new_count
    return RunningMeanStd(new_count, new_mean, m2 / new_count)


def normalize(stats: RunningMeanStd, x: jax.Array, clip: float) -> jax.Array:
    """`x` standardized by `stats` and clipped to [-clip, clip] (float32).

    Args:
        stats: the statistics, `mean` and `var` broadcasting against `x`.
        x: the values, e.g. observations `[..., *obs_shape]`.
        clip: the bound of the standardized values.

    Returns:
        float32, `x`'s shape.
    """
    z = (x.astype(jnp.float32) - stats.mean) / jnp.sqrt(stats.var + EPSILON)
    return jnp.clip(z, -clip, clip)


def network_input(config, obs_stats: RunningMeanStd, obs: jax.Array) -> jax.Array:
    """The observation as the network sees it: standardized when `config.normalize_obs`
    (`config` is the `EnvConfig`), else unchanged.

    Args:
        config: the `EnvConfig` (`normalize_obs`, `clip_obs`).
        obs_stats: the observation statistics, `[*obs_shape]`.
        obs: observations `[..., *obs_shape]`.

    Returns:
        `obs`'s shape; float32 when standardized.
    """
    return normalize(obs_stats, obs, config.clip_obs) if config.normalize_obs else obs


def discounted_returns(returns: jax.Array, rewards: jax.Array, dones: jax.Array,
                       gamma: jax.Array) -> Tuple[jax.Array, jax.Array]:
    """Each env's running discounted return after every step of a rollout.

    `per_step[t] = gamma * per_step[t-1] + rewards[t]`, restarting from 0 after a step with
    `dones` set.

    Args:
        returns: float32 `[B]`, each env's discounted return before the rollout.
        rewards: `[T, B]`.
        dones: bool `[T, B]`, where an episode ended.
        gamma: the discount, a float32 `[]` array.

    Returns:
        `(per_step, carried)`: float32 `[T, B]`, and `[B]` for the next rollout to start from.
    """

    def step(running, inputs):
        reward, done = inputs
        running = gamma * running + reward
        return jnp.where(done, 0.0, running), running

    carried, per_step = jax.lax.scan(step, returns, (rewards.astype(jnp.float32), dones))
    return per_step, carried


def scale_rewards(normalizer: Normalizer, rewards: jax.Array, dones: jax.Array,
                  gamma: jax.Array, clip: float,
                  axis_name: Optional[str] = None) -> Tuple[Normalizer, jax.Array]:
    """Rewards `[T, B]` divided by the running std of the discounted return (updated with this
    rollout's returns first), clipped to [-clip, clip].

    Args:
        normalizer: the seed's `Normalizer`, `returns` `[B]`.
        rewards: `[T, B]`.
        dones: bool `[T, B]`.
        gamma: the discount, float32 `[]`.
        clip: the bound of the scaled rewards.
        axis_name: the device axis whose envs share the statistics; None on one device.

    Returns:
        `(normalizer, scaled)`: `ret` and `returns` updated, and float32 `[T, B]`.
    """
    per_step, carried = discounted_returns(normalizer.returns, rewards, dones, gamma)
    ret = update_running_stats(normalizer.ret, per_step.reshape(-1), axis_name)
    scaled = jnp.clip(rewards / jnp.sqrt(ret.var + EPSILON), -clip, clip)
    return normalizer._replace(ret=ret, returns=carried), scaled
