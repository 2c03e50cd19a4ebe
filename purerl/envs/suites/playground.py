"""MuJoCo Playground: `env.name=playground/<name>` (`CartpoleBalance`, `CheetahRun`,
`PendulumSwingup`, ... of its dm_control suite; its locomotion and manipulation envs once
MuJoCo Menagerie's robot models are in place), with `env.backend=` MJX's implementation
(`jax`, the default here: Playground's own default `warp` is meant for GPUs; or `warp`).

The env is Playground's raw env (`mujoco_playground.registry.load`), without the Brax training
wrappers Playground trains through (`wrapper.wrap_for_brax_training`):
- Termination is the raw `State.done`: the env's own failure conditions (a robot falling, joint
  limits, a NaN in the simulation): terminated, no bootstrap. Playground's raw envs have no time
  limit of their own; their config's `episode_length` (1000 control steps for the dm_control
  suite, divided by the config's `action_repeat`) is `max_steps_in_episode`, reported by the base
  class as truncation, where Brax's `EpisodeWrapper` would fold it into `done` and set
  `info["truncation"]`. (`info["time_out"]`, which some envs set, is not a time limit: it
  repeats `done`.)
- Resets are fresh: a new key each time, where Playground's `BraxAutoResetWrapper` restores a
  cached first state.
- Actions are `Box(-1, 1, (action_size,))`; the envs scale them to their actuators.
- Observations: an array as it is; a dict with `state` and `privileged_state` (the locomotion
  envs) gives the policy `state` only, what Playground's PPO gives its policy (the privileged
  part is its critic's); any other dict is flattened (the base class).
- The state carried (`SuiteState.inner`) is Playground's `State` less its zero-size arrays (MJX's
  `Data` has many; orbax cannot checkpoint them): `env.suite_state(inner)` gives it whole.
- A config's `action_repeat` > 1 repeats each action as Brax's `EpisodeWrapper` does (rewards
  summed), stopping at a termination.

MuJoCo Menagerie: Playground clones it from GitHub into its package directory the first time a
locomotion or manipulation env is loaded. purerl never starts that download inside a run: such an
env is a one-line error until the models are there (`MENAGERIE_PATH` in the error).

A Playground env object of your own (`env.name=pkg.module:attr` returning an `MjxEnv`, or one
wrapped by `wrap_for_brax_training`) is taken with the training wrappers taken off, as for Brax.
"""

from __future__ import annotations

import math
from typing import Any, Tuple

from purerl.config import ConfigError, EnvConfig
from purerl.envs.suites.base import close_matches, one_line
from purerl.envs.suites.brax import BraxEnv, peel_training_wrappers, quiet_brax

IMPLS = ("jax", "warp")
DEFAULT_IMPL = "jax"  # MJX in JAX: what Playground wants on CPU
EPISODE_LENGTH = 1000


def _needs_menagerie(env_id: str) -> bool:
    # the suite's package, an optional extra: when one of its envs is named
    from mujoco_playground import locomotion, manipulation

    return env_id in tuple(locomotion.ALL_ENVS) + tuple(manipulation.ALL_ENVS)


def menagerie_path():
    """Where Playground looks for MuJoCo Menagerie's clone.

    Returns:
        The `pathlib.Path`.
    """
    # the suite's package, an optional extra: when one of its envs is named
    from mujoco_playground._src import mjx_env

    return mjx_env.MENAGERIE_PATH


def menagerie_commit() -> str:
    """The Menagerie commit Playground pins.

    Returns:
        The commit's SHA, "?" when Playground names none.
    """
    # the suite's package, an optional extra: when one of its envs is named
    from mujoco_playground._src import mjx_env

    return str(getattr(mjx_env, "MENAGERIE_COMMIT_SHA", "?"))


class PlaygroundEnv(BraxEnv):
    """A raw Playground env as a gymnax 1.0 `Environment` (see the module's docstring): its
    `State` and step are Brax's, its dict observations give the policy their `state`."""

    suite_name = "playground"

    @property
    def playground_env(self):
        """The Playground env (held as `brax_env`)."""
        return self.brax_env

    def policy_obs(self, obs: Any) -> Any:
        """A `{state, privileged_state}` dict's `state` (the critic's extra is not used).

        Args:
            obs: a Playground `State`'s obs: an array, or a dict of them.

        Returns:
            `obs["state"]` for that dict, else `obs`.
        """
        if isinstance(obs, dict) and "state" in obs and "privileged_state" in obs:
            return obs["state"]
        return obs


def _time_limit(env_config) -> Tuple[int, int]:
    """(max_steps_in_episode, action_repeat) from a Playground env config."""
    episode_length = int(env_config.get("episode_length", EPISODE_LENGTH))
    action_repeat = int(env_config.get("action_repeat", 1))
    return math.ceil(episode_length / action_repeat), action_repeat


def make(env_id: str, config: EnvConfig) -> PlaygroundEnv:
    """The MuJoCo Playground env `env.name="playground/<id>"` names.

    Args:
        env_id: a Playground id (`registry.ALL_ENVS`).
        config: the `env` settings; `backend` the MJX implementation (empty: `DEFAULT_IMPL`).

    Returns:
        The `PlaygroundEnv`.

    Raises:
        ConfigError: an unknown id or implementation, Menagerie's models missing, or the env not
            made.
    """
    # the suite's package, an optional extra: when one of its envs is named
    from mujoco_playground import registry

    valid = tuple(registry.ALL_ENVS)
    name = f"playground/{env_id}"
    if env_id not in valid:
        raise ConfigError(f"env.name={name!r} is not a MuJoCo Playground environment; "
                          + close_matches(env_id, valid, "playground"))
    impl = config.backend or DEFAULT_IMPL
    if impl not in IMPLS:
        raise ConfigError(f"env.backend={impl!r} is not an MJX implementation Playground runs on; "
                          f"choose one of {', '.join(IMPLS)} (empty: {DEFAULT_IMPL})")
    if _needs_menagerie(env_id) and not menagerie_path().exists():
        raise ConfigError(
            f"env.name={name!r} needs MuJoCo Menagerie's robot models, which Playground downloads "
            f"from GitHub (git clone https://github.com/deepmind/mujoco_menagerie, commit "
            f"{menagerie_commit()[:12]}) when the env is first made; purerl does not start that "
            f"download in a run: put the clone at {menagerie_path()} (or load the env once in "
            "Python with network access)")
    try:
        env_config = registry.get_default_config(env_id)
        overrides = {"impl": impl} if "impl" in env_config else {}
        if config.backend and not overrides:
            raise ConfigError(f"env.backend={config.backend!r}: env.name={name!r} has no MJX "
                              "implementation setting; leave env.backend empty")
        with quiet_brax():
            env = registry.load(env_id, config_overrides=overrides)
    except ConfigError:
        raise
    except Exception as error:
        raise ConfigError(f"env.name={name!r} (impl={impl}) could not be made: "
                          f"{one_line(error)}") from None
    max_steps, action_repeat = _time_limit(env_config)
    return PlaygroundEnv(env_id, env, max_steps, action_repeat)


# -- a user's own Playground env (env.name=module:attr) ----------------------------------------

def _innermost(obj):
    while hasattr(obj, "env"):
        obj = obj.env
    return obj


def accepts(obj) -> bool:
    """A Playground `MjxEnv`, raw or inside Brax's or Playground's wrappers.

    Args:
        obj: a user's env object (`env.name=module:attr`).

    Returns:
        True when `wrap` takes it.
    """
    # the suite's package, an optional extra: when one of its envs is named
    from mujoco_playground import MjxEnv

    return isinstance(_innermost(obj), MjxEnv)


def wrap(obj, config: EnvConfig, params: Any = None) -> PlaygroundEnv:
    """A user's Playground env: Brax's and Playground's training wrappers taken off, its time
    limit from Brax's `EpisodeWrapper` or else the env's config.

    Args:
        obj: the user's env (`accepts(obj)`).
        config: the `env` settings.
        params: unused.

    Returns:
        The `PlaygroundEnv`.

    Raises:
        ConfigError: a wrapper that vmaps randomized models, or `env.backend` other than
            the env's implementation.
    """
    # the suite's package, an optional extra: when one of its envs is named
    from mujoco_playground import wrapper

    name = config.name
    peel = tuple(getattr(wrapper, cls) for cls in ("BraxAutoResetWrapper",)
                 if hasattr(wrapper, cls))
    randomizing = tuple(getattr(wrapper, cls) for cls in ("BraxDomainRandomizationVmapWrapper",)
                        if hasattr(wrapper, cls))
    env, episode_length, action_repeat = peel_training_wrappers(obj, name, (peel, randomizing))
    raw = _innermost(env)
    if episode_length:
        max_steps = math.ceil(episode_length / action_repeat)
    elif hasattr(raw, "_config"):
        max_steps, action_repeat = _time_limit(raw._config)
    else:
        max_steps = EPISODE_LENGTH
    impl = getattr(getattr(getattr(raw, "mjx_model", None), "impl", None), "value", None)
    if config.backend and impl and config.backend != impl:
        raise ConfigError(
            f"env.backend={config.backend!r}: env.name={name!r} was made with impl={impl!r}; set "
            "impl where it is made (config_overrides={'impl': ...}), or leave env.backend empty")
    return PlaygroundEnv(type(raw).__name__, env, max_steps, action_repeat)
