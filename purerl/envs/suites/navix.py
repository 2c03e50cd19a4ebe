"""Navix envs (MiniGrid in JAX): `env.name=navix/<id>`, `<id>` one of `navix.registry()`
(`Navix-Empty-5x5-v0`, `Navix-DoorKey-Random-8x8-v0`, ...), made by `navix.make(<id>)`.

Signals: navix's `Timestep.step_type` is `StepType.TRANSITION` (0), `TRUNCATION` (1: navix's own
time limit, `t >= env.max_steps`, 100 from `navix.make`) or `TERMINATION` (2: goal reached, lava,
ball hit; it wins when both happen on one step). TERMINATION is `terminated`, TRUNCATION is
`truncated`; purerl's `max_steps_in_episode` defaults to `env.max_steps`, so both limits fire on
the same step. The step is navix's `Environment._step`: its public `step` auto-resets lazily
(a `lax.cond` that vmapped computes a reset on every step), and purerl auto-resets itself.

Observations: as the env's `observation_fn` gives them, cast to float32: the registered envs
use `observations.symbolic`, the whole grid `[H, W, 3]` (MiniGrid's object tag, colour,
state/direction per cell), an image for a CNN (`network=cnn`) or flattened by an MLP.
Actions: `Discrete(len(env.action_set))` (7 for the default MiniGrid action set).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import navix as nx
from gymnax.environments import spaces
from navix.environments.environment import StepType

from purerl.config import ConfigError, EnvConfig
from purerl.envs.suites.base import SuiteEnv, close_matches


class NavixEnv(SuiteEnv):
    """A navix `Environment` (a pytree that carries its own settings)."""

    suite_name = "navix"

    def __init__(self, env_id: str, env: nx.Environment):
        self.env = env
        super().__init__(env_id, spaces.Discrete(len(env.action_set)), int(env.max_steps))

    def suite_reset(self, key: jax.Array):
        """The suite's reset of one env.

        Args:
            key: a PRNG key.

        Returns:
            `(obs, state)`: navix's observation; navix's `Timestep`.
        """
        timestep = self.env.reset(key)
        return timestep.observation, timestep

    def suite_step(self, key: jax.Array, inner: Any, action):
        """The suite's step of one env.

        Args:
            key: a PRNG key.
            inner: navix's `Timestep`.
            action: the action, as `action_space()` gives it.

        Returns:
            `(obs, state, reward, terminated, truncated)`; reward, terminated and truncated `[]`.
        """
        timestep = self.env._step(inner, jnp.asarray(action, jnp.int32))
        return (timestep.observation, timestep, timestep.reward,
                timestep.step_type == StepType.TERMINATION,
                timestep.step_type == StepType.TRUNCATION)


def make(env_id: str, config: EnvConfig) -> NavixEnv:
    """The navix env `env.name="navix/<id>"` names.

    Args:
        env_id: a navix id (`navix.registry()`).
        config: the `env` settings (unused).

    Returns:
        The `NavixEnv`.

    Raises:
        ConfigError: an unknown id.
    """
    registered = sorted(nx.registry())
    if env_id not in registered:
        raise ConfigError(f"env.name='navix/{env_id}' is not a Navix environment id; "
                          + close_matches(env_id, registered, "navix"))
    return NavixEnv(env_id, nx.make(env_id))


def accepts(obj: Any) -> bool:
    """Whether `obj` is a navix env this adapter wraps.

    Args:
        obj: a user's env object (`env.name=module:attr`).

    Returns:
        True when `wrap` takes it.
    """
    return isinstance(obj, nx.Environment)


def wrap(obj: Any, config: EnvConfig, params: Any = None) -> NavixEnv:
    """A user's navix env (its settings, `max_steps` included, are the env's own fields).

    Args:
        obj: the user's env (`accepts(obj)`).
        config: the `env` settings.
        params: unused (the env holds its settings).

    Returns:
        The `NavixEnv`.
    """
    return NavixEnv(type(obj).__name__, obj)
