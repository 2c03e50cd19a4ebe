"""Brax: `env.name=brax/<name>` (`ant`, `halfcheetah`, `hopper`, `humanoid`,
`inverted_pendulum`, ...), with `env.backend=` one of Brax's physics pipelines (`generalized`,
`positional`, `spring`, `mjx`; empty: the env's own default, `generalized` for Brax's envs).

The env is Brax's raw env (`brax.envs.get_environment`), without Brax's training wrappers:
- Termination is the raw `State.done` (Hopper falling over, the inverted pendulum's pole
  tipping): terminated, no bootstrap. Brax's raw envs have no time limit of their own; the
  limit is `max_steps_in_episode` (1000, as `brax.envs.create`'s `episode_length`), reported by
  the base class as truncation. Brax's `EpisodeWrapper` would fold it into `done` and put it in
  `info["truncation"]`.
- Resets are fresh: gymnax's step (or the trainer's resets drawn ahead) calls `reset` with a new
  key, where Brax's `AutoResetWrapper` would restore the episode's cached first state.
- Actions are `Box(-1, 1, (action_size,))`, Brax's convention (its PPO squashes with tanh; the
  envs scale [-1, 1] to their actuators' ranges).
- The step is deterministic given the state; the key gymnax passes is not used.
- The state carried (`SuiteState.inner`) is Brax's `State`; with the `mjx` pipeline, less the
  zero-size arrays of MJX's `Data` (orbax cannot checkpoint them): `env.suite_state(inner)`
  gives it whole.

A Brax env object of your own (`env.name=pkg.module:attr` returning a `brax.envs.Env`) is taken
as it is; Brax's training wrappers around it (`EpisodeWrapper`, `AutoResetWrapper`,
`VmapWrapper`, `EvalWrapper`) are taken off, an `EpisodeWrapper`'s `episode_length` becoming the
time limit and its `action_repeat` kept (rewards summed over the repeats, which stop at a
termination).
"""

from __future__ import annotations

import contextlib
import logging
import math
import sys
import warnings
from typing import Any, Callable, Tuple

import jax
import jax.numpy as jnp
from gymnax.environments import spaces

from purerl.config import ConfigError, EnvConfig
from purerl.envs.suites.base import SuiteEnv, close_matches, one_line, strongly_typed

PIPELINES = ("generalized", "positional", "spring", "mjx")
EPISODE_LENGTH = 1000  # brax.envs.create's default episode_length


class _QuietMjxDevice(logging.Filter):
    """Drops MJX's "Using JAX default device: cpu:0." (logged at INFO on the root logger each
    time Brax makes MJX data without naming a device: a dozen times as a run compiles)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.msg == "Using JAX default device: %s." and "mjx" in record.pathname)


if not any(isinstance(f, _QuietMjxDevice) for f in logging.getLogger().filters):
    logging.getLogger().addFilter(_QuietMjxDevice())


def registered_envs() -> Tuple[str, ...]:
    """Brax's registered env ids.

    Returns:
        The ids, sorted.
    """
    # the suite's package, an optional extra: when one of its envs is named
    from brax import envs

    return tuple(sorted(getattr(envs, "_envs", {})))


@contextlib.contextmanager
def quiet_brax():
    """Hides Brax's warning, printed when a Brax system is loaded, that its pipelines are no
    longer maintained.

    Yields:
        None, while the warning is hidden.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Brax System, pip")
        yield


def _select(pred: jax.Array, old: Any, new: Any) -> Any:
    return jax.tree.map(lambda a, b: jax.lax.select(pred, a, b), old, new)


def repeated_step(step: Callable[[Any, jax.Array], Any], state: Any, action: jax.Array,
                  repeats: int):
    """`step(state, action)` `repeats` times, as Brax's `EpisodeWrapper` repeats an action:
    -> (state, the rewards' sum, done), except that the repeats stop at a termination (the
    state stays the terminal one rather than stepping on, which could clear `done`).

    Args:
        step: Brax's `step(state, action) -> State`.
        state: the Brax `State` of one env.
        action: float32 `[action_size]`.
        repeats: the action repeat, at least 1.

    Returns:
        `(state, reward, done)`: the last `State`, the rewards' sum and whether it ended (bool
            `[]`; with one repeat, Brax's float `done` as is).
    """
    if repeats == 1:
        new = step(state, action)
        return new, new.reward, new.done

    def body(carry, _):
        state, total, done = carry
        new = strongly_typed(step(state, action))
        total = total + jnp.where(done, 0.0, jnp.asarray(new.reward, jnp.float32))
        state = _select(done, state, new)
        return (state, total, done | (jnp.asarray(new.done) > 0.5)), None

    (state, total, done), _ = jax.lax.scan(
        body, (strongly_typed(state), jnp.float32(0.0), jnp.bool_(False)), None, length=repeats)
    return state, total, done


class BraxEnv(SuiteEnv):
    """A raw Brax env as a gymnax 1.0 `Environment` (see the module's docstring)."""

    suite_name = "brax"

    def __init__(self, env_id: str, env, max_steps_in_episode: int = EPISODE_LENGTH,
                 action_repeat: int = 1):
        self.brax_env = env
        self.action_repeat = int(action_repeat)
        action_space = spaces.Box(-1.0, 1.0, (int(env.action_size),), jnp.float32)
        super().__init__(env_id, action_space, max_steps_in_episode)

    def policy_obs(self, obs: Any) -> Any:
        """The part of a state's `obs` the policy sees (all of it).

        Args:
            obs: a Brax `State`'s `obs`.

        Returns:
            `obs`.
        """
        return obs

    def suite_reset(self, key):
        """The suite's reset of one env.

        Args:
            key: a PRNG key.

        Returns:
            `(obs, state)`: the policy's part of the Brax `State`'s obs (`policy_obs`); the
                Brax `State`.
        """
        state = self.brax_env.reset(key)
        return self.policy_obs(state.obs), state

    def suite_step(self, key, inner, action):
        """The suite's step of one env.

        Args:
            key: a PRNG key.
            inner: the Brax `State`.
            action: the action, as `action_space()` gives it.

        Returns:
            `(obs, state, reward, terminated, truncated)`; reward, terminated and truncated `[]`.
        """
        state, reward, done = repeated_step(self.brax_env.step, inner, action, self.action_repeat)
        return self.policy_obs(state.obs), state, reward, done, jnp.bool_(False)


def make(env_id: str, config: EnvConfig) -> BraxEnv:
    """The Brax env `env.name="brax/<id>"` names.

    Args:
        env_id: a Brax id (`brax.envs`).
        config: the `env` settings; `backend` the Brax pipeline (empty: the env's default).

    Returns:
        The `BraxEnv`.

    Raises:
        ConfigError: an unknown id or pipeline, or the env not made.
    """
    valid = registered_envs()
    if env_id not in valid:
        raise ConfigError(f"env.name='brax/{env_id}' is not a Brax environment; "
                          + close_matches(env_id, valid, "brax"))
    backend = config.backend
    if backend and backend not in PIPELINES:
        raise ConfigError(f"env.backend={backend!r} is not a Brax pipeline; choose one of "
                          + ", ".join(PIPELINES) + " (or leave it empty for the env's default)")
    # the suite's package, an optional extra: when one of its envs is named
    from brax import envs

    kwargs = {"backend": backend} if backend else {}
    try:
        with quiet_brax():
            env = envs.get_environment(env_id, **kwargs)
    except Exception as error:
        raise ConfigError(f"env.name='brax/{env_id}'"
                          + (f" with env.backend={backend!r}" if backend else "")
                          + f" could not be made: {one_line(error)}") from None
    return BraxEnv(env_id, env)


# -- a user's own Brax env (env.name=module:attr) ----------------------------------------------

def _training_wrappers():
    # the suite's package, an optional extra: when one of its envs is named
    from brax.envs.wrappers import training

    return training


def _is_playground(env) -> bool:

    if "mujoco_playground" not in sys.modules:
        return False
    # the suite's package, an optional extra: when one of its envs is named
    from mujoco_playground import MjxEnv

    return isinstance(env, MjxEnv)


def accepts(obj) -> bool:
    """A Brax `Env` (raw or wrapped) whose innermost env is not a Playground env.

    Args:
        obj: a user's env object (`env.name=module:attr`).

    Returns:
        True when `wrap` takes it.
    """
    # the suite's package, an optional extra: when one of its envs is named
    from brax.envs.base import Env

    if not isinstance(obj, Env):
        return False
    inner = obj
    while hasattr(inner, "env"):
        inner = inner.env
    return not _is_playground(inner)


def peel_training_wrappers(env, name: str, wrapper_base) -> Tuple[Any, int, int]:
    """`env` with the training wrappers on its outside taken off (Brax's, and Playground's
    auto-reset): -> (env, episode_length or 0, action_repeat).

    Args:
        env: a user's Brax env.
        name: its `env.name`, named in the error.
        wrapper_base: `(peel, randomizing)`, tuples of further wrapper classes to take off and
            to refuse.

    Returns:
        `(env, episode_length, action_repeat)`, as the outermost `EpisodeWrapper` had them
            (0 and 1 without one).

    Raises:
        ConfigError: a wrapper that vmaps a batch of randomized models.
    """
    training = _training_wrappers()
    peel = tuple(getattr(training, cls) for cls in (
        "EpisodeWrapper", "AutoResetWrapper", "VmapWrapper", "EvalWrapper")
        if hasattr(training, cls))
    randomizing = tuple(getattr(training, cls) for cls in ("DomainRandomizationVmapWrapper",)
                        if hasattr(training, cls))
    extra_peel, extra_randomizing = wrapper_base
    episode_length, action_repeat = 0, 1
    while True:
        if isinstance(env, randomizing + extra_randomizing):
            raise ConfigError(
                f"env.name={name!r}: {type(env).__name__} vmaps its own batch of randomized "
                "models; give the env without it (purerl vmaps the env itself)")
        if not isinstance(env, peel + extra_peel):
            return env, episode_length, action_repeat
        if isinstance(env, training.EpisodeWrapper):
            episode_length = int(env.episode_length)
            action_repeat = int(env.action_repeat)
        env = env.env


def wrap(obj, config: EnvConfig, params: Any = None) -> BraxEnv:
    """A user's Brax env (Brax envs have no separate params: `params` is unused).

    Args:
        obj: the user's env (`accepts(obj)`).
        config: the `env` settings.
        params: unused.

    Returns:
        The `BraxEnv`.

    Raises:
        ConfigError: a wrapper that vmaps randomized models, or `env.backend` other than the
            env's pipeline.
    """
    name = config.name
    env, episode_length, action_repeat = peel_training_wrappers(obj, name, ((), ()))
    if config.backend and config.backend != getattr(env, "backend", config.backend):
        raise ConfigError(
            f"env.backend={config.backend!r}: env.name={name!r} was built with the "
            f"{env.backend!r} pipeline; set the pipeline where it is made, or leave env.backend "
            "empty")
    max_steps = math.ceil(episode_length / action_repeat) if episode_length else EPISODE_LENGTH
    env_id = type(env.unwrapped).__name__
    return BraxEnv(env_id, env, max_steps, action_repeat)
