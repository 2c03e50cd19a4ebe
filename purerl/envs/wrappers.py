"""Environment wrappers with gymnax 1.0's interface: reset(key, params), six-value step.

Each `step` also takes `reset=None`: the base env's `(obs, state)` to auto-reset to, drawn ahead
of time; the wrappers pass it down to `AutoReset`, the innermost one.
"""

from __future__ import annotations

from typing import Any, Optional, Tuple

import jax
import jax.numpy as jnp
from flax import struct
from gymnax.environments import spaces
from gymnax.environments.environment import Environment


def takes_drawn_resets(env) -> bool:
    """Whether `env` auto-resets the way gymnax's `Environment.step` does (it is a gymnax
    `Environment` that does not override `step`), so that `AutoReset` may supply the reset.

    Args:
        env: an env.

    Returns:
        True for a gymnax `Environment` with gymnax's own `step`.
    """
    return isinstance(env, Environment) and type(env).step is Environment.step


def step_inner(env, key, state, action, params, reset):
    """`env.step`, passing `reset` down only when there is one (any gymnax env can be inside a
    wrapper; only `AutoReset` and the wrappers here take `reset`).

    Args:
        env: the wrapped env.
        key: a PRNG key.
        state: its state.
        action: the action.
        params: the env's params.
        reset: the drawn `(obs, state)` to auto-reset to, or None.

    Returns:
        `env.step`'s `(obs, state, reward, terminated, truncated, info)`.
    """
    if reset is None:
        return env.step(key, state, action, params)
    return env.step(key, state, action, params, reset=reset)


class AutoReset:
    """The base env's auto-resetting step, optionally with the reset drawn by the caller.

    `step(key, state, action, params, reset=None)`: without `reset`, the env's own `step`.
    With `reset=(obs, state)` from the env's `reset_env` (for instance a whole rollout's
    resets, drawn in one batch before its scan), gymnax's auto-reset with that reset in place
    of one drawn inside the step: `step_env` with `key`, then `reset` wherever the episode
    ended. Same results in law; on CPU it takes every random draw of the reset out of the
    step loop.
    Only for envs where `takes_drawn_resets(env)`.
    """

    def __init__(self, env):
        self.env = env

    def __getattr__(self, name):
        return getattr(self.env, name)

    def step(self, key, state, action, params, reset: Optional[Tuple[Any, Any]] = None):
        """One step of one env, auto-reset where its episode ended.

        Args:
            key: a PRNG key.
            state: the env's state.
            action: the action.
            params: the env's params.
            reset: the `(obs, state)` to reset to where the episode ends, from `reset_env`; None:
                the env's own `step`.

        Returns:
            `(obs, state, reward, terminated, truncated, info)`: obs and state after the reset
                where done; `terminated` and `truncated` bool `[]`; with `reset`, info gains
                `terminated`, `truncated` and `final_observation` (the step's own obs).
        """
        if reset is None:
            return self.env.step(key, state, action, params)
        obs_step, state_step, reward, terminated, info = self.env.step_env(
            key, state, action, params)
        truncated = self.env.is_truncated(state_step, params)
        done = jnp.logical_or(terminated, truncated)
        obs_reset, state_reset = reset
        select = lambda new, old: jax.lax.select(done, new, old)  # noqa: E731
        state = jax.tree.map(select, state_reset, state_step)
        obs = jax.tree.map(select, obs_reset, obs_step)
        info = {**info, "terminated": terminated, "truncated": truncated,
                "final_observation": obs_step}
        return obs, state, reward, terminated, truncated, info


@struct.dataclass
class EpisodeStatsState:
    env_state: Any
    episode_return: jax.Array  # float32 [] ([A]: a multi-agent env's), the running episode's
    episode_length: jax.Array  # [] int32


# The info key of an env's own reward where the step's reward adds a shaped one: what the
# episodes' returns sum (`EpisodeStats`)
SCORE_REWARD = "score_reward"


class EpisodeStats:
    """Accumulates each episode's return and length, reported only when the episode ends: the
    return of the env's own rewards (`info[SCORE_REWARD]` where the step's reward is shaped).

    `step`'s info gains `episode_done` (bool), `episode_return` and `episode_length` (the
    completed episode's totals on its last step, zero elsewhere).
    """

    def __init__(self, env):
        self.env = env

    def __getattr__(self, name):
        return getattr(self.env, name)

    def reset(self, key, params):
        """The env's reset, the episode's totals at zero.

        Args:
            key: a PRNG key.
            params: the env's params.

        Returns:
            `(obs, EpisodeStatsState)`.
        """
        obs, env_state = self.env.reset(key, params)
        # a multi-agent env's rewards are `[A]`, one per agent (`reward_shape`)
        no_return = jnp.zeros(getattr(self.env, "reward_shape", ()), jnp.float32)
        return obs, EpisodeStatsState(env_state, no_return, jnp.int32(0))

    def step(self, key, state: EpisodeStatsState, action, params, reset=None):
        """One step of the inner env, its episode's totals updated (reset to zero where it ended).

        Args:
            key: a PRNG key.
            state: the `EpisodeStatsState`.
            action: the action.
            params: the env's params.
            reset: the drawn `(obs, state)` to auto-reset to, or None.

        Returns:
            `(obs, state, reward, terminated, truncated, info)`, info with `episode_done` bool
                `[]`, `episode_return` float32 `[]` and `episode_length` int32 `[]`.
        """
        obs, env_state, reward, terminated, truncated, info = step_inner(
            self.env, key, state.env_state, action, params, reset)
        done = jnp.logical_or(terminated, truncated)
        score = info.get(SCORE_REWARD, reward)  # the env's own reward where it learns on another
        episode_return = state.episode_return + score.astype(jnp.float32)
        episode_length = state.episode_length + 1
        info = {
            **info,
            "episode_done": done,
            "episode_return": jnp.where(done, episode_return, 0.0),
            "episode_length": jnp.where(done, episode_length, 0),
        }
        state = EpisodeStatsState(
            env_state,
            jnp.where(done, 0.0, episode_return),
            jnp.where(done, 0, episode_length),
        )
        return obs, state, reward, terminated, truncated, info


@struct.dataclass
class FrameStackState:
    env_state: Any
    frames: jax.Array  # [k, *obs_shape], oldest first


class FrameStack:
    """Gives the policy the last `k` observations, concatenated on the last axis (oldest
    first; a scalar observation becomes `[k]`). After a reset every slot holds the reset
    observation, also on the auto-reset step, and `info["final_observation"]` is the stack that
    ends with the episode's true last observation."""

    def __init__(self, env, num_frames: int):
        self.env = env
        self.num_frames = num_frames

    def __getattr__(self, name):
        return getattr(self.env, name)

    def _stacked(self, frames: jax.Array) -> jax.Array:
        if frames.ndim == 1:
            return frames
        return jnp.concatenate([frames[i] for i in range(self.num_frames)], axis=-1)

    def observation_space(self, params):
        """A float32 Box of the stacked observation.

        Args:
            params: the env's params.

        Returns:
            `Box` of shape `[*obs_shape[:-1], k * obs_shape[-1]]` (`[k]` for a scalar
                observation), the inner bounds tiled.
        """
        inner = self.env.observation_space(params)
        shape = tuple(inner.shape)
        discrete = isinstance(inner, spaces.Discrete)
        low, high = (0, inner.n - 1) if discrete else (inner.low, inner.high)
        tile = lambda b: self._stacked(jnp.broadcast_to(jnp.asarray(b, jnp.float32),  # noqa: E731
                                                        (self.num_frames, *shape)))
        return spaces.Box(tile(low), tile(high), tile(jnp.zeros(shape)).shape,
                          jnp.float32)

    def reset(self, key, params):
        """The inner reset, every slot of the stack its observation.

        Args:
            key: a PRNG key.
            params: the env's params.

        Returns:
            `(obs, FrameStackState)`, obs float32 stacked as `observation_space` says.
        """
        obs, env_state = self.env.reset(key, params)
        frames = jnp.broadcast_to(obs, (self.num_frames, *jnp.shape(obs))).astype(jnp.float32)
        return self._stacked(frames), FrameStackState(env_state, frames)

    def step(self, key, state: FrameStackState, action, params, reset=None):
        """One inner step, its observation pushed onto the stack (the stack refilled where the
        episode ended).

        Args:
            key: a PRNG key.
            state: the `FrameStackState`.
            action: the action.
            params: the env's params.
            reset: the drawn `(obs, state)` to auto-reset to, or None.

        Returns:
            `(obs, state, reward, terminated, truncated, info)`, obs and
                `info["final_observation"]` stacked.
        """
        obs, env_state, reward, terminated, truncated, info = step_inner(
            self.env, key, state.env_state, action, params, reset)
        done = jnp.logical_or(terminated, truncated)
        shift = lambda new: jnp.concatenate(  # noqa: E731
            [state.frames[1:], jnp.asarray(new, jnp.float32)[None]], axis=0)
        final_frames = shift(info["final_observation"])
        reset_frames = jnp.broadcast_to(obs, state.frames.shape).astype(jnp.float32)
        frames = jnp.where(done, reset_frames, shift(obs))
        info = {**info, "final_observation": self._stacked(final_frames)}
        return (self._stacked(frames), FrameStackState(env_state, frames), reward, terminated,
                truncated, info)


class OneHotObservation:
    """Turns a `Discrete(n)` observation (an index, such as FrozenLake's cell) into a one-hot
    float32 vector `[n]`, also in `info["final_observation"]`."""

    def __init__(self, env, num_values: int):
        self.env = env
        self.num_values = num_values

    def __getattr__(self, name):
        return getattr(self.env, name)

    def observation_space(self, params):
        """A float32 Box `[0, 1]` of shape `[n]`.

        Args:
            params: the env's params (unused).

        Returns:
            The `Box`.
        """
        return spaces.Box(0.0, 1.0, (self.num_values,), jnp.float32)

    def _one_hot(self, obs):
        return jax.nn.one_hot(obs, self.num_values, dtype=jnp.float32)

    def reset(self, key, params):
        """The inner reset, its observation one-hot.

        Args:
            key: a PRNG key.
            params: the env's params.

        Returns:
            `(obs, state)`, obs float32 `[n]`.
        """
        obs, env_state = self.env.reset(key, params)
        return self._one_hot(obs), env_state

    def step(self, key, state, action, params, reset=None):
        """One inner step, its observation (and `info["final_observation"]`) one-hot.

        Args:
            key: a PRNG key.
            state: the env's state.
            action: the action.
            params: the env's params.
            reset: the drawn `(obs, state)` to auto-reset to, or None.

        Returns:
            `(obs, state, reward, terminated, truncated, info)`, obs float32 `[n]`.
        """
        obs, env_state, reward, terminated, truncated, info = step_inner(
            self.env, key, state, action, params, reset)
        info = {**info, "final_observation": self._one_hot(info["final_observation"])}
        return self._one_hot(obs), env_state, reward, terminated, truncated, info
