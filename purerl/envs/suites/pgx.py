"""Pgx's single-agent envs: `env.name=pgx/<id>`, `<id>` one of `pgx.available_envs()` with one
player: `2048` and the MinAtar games `minatar-asterix`, `minatar-breakout`, `minatar-freeway`,
`minatar-seaquest`, `minatar-space_invaders`; made by `pgx.make(<id>)`. Pgx's two-player
games (chess, go, ...) are out of scope: naming one is a one-line ConfigError. A user's own
single-player `pgx.Env` comes by `env.name=module:attr`.

Signals: `state.terminated` is `terminated`, `state.truncated` (which no Pgx env sets itself)
`truncated`. The reward is `state.rewards[p]` of the player `p` who acted. The step is
`env.step(state, action, key)` (Pgx >= 2.0 takes a key; 2048 draws its new tile from it,
MinAtar its sticky actions). Pgx has no time limit of its own: purerl's
`max_steps_in_episode` defaults to gymnax's MinAtar limits (1000; Freeway, which ends itself
after 2500, 2500) and to 10_000 for 2048 (which ends when no move is left).

Observations: `state.observation`. With a mask (every env but MinAtar): it is flattened to
float32 and `state.legal_action_mask` appended as its last `num_actions` entries; 2048's is the
board one-hot `[4, 4, 31]` (tile exponent 0..30 per cell), 496 entries, then the 4 moves' mask
(left, up, right, down): 500. MinAtar's mask is always all legal, so it has none and keeps its
image `[10, 10, C]` (bool) for a CNN. Actions: `Discrete(num_actions)`.
"""

from __future__ import annotations

from typing import Any, Optional

import jax
import jax.numpy as jnp
import pgx
from gymnax.environments import spaces

from purerl.config import ConfigError, EnvConfig
from purerl.envs.suites.base import SuiteEnv, close_matches, one_line

# purerl's time limit per env: pgx has none (its 2048 ends when no move is left)
DEFAULT_MAX_STEPS = {"minatar-freeway": 2500}
MINATAR_MAX_STEPS = 1000
NO_TIME_LIMIT_STEPS = 10_000


class PgxEnv(SuiteEnv):
    """A single-player `pgx.Env`."""

    suite_name = "pgx"

    def __init__(self, env_id: str, env: "pgx.Env"):
        self.env = env
        state = jax.eval_shape(env.init, jax.random.PRNGKey(0))
        num_actions = int(state.legal_action_mask.shape[-1])
        # MinAtar's legal_action_mask is all True: no mask, and its image stays an image
        self.action_mask_size = 0 if _is_minatar(env) else num_actions
        super().__init__(env_id, spaces.Discrete(num_actions), _default_max_steps(env))

    def suite_reset(self, key: jax.Array):
        """The suite's reset of one env.

        Args:
            key: a PRNG key.

        Returns:
            `(obs, state)`: pgx's observation; pgx's `State`.
        """
        state = self.env.init(key)
        return state.observation, state

    def suite_step(self, key: jax.Array, inner: Any, action):
        """The suite's step of one env; the reward is the acting player's.

        Args:
            key: a PRNG key.
            inner: pgx's `State`.
            action: the action, as `action_space()` gives it.

        Returns:
            `(obs, state, reward, terminated, truncated)`; reward, terminated and truncated `[]`.
        """
        state = self.env.step(inner, jnp.asarray(action, jnp.int32), key)
        reward = state.rewards[inner.current_player]
        return state.observation, state, reward, state.terminated, state.truncated

    def suite_action_mask(self, inner: Any) -> Optional[jax.Array]:
        """pgx's legal actions, except for MinAtar (all legal: no mask).

        Args:
            inner: pgx's `State`.

        Returns:
            bool `[num_actions]`, or None.
        """
        return inner.legal_action_mask if self.action_mask_size else None


def _is_minatar(env: "pgx.Env") -> bool:
    return str(env.id).startswith("minatar-")


def _default_max_steps(env: "pgx.Env") -> int:
    env_id = str(env.id)
    if env_id in DEFAULT_MAX_STEPS:
        return DEFAULT_MAX_STEPS[env_id]
    return MINATAR_MAX_STEPS if _is_minatar(env) else NO_TIME_LIMIT_STEPS


def _single_player(name: str, env: "pgx.Env") -> "pgx.Env":
    if env.num_players != 1:
        raise ConfigError(
            f"env.name={name!r} is a {env.num_players}-player game; Pgx's two-player "
            "(multi-player) games are out of scope: pgx/2048 and pgx/minatar-* are single-agent")
    return env


def make(env_id: str, config: EnvConfig) -> PgxEnv:
    """The Pgx env `env.name="pgx/<id>"` names.

    Args:
        env_id: a Pgx id (`pgx.available_envs()`).
        config: the `env` settings (unused).

    Returns:
        The `PgxEnv`.

    Raises:
        ConfigError: an unknown id, the env not made, or a game of more than one player.
    """
    available = list(pgx.available_envs())
    if env_id not in available:
        raise ConfigError(f"env.name='pgx/{env_id}' is not a Pgx environment id; "
                          + close_matches(env_id, available, "pgx"))
    try:
        env = pgx.make(env_id)
    except Exception as error:
        raise ConfigError(
            f"env.name='pgx/{env_id}' could not be made: {one_line(error)}") from None
    return PgxEnv(env_id, _single_player(f"pgx/{env_id}", env))


def accepts(obj: Any) -> bool:
    """Whether `obj` is a Pgx env this adapter wraps.

    Args:
        obj: a user's env object (`env.name=module:attr`).

    Returns:
        True when `wrap` takes it.
    """
    return isinstance(obj, pgx.Env)


def wrap(obj: Any, config: EnvConfig, params: Any = None) -> PgxEnv:
    """A user's single-player Pgx env.

    Args:
        obj: the user's env (`accepts(obj)`).
        config: the `env` settings.
        params: unused.

    Returns:
        The `PgxEnv`.

    Raises:
        ConfigError: a game of more than one player.
    """
    return PgxEnv(str(obj.id), _single_player(config.name, obj))
