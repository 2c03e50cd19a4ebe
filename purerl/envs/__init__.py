"""Builds environments from `EnvConfig`: gymnax ids, other suites' `<suite>/<id>`
(`purerl.envs.suites`), or a user's `module:attr`."""

from __future__ import annotations

import dataclasses
import difflib
import importlib
import inspect
import numbers
from urllib.error import URLError

import gymnax
import jax
import numpy as np
from gymnax.environments import spaces
from gymnax.environments.environment import Environment

from purerl.config import ConfigError, EnvConfig, number_problem
from purerl.envs.action_spaces import ActionSpec, UnsupportedSpaceError, analyze_action_space
from purerl.envs.suites import adapt_user_env, is_suite_name, make_suite_env
from purerl.envs.suites.base import SuiteEnv, one_line
from purerl.envs.wrappers import (
    AutoReset,
    EpisodeStats,
    EpisodeStatsState,
    FrameStack,
    OneHotObservation,
    takes_drawn_resets,
)

__all__ = ["make_env", "wrap_env", "check_env", "folds_time_limit", "AutoReset", "EpisodeStats",
           "EpisodeStatsState", "FrameStack", "OneHotObservation", "takes_drawn_resets"]


def wrap_env(env, config: EnvConfig, env_params):
    """The env as the trainer steps it: auto-reset (with resets drawn ahead when
    `takes_drawn_resets(env)`), Discrete observations one-hot, frame history (`frame_stack`),
    then episode stats.

    Args:
        env: the env as `make_env` returns it.
        config: the `env` settings (`frame_stack`).
        env_params: the env's params, to read its observation space.

    Returns:
        The wrapped env, for one env: `reset(key, params) -> (obs, state)`,
            `step(key, state, action, params, reset=None) -> (obs, state, reward, terminated,
            truncated, info)`; obs float32 `[*obs_shape]` after one-hot and stacking.
    """
    obs_space = env.observation_space(env_params)
    env = AutoReset(env)
    if isinstance(obs_space, spaces.Discrete):
        env = OneHotObservation(env, obs_space.n)
    if config.frame_stack > 1:
        env = FrameStack(env, config.frame_stack)
    return EpisodeStats(env)


def check_env(env, env_params, name: str) -> ActionSpec:
    """The ActionSpec of env `name`, after checking that the trainer can handle its spaces;
    raises ConfigError.

    Args:
        env: the env, unwrapped (`make_env`'s).
        env_params: its params.
        name: the env's `env.name`, named in the errors.

    Returns:
        The `ActionSpec` of its action space.

    Raises:
        ConfigError: a Dict or Tuple observation space, an unsupported action space, or an
            action mask that does not fit a categorical action.
    """
    obs_space = env.observation_space(env_params)
    if isinstance(obs_space, (spaces.Dict, spaces.Tuple)):
        raise ConfigError(
            f"env.name={name!r}: observation space {obs_space!r} is not supported; "
            "flatten it into one array in a wrapper")
    try:
        spec = analyze_action_space(env.action_space(env_params))
    except UnsupportedSpaceError as error:
        raise ConfigError(f"env.name={name!r}: {error}") from None
    mask_size = getattr(env, "action_mask_size", 0)
    if mask_size and (spec.kind != "categorical" or mask_size != spec.num_outputs):
        raise ConfigError(
            f"env.name={name!r}: its action mask has {mask_size} entries; the policy masks only "
            f"categorical actions, one entry per choice ({spec.num_outputs} here)")
    return spec


def folds_time_limit(env, env_params) -> bool:
    """Whether a gymnax env reports its time limit as termination, as pre-1.0 gymnax code
    does: one `step_env` from a reset state (the same key and action) with its clock at 0 and
    at `max_steps_in_episode - 1` gives `terminated` false at 0 and true at the limit. Run
    eagerly on the host; False where it does not apply (an env without `state.time` or
    `max_steps_in_episode`, or of another suite: their adapters keep the contract).

    Args:
        env: the env, unwrapped (`make_env`'s).
        env_params: its params.

    Returns:
        True when time-outs would be treated as terminal.
    """
    limit = getattr(env_params, "max_steps_in_episode", None)
    if not isinstance(env, Environment) or isinstance(env, SuiteEnv) or not isinstance(
            limit, numbers.Integral) or limit < 2:
        return False
    key = jax.random.key(0)
    _, state = env.reset_env(key, env_params)
    if not (dataclasses.is_dataclass(state) and hasattr(state, "time")):
        return False
    action = env.action_space(env_params).sample(key)
    late = dataclasses.replace(state, time=limit - 1)
    terminated = [bool(np.all(env.step_env(key, s, action, env_params)[3]))
                  for s in (state, late)]
    return terminated == [False, True]


def make_env(config: EnvConfig):
    """Returns (env, env_params) for `config.name`, unwrapped, with `config.params` applied to
    the env params' fields; raises ConfigError.

    Args:
        config: the `env` settings: `name` (a gymnax id, `<suite>/<id>` or `module:attr`) and
            `params`.

    Returns:
        `(env, env_params)`.

    Raises:
        ConfigError: the env cannot be found, imported or made, or a `params` key is no field
            of its params or has a value that does not fit the field.
    """
    env, env_params = _make(config.name, config)
    made_with = getattr(env, "constructor_params", ())  # keywords the suite made the env with
    overrides = {key: value for key, value in config.params.items() if key not in made_with}
    return env, _override_params(config.name, env_params, overrides)


def _override_params(name: str, env_params, overrides: dict):
    if not overrides:
        return env_params
    valid = [f.name for f in dataclasses.fields(env_params)] if dataclasses.is_dataclass(
        env_params) else []
    unknown = sorted(set(overrides) - set(valid))
    if unknown:
        raise ConfigError(
            f"env.params.{unknown[0]}: {name} params have no field {unknown[0]!r} "
            f"(fields: {', '.join(valid) or 'none'})")
    return env_params.replace(**{field: _checked_param(name, field, value,
                                                       getattr(env_params, field))
                                 for field, value in overrides.items()})


def _checked_param(name: str, field: str, value, default):
    """`value` for the env params' `field`, checked against its `default` (`_param_problem`);
    a float field's value as a float. A field whose default is not a number (an array, a
    string) takes the value as given. Raises ConfigError."""
    kind = np.asarray(default).dtype.kind if np.ndim(default) == 0 else ""
    if kind not in ("b", "i", "u", "f"):
        return value
    problem = _param_problem(field, value, kind, default)
    if problem:
        raise ConfigError(f"env.params.{field}={value!r} must be {problem} "
                          f"({name}'s default: {np.asarray(default).item()})")
    return float(value) if kind == "f" else value


def _param_problem(field: str, value, kind: str, default) -> str:
    """What `value` must be for a field whose default is `default` (of numpy kind `kind`), or
    "" when it fits (`config.number_problem`); `max_steps_in_episode` above 0."""
    problem = number_problem(value, kind, default)
    if problem in ("", ">= 0") and field == "max_steps_in_episode" and value <= 0:
        return "> 0"
    return problem


def _make(name: str, config: EnvConfig):
    if ":" in name:
        return _load_user_env(name, config)
    if is_suite_name(name):
        return make_suite_env(name, config)
    if name not in gymnax.registered_envs:
        close = difflib.get_close_matches(name, gymnax.registered_envs, n=3, cutoff=0.4)
        hint = f"did you mean {', '.join(close)}?" if close else (
            "valid ids: " + ", ".join(gymnax.registered_envs)
        )
        raise ConfigError(f"env.name={name!r} is not a gymnax environment id; {hint}")
    try:
        return gymnax.make(name)
    except URLError as error:  # MNISTBandit-bsuite downloads MNIST when it is made
        raise ConfigError(
            f"env.name={name!r} downloads its data when it is made, and the download failed "
            f"({one_line(error)}); put the files where gymnax looks or choose another env"
        ) from None
    except Exception as error:
        raise ConfigError(f"env.name={name!r} could not be made: {one_line(error)}") from None


def _load_user_env(name: str, config: EnvConfig):
    module_name, _, attr = name.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as error:
        raise ConfigError(
            f"env.name={name!r}: cannot import module {module_name!r}: {one_line(error)}"
        ) from None
    if not hasattr(module, attr):
        raise ConfigError(f"env.name={name!r}: module {module_name!r} has no attribute {attr!r}")
    target = getattr(module, attr)
    try:
        made = target()
    except Exception as error:
        raise ConfigError(
            f"env.name={name!r}: calling {attr}() failed: {one_line(error)}") from None
    env, env_params = made if isinstance(made, tuple) else (made, None)
    adapted = None if isinstance(env, Environment) else adapt_user_env(env, config, env_params)
    if adapted is not None:
        return adapted, adapted.default_params
    if not isinstance(env, Environment) and not all(
        hasattr(env, method) for method in ("reset", "step", "action_space", "default_params")
    ):
        kind = "class" if inspect.isclass(target) else "factory"
        raise ConfigError(
            f"env.name={name!r}: the {kind} returned {type(env).__name__}, not a gymnax Environment"
        )
    return env, env.default_params if env_params is None else env_params
