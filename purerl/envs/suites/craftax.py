"""Craftax envs: `env.name=craftax/<id>`, `<id>` one of `Craftax-Classic-Symbolic-v1`,
`Craftax-Classic-Pixels-v1`, `Craftax-Symbolic-v1`, `Craftax-Pixels-v1`, made by
`craftax.craftax_env.make_craftax_env_from_name(<id>, auto_reset=False)`.

Craftax envs are gymnax-0.0.x-style (`step_env -> obs, state, reward, done, info`); the
adapter calls their `reset_env` and `step_env` (never `step`, whose AutoReset form resets
itself). Craftax's `done` is `is_terminal` = `is_game_over`: death (health <= 0; Classic also
standing in lava; full Craftax also beating the final boss) OR its own time limit
`state.timestep >= EnvParams.max_timesteps` (10 000 Classic, 100 000 full). The adapter keeps
them apart: `terminated` is `is_terminal` with the time limit lifted, `truncated` is the time
limit without a termination. purerl's `max_steps_in_episode` defaults to `max_timesteps`, so
both limits fire on the same step.

Observations: Symbolic, one float32 vector (Classic 1345: a 7x9 local map of one-hot blocks and
mobs, flattened, then inventory, intrinsics, light, sleep, direction; full Craftax 8268);
Pixels, a float32 image `[H, W, 3]` in [0, 1]. Actions: `Discrete(17)` Classic, `Discrete(43)`.

Resets generate a whole world (Classic 64x64, full Craftax 9 levels of 48x48): they cost much
more than a step, and gymnax's auto-reset computes one per env on every step (`env.reset_pool`
shares a few fresh ones instead). Vmapped, world generation slows down per env with the batch
(its working set outgrows the caches), so a vmapped reset here makes `RESET_CHUNK` worlds at a
time (`lax.map`), whatever the batch. Classic on 2 CPU cores, 64 envs: reset 0.32 ms per env
(0.8 ms as one vmap; 2048 envs 0.29 ms, 47 ms as one vmap); `step_env` 0.023 ms per env; the
gymnax step with its reset 3,260 steps/s against 43,100 for `step_env` alone.
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
from craftax.craftax_env import make_craftax_env_from_name
from craftax.environment_base.environment_bases import EnvironmentAutoReset, EnvironmentNoAutoReset
from gymnax.environments import spaces

from purerl.config import ConfigError, EnvConfig
from purerl.envs.suites.base import SuiteEnv, close_matches

# Vmapped, a world's generation costs more per env the more envs there are (its working set
# outgrows the caches): on 2 CPU cores, 0.8 ms each for 64, 20 ms each for 1024, 47 ms each
# for 2048, but 0.36 ms each for 2048 made 16 at a time. So a vmapped reset here is a loop
# over chunks of this many (`lax.map`), whatever the batch.
RESET_CHUNK = 16
ENV_IDS = ("Craftax-Classic-Symbolic-v1", "Craftax-Classic-Pixels-v1", "Craftax-Symbolic-v1",
           "Craftax-Pixels-v1")
_NO_TIME_LIMIT = 2**31 - 1


def _chunked(reset: Callable, chunk: int) -> Callable:
    """`reset(key)` that, vmapped over keys, runs `chunk` of them at a time (a loop)."""

    @jax.custom_batching.custom_vmap
    def chunked(key):
        return reset(key)

    @chunked.def_vmap
    def _(axis_size, in_batched, key):
        if not in_batched[0]:
            out = reset(key)
            return out, jax.tree.map(lambda _: False, out)
        out = jax.lax.map(reset, key, batch_size=min(chunk, axis_size))
        return out, jax.tree.map(lambda _: True, out)

    return chunked


class CraftaxEnv(SuiteEnv):
    """A Craftax env with its `EnvParams`."""

    suite_name = "craftax"

    def __init__(self, env_id: str, env: Any, params: Any):
        self.env = env
        self.params = params
        self._params_no_limit = params.replace(max_timesteps=_NO_TIME_LIMIT)
        self._chunked_reset = _chunked(lambda key: self.env.reset_env(key, self.params),
                                       RESET_CHUNK)
        super().__init__(env_id, spaces.Discrete(int(env.num_actions)),
                         int(params.max_timesteps))

    def suite_reset(self, key: jax.Array):
        """The suite's reset of one env.

        Args:
            key: a PRNG key.

        Returns:
            `(obs, state)`: the Craftax observation; Craftax's env state.
        """
        return self._chunked_reset(key)

    def suite_step(self, key: jax.Array, inner: Any, action):
        """The suite's step of one env.

        Args:
            key: a PRNG key.
            inner: Craftax's env state.
            action: the action, as `action_space()` gives it.

        Returns:
            `(obs, state, reward, terminated, truncated)`; reward, terminated and truncated `[]`.
        """
        obs, state, reward, done, _ = self.env.step_env(key, inner, jnp.asarray(action, jnp.int32),
                                                        self.params)
        terminated = self.env.is_terminal(state, self._params_no_limit)
        truncated = (state.timestep >= self.params.max_timesteps) & ~terminated
        return obs, state, reward, terminated, truncated


def make(env_id: str, config: EnvConfig) -> CraftaxEnv:
    """The Craftax env `env.name="craftax/<id>"` names.

    Args:
        env_id: a Craftax id without auto-reset (`ENV_IDS`).
        config: the `env` settings (unused).

    Returns:
        The `CraftaxEnv`.

    Raises:
        ConfigError: an unknown id.
    """
    if env_id not in ENV_IDS:
        raise ConfigError(f"env.name='craftax/{env_id}' is not a Craftax environment id "
                          "(purerl resets envs itself: no AutoReset ids); "
                          + close_matches(env_id, ENV_IDS, "craftax"))
    env = make_craftax_env_from_name(env_id, auto_reset=False)
    return CraftaxEnv(env_id, env, env.default_params)


def accepts(obj: Any) -> bool:
    """Whether `obj` is a Craftax env this adapter wraps.

    Args:
        obj: a user's env object (`env.name=module:attr`).

    Returns:
        True when `wrap` takes it.
    """
    return isinstance(obj, (EnvironmentNoAutoReset, EnvironmentAutoReset))


def wrap(obj: Any, config: EnvConfig, params: Any = None) -> CraftaxEnv:
    """A user's Craftax env (AutoReset or not: only its `reset_env`/`step_env` are used),
    with its `EnvParams` (`params`; default: the env's `default_params`).

    Args:
        obj: the user's env (`accepts(obj)`).
        config: the `env` settings.
        params: its `EnvParams`; None: the env's `default_params`.

    Returns:
        The `CraftaxEnv`.
    """
    return CraftaxEnv(type(obj).__name__, obj, obj.default_params if params is None else params)
