"""Evaluation episodes at several sampling temperatures (trax's `eval_temperatures`).

`make_evaluator(agent, env_params, settings).evaluate(params, obs_stats, key)` is a pure
function for one seed: `eval.num_episodes` fresh eval envs per temperature play one episode
each, for at most `eval.max_steps` steps, with the policy sampled at each temperature of
`eval.temperatures` (0.0: the mode). Observations are normalized with the training statistics,
which evaluation never updates. Every temperature plays from the same start states.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Callable, NamedTuple, Optional, Sequence

import jax
import jax.numpy as jnp

from purerl.config import Config, EvalConfig
from purerl.core.prng import draw_bits, keys_from_bits
from purerl.envs import EpisodeStatsState
from purerl.envs.normalization import RunningMeanStd
from purerl.envs.wrappers import FrameStackState
from purerl.nets.agent import Agent, Memory

DEFAULT_MAX_STEPS = 1000  # for envs whose params have no max_steps_in_episode


class EvalResult(NamedTuple):
    """Means over the episodes, one entry per temperature: `[num_temperatures]`."""

    episode_return: jax.Array
    episode_length: jax.Array


class Episode(NamedTuple):
    """One recorded episode, padded to `max_steps` `[T]`: the env state before each step
    (unwrapped: the env's own state), the step's reward, and whether the episode ended."""

    states: object
    rewards: jax.Array
    dones: jax.Array


class Evaluator(NamedTuple):
    evaluate: Callable[..., EvalResult]  # (params, obs_stats, key) -> EvalResult
    record: Callable[..., Episode]  # (params, obs_stats, key, temperature) -> Episode


def unwrap_state(state):
    """The env's own state inside purerl's wrapper states.

    Args:
        state: a wrapped env state (`EpisodeStatsState`, `FrameStackState`), or any state.

    Returns:
        The innermost state that is neither.
    """
    while isinstance(state, (EpisodeStatsState, FrameStackState)):
        state = state.env_state
    return state


def eval_max_steps(settings: EvalConfig, env_params) -> int:
    """`eval.max_steps`, or the env's own episode limit when it is null.

    Args:
        settings: the `eval` settings.
        env_params: the env's params; their `max_steps_in_episode` if any, else 1000.

    Returns:
        The step limit of an eval episode.
    """
    if settings.max_steps is not None:
        return settings.max_steps
    return int(getattr(env_params, "max_steps_in_episode", DEFAULT_MAX_STEPS))


def with_evaluation(config: Config, episodes: int, temperatures: Optional[Sequence[float]],
                    max_steps: Optional[int]) -> Config:
    """`config` with `episodes` episodes per temperature, at `temperatures` and of at most
    `max_steps` steps (each None: the run's own `eval` setting), not yet validated.

    Args:
        config: the run's config.
        episodes: episodes per temperature (`eval.num_episodes`).
        temperatures: sampling temperatures (`eval.temperatures`); None: the run's.
        max_steps: an episode's step limit (`eval.max_steps`); None: the run's.

    Returns:
        The new config (pass it to `validate`).
    """
    evaluation = dataclasses.replace(
        config.eval, num_episodes=episodes,
        temperatures=list(config.eval.temperatures if temperatures is None else temperatures),
        max_steps=config.eval.max_steps if max_steps is None else max_steps)
    return dataclasses.replace(config, eval=evaluation)


def make_evaluator(agent: Agent, env_params, settings: EvalConfig) -> "Evaluator":
    """`Evaluator(evaluate, record)` for one seed's params of `agent`
    (`purerl.nets.agent.make_agent`) on the env of `env_params`, by the `eval` settings:
    `evaluate(params, obs_stats, key) -> EvalResult`; `record(params, obs_stats, key,
    temperature) -> Episode`.

    Args:
        agent: the run's agent (`purerl.nets.agent.make_agent`).
        env_params: the env's params.
        settings: the `eval` settings: `num_episodes` envs `[E]` per temperature, played for
            at most `eval_max_steps` steps.

    Returns:
        The `Evaluator`. `evaluate(params, obs_stats, key)`: params and `obs_stats` of one
            member (no `[S]` axis), a typed key; returns the `EvalResult`, each field float32
            `[num_temperatures]`. `record(...)`: one episode at `temperature`, an `Episode`
            of `states` (leaves `[max_steps, ...]`), `rewards` float32 `[max_steps]` and
            `dones` bool `[max_steps]` (the steps after the first done are not the episode's).
    """
    num_episodes, max_steps = settings.num_episodes, eval_max_steps(settings, env_params)
    temperatures = jnp.asarray(settings.temperatures, jnp.float32)
    play = functools.partial(_play, agent, env_params, num_episodes, max_steps)

    def evaluate(params, obs_stats: RunningMeanStd, key: jax.Array) -> EvalResult:
        step_params = agent.network.step_variables(params)
        return jax.vmap(play, in_axes=(None, None, None, 0))(step_params, obs_stats, key,
                                                              temperatures)

    def record(params, obs_stats: RunningMeanStd, key: jax.Array, temperature) -> Episode:
        return _record(agent, env_params, max_steps, params, obs_stats, key, temperature)

    return Evaluator(evaluate, record)


def _play(agent: Agent, env_params, num_episodes: int, max_steps: int, params,
          obs_stats: RunningMeanStd, key: jax.Array, temperature) -> EvalResult:
    """`num_episodes` episodes `[E]` at `temperature`, each of at most `max_steps` steps, in
    one loop that ends when all have."""
    impl, words = jax.random.key_impl(key), jax.random.key_data(key).shape[-1]
    step_key, reset_keys = (keys_from_bits(bits, impl) for bits in draw_bits(
        key, (words,), (num_episodes, words)))
    obs, env_state = agent.reset_envs(reset_keys, env_params)
    restarts = _draw_restarts(agent, env_params, reset_keys)
    zeros = jnp.zeros((num_episodes,), jnp.float32)
    init = (jnp.int32(0), step_key, obs, env_state,
            agent.initial_memory(num_episodes * agent.num_agents),
            jnp.ones((num_episodes,), bool), zeros, zeros)

    def running(carry):
        t, *_, alive, _, _ = carry
        return (t < max_steps) & alive.any()

    def step(carry):
        t, key, obs, env_state, memory, alive, total, length = carry
        key, obs, env_state, memory, reward, done = _act(
            agent, env_params, params, obs_stats, obs, env_state, memory, temperature, key,
            restarts)
        total = total + jnp.where(alive, reward, 0.0)
        length = length + alive
        return t + 1, key, obs, env_state, memory, alive & ~done, total, length

    *_, total, length = jax.lax.while_loop(running, step, init)
    return EvalResult(total.mean(), length.mean())


def _record(agent: Agent, env_params, max_steps: int, params, obs_stats: RunningMeanStd,
            key: jax.Array, temperature) -> Episode:
    """One episode of `max_steps` steps at most, for rendering."""
    reset_key, step_key = jax.random.split(key)
    obs, env_state = agent.reset_envs(reset_key[None], env_params)
    restarts = _draw_restarts(agent, env_params, reset_key[None])
    step_params = agent.network.step_variables(params)

    def step(carry, _):
        key, obs, env_state, memory = carry
        before = env_state
        key, obs, env_state, memory, reward, done = _act(
            agent, env_params, step_params, obs_stats, obs, env_state, memory, temperature, key,
            restarts)
        return (key, obs, env_state, memory), (unwrap_state(before), reward[0], done[0])

    _, (states, rewards, dones) = jax.lax.scan(
        step, (step_key, obs, env_state, agent.initial_memory(agent.num_agents)), None,
        max_steps)
    return Episode(jax.tree.map(lambda x: x[:, 0], states), rewards, dones)


def _draw_restarts(agent: Agent, env_params, reset_keys: jax.Array):
    """The states an env whose episode ended restarts from, its episode's own first state
    (None: the env draws its resets itself): an ended episode is never played on, so its
    restart needs no random draw."""
    return None if agent.draw_resets is None else agent.draw_resets(reset_keys, env_params)


def _act(agent: Agent, env_params, params, obs_stats, obs, env_state, memory: Optional[Memory],
         temperature, key: jax.Array, restarts):
    """One step of every env `[N]`: (next key, obs, env_state, memory, reward float32 [N],
    done [N]), a multi-agent env's reward its team's; a recurrent policy's memory starts a new
    episode after its agent's lane ends. The step's randomness is one draw of `key`'s bits."""
    policy = agent.policy
    num_envs = jax.tree.leaves(env_state)[0].shape[0]
    impl, words = jax.random.key_impl(key), jax.random.key_data(key).shape[-1]
    next_key, noise, env_keys = draw_bits(
        key, (words,), policy.noise_shape((num_envs * agent.num_agents,)), (num_envs, words))
    policy_out, _, carry = agent.policy_step(params, obs_stats, obs, memory)
    action = policy.sample(policy_out, policy.noise_from_bits(noise), temperature)
    obs, env_state, reward, terminated, truncated, info = agent.step_envs(
        keys_from_bits(env_keys, impl), env_state, agent.spec.to_env(action), env_params,
        restarts)
    if memory is not None:
        memory = Memory(carry, terminated | truncated)
    return (keys_from_bits(next_key, impl), obs, env_state, memory,
            agent.team_sum(reward.astype(jnp.float32)), info["episode_done"])
