"""A shaped reward annealed over training (`env.reward_shaping_horizon`): the weight that the
env's params give its shaped reward at each update, as JaxMARL's Overcooked baselines anneal
theirs (linearly from 1 to 0 over the horizon's env steps, one weight per update)."""

from __future__ import annotations

from typing import Any, Callable, Dict

import jax
import jax.numpy as jnp

from purerl.config import ConfigError, EnvConfig

# The env params' field a shaped reward is weighted by (`JaxMARLParams`)
WEIGHT_FIELD = "shaped_reward_weight"


def shaping_schedule(env_config: EnvConfig, env_params: Any, steps_per_update: int
                     ) -> Callable[[jax.Array], Any]:
    """`params_at(update) -> env_params`: the params an update's rollout steps its envs with.

    Args:
        env_config: the `env` settings: `reward_shaping_horizon` env steps (0: off), `name`.
        env_params: the env's params; with a horizon, they must have `shaped_reward_weight`.
        steps_per_update: one seed's env steps per update (`ppo.num_steps` x `env.num_envs`).

    Returns:
        `params_at`, jittable: `env_params` itself without a horizon, else with the weight
            `max(0, 1 - update * steps_per_update / horizon)` (int32 `update` `[]`).

    Raises:
        ConfigError: a horizon for an env with no shaped reward.
    """
    horizon = env_config.reward_shaping_horizon
    if not horizon:
        return lambda update: env_params
    if not hasattr(env_params, WEIGHT_FIELD):
        raise ConfigError(f"env.reward_shaping_horizon={horizon:g}: env.name="
                          f"{env_config.name!r} has no shaped reward to anneal (Overcooked's)")

    def params_at(update: jax.Array) -> Any:
        done = update.astype(jnp.float32) * steps_per_update
        weight = jnp.clip(1.0 - done / jnp.float32(horizon), 0.0, 1.0)
        return env_params.replace(**{WEIGHT_FIELD: weight})

    return params_at


def shaping_metrics(env_config: EnvConfig, step_params: Any) -> Dict[str, jax.Array]:
    """The update's `reward_shaping_weight`, logged beside its other scalars; none without a
    horizon.

    Args:
        env_config: the `env` settings.
        step_params: the params the update's rollout stepped with (`shaping_schedule`'s).

    Returns:
        `{"reward_shaping_weight": float32 []}`, or `{}`.
    """
    if not env_config.reward_shaping_horizon:
        return {}
    return {"reward_shaping_weight": getattr(step_params, WEIGHT_FIELD)}
