"""Environment wrappers with gymnax 1.0's interface: reset(key, params), six-value step."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct


@struct.dataclass
class EpisodeStatsState:
    env_state: Any
    episode_return: jax.Array  # [] float32, return of the running episode so far
    episode_length: jax.Array  # [] int32


class EpisodeStats:
    """Accumulates each episode's return and length, reported only when the episode ends.

    `step`'s info gains `episode_done` (bool), `episode_return` and `episode_length` (the
    completed episode's totals on its last step, zero elsewhere).
    """

    def __init__(self, env):
        self.env = env

    def __getattr__(self, name):
        return getattr(self.env, name)

    def reset(self, key, params):
        obs, env_state = self.env.reset(key, params)
        return obs, EpisodeStatsState(env_state, jnp.float32(0.0), jnp.int32(0))

    def step(self, key, state: EpisodeStatsState, action, params):
        obs, env_state, reward, terminated, truncated, info = self.env.step(
            key, state.env_state, action, params
        )
        done = jnp.logical_or(terminated, truncated)
        episode_return = state.episode_return + reward.astype(jnp.float32)
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
