"""The rollout: the agent acting in its envs for `T` steps, as one scan.

`rollout(agent, params, env_state, obs, obs_stats, env_params, noise) -> Rollout`: a pure
function of the agent, its params, the envs' state `[B]` and the randomness of the rollout;
what it returns is a time-major `Transition` with plain named fields.
"""

from __future__ import annotations

import functools
import math
from typing import Any, Dict, NamedTuple, Optional

import jax
import jax.numpy as jnp

from purerl.core.packing import batch_packer
from purerl.nets.agent import Agent, Memory

# The values of a rollout's observations are computed after its scan, this many at a time at most.
MAX_VALUE_PASS_SAMPLES = 1 << 15


class Transition(NamedTuple):
    """One rollout, time-major: every field is `[T, B, ...]` (a multi-agent env's `[T, B * A,
    ...]`, one lane per agent: `purerl.nets.multi_agent`)."""

    obs: jax.Array  # `[T, B, *obs_shape]`, as the env returned it (before normalization)
    next_obs: jax.Array  # the true next observation: pre-reset on an episode's last step
    action: jax.Array
    log_prob: jax.Array
    value: jax.Array  # V(obs)
    next_value: jax.Array  # V(next_obs), which a truncated step bootstraps from; 0 if terminated
    reward: jax.Array  # float32
    terminated: jax.Array  # bool: the episode ended in a terminal state (no bootstrap)
    truncated: jax.Array  # bool: the episode was cut by a time limit (bootstrap)


class EpisodeSums(NamedTuple):
    """Sums over the episodes that ended in a rollout: `[B]` per env, or over envs `[]`."""

    episode_return: jax.Array  # float32; a multi-agent env's team return, over its agents
    episode_length: jax.Array  # int32
    count: jax.Array  # int32
    # float32, by `Agent.outcome_names` (a multi-agent env's `return/<agent>`, `won`); {} else
    outcomes: Dict[str, jax.Array]


class RolloutNoise(NamedTuple):
    """All the randomness of a rollout of `T` steps of `B` envs, drawn before it."""

    action_noise: jax.Array  # `[T, B, ...]`, of the policy's `noise_shape((T, B))`
    env_key: jax.Array  # one key, split into the envs' step keys `[T, B]`
    # keys `[T, B]` of the envs' auto-resets, drawn ahead of the scan; None: each step draws
    # its own (see `draws_resets_ahead`)
    reset_keys: Optional[jax.Array]
    # With a reset pool (`env.reset_pool = N`): keys `[T, N]` of the N fresh resets each step
    # makes, and `[T, B]` int32 which of them each env starts from if its episode ends
    pool_keys: Optional[jax.Array] = None
    pool_choice: Optional[jax.Array] = None


class Rollout(NamedTuple):
    env_state: Any  # `[B]` after the last step
    obs: jax.Array  # `[B, *obs_shape]` after the last step
    transition: Transition
    episodes: EpisodeSums  # `[B]`, the episodes completed during the rollout
    memory: Optional[Memory]  # a recurrent policy's, after the last step; else None


def draws_resets_ahead(agent: Agent, num_steps: int, num_envs: int) -> bool:
    """Whether a rollout of `num_steps` x `num_envs` takes its auto-resets drawn before the
    scan (T x B env states held at once): for envs that can take them, up to the plan's
    `resets_ahead` (on CPU, where each random op inside the loop is a small loop of its own
    per step).

    Args:
        agent: the agent whose envs step (`agent.draw_resets`, `agent.plan`).
        num_steps: the rollout's steps T.
        num_envs: its envs B.

    Returns:
        Whether `RolloutNoise.reset_keys` `[T, B]` are drawn.
    """
    return (agent.draw_resets is not None
            and num_steps * num_envs <= agent.plan.resets_ahead)


def rollout(agent: Agent, params, env_state, obs: jax.Array, obs_stats, env_params,
            noise: RolloutNoise, memory: Optional[Memory] = None) -> Rollout:
    """`T` steps (T = the leading axis of `noise.action_noise`) of the `B` envs `env_state`,
    whose current observations are `obs [B, *obs_shape]`, acting by `agent`'s policy with
    `params`; `obs_stats` are the observation statistics the network input is standardized by;
    `memory`: a recurrent policy's (None for a feed-forward one).
    With separate feed-forward towers, the value of every observation comes from one pass of
    the value tower after the scan (else, or with the plan's `value_in_step`, from the step).
    The value of each step's true next observation is the following step's where the episode
    goes on, 0 at a terminal state, and computed apart for the rest (`_next_values`; with the
    plan's `next_value_in_step`, each step computes its own). A recurrent policy's next value
    reads the carry after the step, not reset: the true next observation of an episode's last
    step continues that episode.

    Args:
        agent: the agent (`purerl.nets.agent.make_agent`): its network, policy and vmapped envs.
        params: the network's parameters.
        env_state: the envs' states `[B]`.
        obs: their current observations `[B, *obs_shape]`.
        obs_stats: the running observation statistics (`normalizer.obs`).
        env_params: the env's params.
        noise: the rollout's randomness (`RolloutNoise`), `[T, B, ...]`.
        memory: a recurrent policy's memory `[B]`; None for a feed-forward one.

    Returns:
        The `Rollout`: its `Transition` `[T, B]`, the envs' state and observations after the
            last step, the memory after it, and the sums of the episodes that ended `[B]`.
    """
    policy = agent.policy
    num_steps, num_lanes = noise.action_noise.shape[:2]
    num_envs = num_lanes // agent.num_agents
    env_keys = jax.random.split(noise.env_key, (num_steps, num_envs))
    resets, unpack_resets = None, None
    if noise.reset_keys is not None:  # packed like the carry: fewer arrays to slice per step
        drawn = agent.draw_resets(noise.reset_keys.reshape(num_steps * num_envs), env_params)
        pack_resets, unpack_resets = batch_packer(drawn)
        resets = jax.tree.map(lambda x: x.reshape(num_steps, num_envs, *x.shape[1:]),
                              pack_resets(drawn))

    # The carry as one [B, n] array per dtype: XLA:CPU copies every carried leaf each step. The
    # completed episodes' sums are carried too, rather than three more outputs per step.
    no_episodes = EpisodeSums(jnp.zeros(num_envs), jnp.zeros(num_envs, jnp.int32),
                              jnp.zeros(num_envs, jnp.int32),
                              {name: jnp.zeros(num_envs) for name in agent.outcome_names})
    # The lanes' leaves [B * A, ...] as [B, A, ...] in the carry, whose leaves share the axis B.
    by_env = functools.partial(jax.tree.map, lambda x: x.reshape(num_envs, -1, *x.shape[1:]))
    by_lane = functools.partial(jax.tree.map, lambda x: x.reshape(num_lanes, *x.shape[2:]))
    pack_envs, unpack_envs = batch_packer((env_state, by_env(obs), no_episodes, by_env(memory)))

    def pack(carry):
        env_state, obs, sums, memory = carry
        return pack_envs((env_state, by_env(obs), sums, by_env(memory)))

    def unpack(packed):
        env_state, obs, sums, memory = unpack_envs(packed)
        return env_state, by_lane(obs), sums, by_lane(memory)

    step_params = agent.network.step_variables(params)  # sliced here, not at every step

    def step(carry, inputs):
        env_state, obs, sums, memory = unpack(carry)
        action_noise, env_keys, resets, pool_keys, pool_choice = inputs
        if resets is not None:
            resets = unpack_resets(resets)
        if pool_keys is not None:  # N fresh resets, shared out among the B envs
            pool = agent.draw_resets(pool_keys, env_params)
            resets = jax.tree.map(lambda x: x[pool_choice], pool)
        # Without a value here, the value tower runs after the scan, on all observations at once.
        policy_out, value, cell_carry = agent.policy_step(step_params, obs_stats, obs, memory)
        action = policy.sample(policy_out, action_noise)
        next_obs, env_state, reward, terminated, truncated, info = agent.step_envs(
            env_keys, env_state, agent.spec.to_env(action), env_params, resets)
        done = info["episode_done"]
        next_value = None
        if agent.plan.next_value_in_step:  # V of the true next observation, 0 if terminal
            next_value = jnp.where(terminated, 0.0, _values(
                agent, params, obs_stats, info["final_observation"][None],
                None if cell_carry is None else cell_carry[None])[0])
        # The wrapper's episode return and length are zero on steps that end no episode.
        sums = EpisodeSums(sums.episode_return + info["episode_return"],
                           sums.episode_length + info["episode_length"], sums.count + done,
                           {name: total + info["outcomes"][name]
                            for name, total in sums.outcomes.items()})
        # Fewer outputs for each step to write: the observation and the true next one as one
        # `[2, B, ...]`, the two end flags as the bits of one uint8.
        outputs = (jnp.stack([obs, info["final_observation"]]), action,
                   policy.log_prob(policy_out, action), value, reward.astype(jnp.float32),
                   terminated.astype(jnp.uint8) | truncated.astype(jnp.uint8) << 1, cell_carry,
                   next_value)
        if memory is not None:  # reset where `first`, at the next step; per agent's lane
            memory = Memory(cell_carry, terminated | truncated)
        return pack((env_state, next_obs, sums, memory)), outputs

    carry, outputs = jax.lax.scan(step, pack((env_state, obs, no_episodes, memory)),
                                  (noise.action_noise, env_keys, resets, noise.pool_keys,
                                   noise.pool_choice))
    env_state, obs, episodes, memory = unpack(carry)
    # obs_and_next: [T, 2, B, ...]; cell_carries: [T, B, C], a recurrent policy's after each step
    obs_and_next, action, log_prob, value, reward, ends, cell_carries, next_value = outputs
    terminated, truncated = (ends & 1) > 0, (ends & 2) > 0
    if value is None:  # the value tower over every observation, in one pass
        value = _values(agent, params, obs_stats, obs_and_next[:, 0])
    if next_value is None:
        next_value = _next_values(agent, params, obs_stats, value, obs_and_next[:, 1],
                                  cell_carries, terminated, truncated)
    transition = Transition(obs_and_next[:, 0], obs_and_next[:, 1], action, log_prob, value,
                            next_value, reward, terminated, truncated)
    return Rollout(env_state, obs, transition, episodes, memory)


def _next_values(agent: Agent, params, obs_stats, value: jax.Array, next_obs: jax.Array,
                 carry: Optional[jax.Array], terminated: jax.Array,
                 truncated: jax.Array) -> jax.Array:
    """V of the true next observation of every step, `[T, B]`, from the values `value [T, B]`
    of the rollout's observations: where an episode goes on, its next observation is the
    following step's (`value[t + 1]`); at a terminal state it is 0. The others (every env's
    last step, and a truncated episode's final observation `next_obs [T, B, *obs_shape]`, a
    recurrent policy's after its `carry [T, B, C]`) are computed in rounds of one `[B]` pass
    of the value tower, each round taking every env's earliest step still to compute: one
    round, and one more for each episode that one env has truncated before its last step."""
    num_envs = value.shape[1]
    envs = jnp.arange(num_envs)
    # to compute: every truncated step and each env's last one
    pending = truncated.at[-1].set(True) & ~terminated
    following = jnp.concatenate([value[1:], jnp.zeros_like(value[:1])])
    next_value = jnp.where(pending | terminated, 0.0, following)

    def compute_earliest(loop):
        pending, next_value = loop
        step = jnp.argmax(pending, axis=0)  # [B]: each env's earliest step to compute
        computing = pending[step, envs]
        step_carry = None if carry is None else carry[step, envs][None]
        values = _values(agent, params, obs_stats, next_obs[step, envs][None], step_carry)[0]
        next_value = next_value.at[step, envs].set(
            jnp.where(computing, values, next_value[step, envs]))
        return pending.at[step, envs].set(False), next_value

    return jax.lax.while_loop(lambda loop: loop[0].any(), compute_earliest,
                              (pending, next_value))[1]


def _values(agent: Agent, params, obs_stats, obs: jax.Array,
            carry: Optional[jax.Array] = None) -> jax.Array:
    """V of every observation `obs [T, *batch, *obs_shape]` -> `[T, *batch]` (a recurrent
    policy's after its `carry [T, *batch, C]`): in one pass of the value tower when it sees at
    most `MAX_VALUE_PASS_SAMPLES` observations, else in chunks of consecutive steps, one after
    another, so that the network's activations for the whole rollout (with a CNN, tens of GiB
    at thousands of envs) are never held at once."""
    num_steps, batch_ndim = obs.shape[0], obs.ndim - len(agent.obs_shape)
    samples_per_step = math.prod(obs.shape[1:batch_ndim])
    chunk = max((steps for steps in range(1, num_steps + 1) if num_steps % steps == 0
                 and steps * samples_per_step <= MAX_VALUE_PASS_SAMPLES), default=1)

    def values(inputs):  # [steps, *batch, *obs_shape] (and carry) -> [steps, *batch]
        obs, carry = inputs
        network_obs = agent.observe(obs_stats, obs)
        if carry is None:
            return agent.network.apply(params, network_obs, batch_ndim, method="value")
        batch = obs.shape[:batch_ndim]
        flat = math.prod(batch)
        value = agent.network.apply(
            params, carry.reshape(flat, -1), network_obs.reshape(flat, *agent.obs_shape),
            jnp.zeros((flat,), bool), method="value")
        return value.reshape(batch)

    if chunk == num_steps:
        return values((obs, carry))
    chunked = jax.tree.map(lambda x: x.reshape(num_steps // chunk, chunk, *x.shape[1:]),
                           (obs, carry))
    return jax.lax.map(values, chunked).reshape(obs.shape[:batch_ndim])
