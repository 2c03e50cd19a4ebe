"""Jumanji envs: `env.name=jumanji/<id>`, `<id>` one of `jumanji.registered_environments()`
(`Snake-v1`, `Maze-v0`, `Game2048-v1`, `Tetris-v0`, ...), made by `jumanji.make(<id>)` with its
registered settings. A user's own `jumanji.Environment` (other constructor arguments, a
`jumanji.wrappers.MultiToSingleWrapper`, ...) comes by `env.name=module:attr`; jumanji's
auto-reset and vmap wrappers are refused (purerl resets and batches itself).

Signals: Jumanji's step returns a dm_env-style `TimeStep`. A LAST step with discount 0 is
`terminated`; a LAST step with discount > 0 is `truncated` (Connector, LevelBasedForaging end
their time limit so). Most Jumanji envs (Snake, Maze, Tetris, PacMan, Cleaner, RubiksCube,
RobotWarehouse, ...) end their own time limit (`env.time_limit`) with discount 0 as well, so a
LAST step taken when the episode has reached `env.time_limit` steps is `truncated` too (on
that one step a true termination would count as truncation). purerl's `max_steps_in_episode`
defaults to `env.time_limit` (10_000 for an env without one: those end by themselves).
Multi-agent envs are driven by one policy: the reward is the sum of the agents' rewards, the
episode terminates when every agent's discount is 0.

Observations: Jumanji's NamedTuple observation is flattened (`base.flatten_observation`: its
array leaves in field order, raveled, float32) without its `action_mask` field, which becomes
the env's mask (the last `action_mask_size` entries). A `step_count` field is divided by
`env.time_limit` when the env has one (a step count of thousands would swamp the network).
For Snake-v1: grid 12x12x5 (720), step_count (1), then the mask (4): 725 entries.

Actions and masks, from `env.action_spec`:
- `DiscreteArray(n)` -> `Discrete(n)`, mask `[n]`.
- `MultiDiscreteArray(nvec)` with a mask of shape `nvec` (a joint mask over the whole action:
  Tetris, Minesweeper, Sudoku, BinPack, FlatPack) -> `Discrete(prod(nvec))`, the action index
  unraveled (C order) into the suite's action, so that the mask is honoured exactly.
- `MultiDiscreteArray(nvec)` with a mask `[k, n]` (one row per control: JobShop, the
  multi-agent envs), or without a mask -> `MultiDiscrete(nvec)`, mask raveled to `[k * n]`
  (the factorized categorical's layout). An integer `BoundedArray` (MultiCVRP) likewise, with
  `n` taken from its mask.
- A float `BoundedArray` (SearchAndRescue) -> `Box` with its bounds.

Keys: Jumanji's state carries its own key (drawn at reset); the step's key is not used.
Sokoban-v0 downloads its levels from huggingface.co when it is made: offline and uncached
that is a one-line ConfigError.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Optional, Tuple
from urllib.error import URLError

import jax
import jax.numpy as jnp
import jumanji
import numpy as np
from flax import struct
from gymnax.environments import spaces
from jumanji import specs, wrappers as jumanji_wrappers
from jumanji.types import StepType

from purerl.config import ConfigError, EnvConfig
from purerl.envs.action_spaces import MultiDiscrete
from purerl.envs.suites.base import SuiteEnv, close_matches, one_line

# purerl's time limit for an env without one of its own (Jumanji's envs without `time_limit`,
# Game2048, Knapsack, TSP, BinPack, ..., end by themselves; this only bounds a stuck episode)
NO_TIME_LIMIT_STEPS = 10_000
MASK_FIELD = "action_mask"
STEP_COUNT_FIELD = "step_count"
# Wrappers that reset or batch: purerl does both itself
REFUSED_WRAPPERS = (jumanji_wrappers.AutoResetWrapper, jumanji_wrappers.VmapWrapper)


@struct.dataclass
class JumanjiInner:
    state: Any  # the Jumanji env's state
    mask: Any  # bool [action_mask_size], the mask of the current observation; None without one
    step_count: jax.Array  # int32 [], steps in the episode (for the suite's own time limit)


def _field(obs: Any, name: str) -> Optional[Any]:
    if isinstance(obs, dict):
        return obs.get(name)
    if hasattr(obs, "_fields") or dataclasses.is_dataclass(obs):
        return getattr(obs, name, None)
    return None


def _replace_field(obs: Any, name: str, value: Any) -> Any:
    if isinstance(obs, dict):
        out = {k: v for k, v in obs.items() if k != name}
        if value is not None:
            out[name] = value
        return out
    if hasattr(obs, "_replace"):
        return obs._replace(**{name: value})
    return dataclasses.replace(obs, **{name: value})


class JumanjiEnv(SuiteEnv):
    """A Jumanji `Environment` (or one wrapped by jumanji's non-resetting wrappers)."""

    suite_name = "jumanji"

    def __init__(self, env_id: str, env: Any):
        self.env = env
        base = env.unwrapped
        limit = getattr(base, "time_limit", None)
        self.suite_time_limit = int(limit) if isinstance(limit, (int, np.integer)) and limit > 0 \
            else None
        spec = env.action_spec
        self.action_dtype = jnp.dtype(spec.dtype)
        self.action_shape = tuple(spec.shape)
        _, timestep = jax.eval_shape(env.reset, jax.random.PRNGKey(0))
        mask = _field(timestep.observation, MASK_FIELD)
        mask_shape = None if mask is None else tuple(mask.shape)
        space, self.mask_kind, self.joint_nvec = self._action_space(env_id, spec, mask_shape)
        self.action_mask_size = 0 if mask_shape is None else math.prod(mask_shape)
        super().__init__(env_id, space, self.suite_time_limit or NO_TIME_LIMIT_STEPS)

    def _action_space(self, env_id: str, spec: Any, mask_shape: Optional[Tuple[int, ...]]):
        """(the gymnax space, how the mask maps onto it, the nvec a flat action unravels to)."""
        def refuse(why: str):
            return ConfigError(f"env.name='jumanji/{env_id}': {why}")

        if isinstance(spec, specs.DiscreteArray):
            n = int(spec.num_values)
            if mask_shape not in (None, (n,)):
                raise refuse(f"action_mask of shape {mask_shape} does not fit Discrete({n})")
            return spaces.Discrete(n), "discrete", None
        if isinstance(spec, specs.MultiDiscreteArray) or (
                isinstance(spec, specs.BoundedArray) and jnp.issubdtype(spec.dtype, jnp.integer)):
            if isinstance(spec, specs.MultiDiscreteArray):
                nvec = np.asarray(spec.num_values).reshape(-1)
            else:
                low, high = (np.broadcast_to(np.asarray(b), spec.shape).reshape(-1)
                             for b in (spec.minimum, spec.maximum))
                if np.any(low != 0):
                    raise refuse(f"integer actions from {low.tolist()} (not 0) are not supported")
                nvec = high + 1
                if mask_shape is not None and len(mask_shape) == 2 and \
                        mask_shape[0] == nvec.size:  # MultiCVRP: the mask says the choices
                    nvec = np.full(nvec.size, mask_shape[1])
            nvec = tuple(int(n) for n in nvec)
            if mask_shape is None:
                return MultiDiscrete(nvec), None, None
            if mask_shape == nvec:
                return spaces.Discrete(math.prod(nvec)), "joint", nvec
            if mask_shape == (*self.action_shape, max(nvec)) and len(set(nvec)) == 1:
                return MultiDiscrete(nvec), "factorized", None
            raise refuse(f"action_mask of shape {mask_shape} fits neither the joint actions "
                         f"{list(nvec)} nor one row per control")
        if isinstance(spec, specs.BoundedArray):
            low = np.broadcast_to(np.asarray(spec.minimum, np.float32), spec.shape)
            high = np.broadcast_to(np.asarray(spec.maximum, np.float32), spec.shape)
            return spaces.Box(low, high, tuple(spec.shape), jnp.float32), None, None
        if isinstance(spec, specs.Array) and jnp.issubdtype(spec.dtype, jnp.floating):
            return spaces.Box(-np.inf, np.inf, tuple(spec.shape), jnp.float32), None, None
        raise refuse(f"action spec {spec!r} is not supported (DiscreteArray, "
                     "MultiDiscreteArray, BoundedArray)")

    # -- between purerl's and the suite's forms ------------------------------------------
    def suite_action(self, action: jax.Array) -> jax.Array:
        """purerl's action (one index for a joint mask) as the jumanji env takes it.

        Args:
            action: int32 `[]` for `Discrete`, `[k]` for `MultiDiscrete`, float32 for a `Box`.

        Returns:
            The action in the env's `action_spec` shape and dtype.
        """
        if self.mask_kind == "joint":
            action = jnp.stack(jnp.unravel_index(jnp.asarray(action), self.joint_nvec))
        return jnp.asarray(action).astype(self.action_dtype).reshape(self.action_shape)

    def _split(self, obs: Any):
        """(the observation without its mask, step count scaled; the mask raveled or None)."""
        mask = _field(obs, MASK_FIELD)
        if mask is not None:
            obs = _replace_field(obs, MASK_FIELD, None)
            mask = jnp.ravel(mask).astype(bool)
        step_count = _field(obs, STEP_COUNT_FIELD)
        if step_count is not None and self.suite_time_limit:
            obs = _replace_field(obs, STEP_COUNT_FIELD,
                                 jnp.asarray(step_count, jnp.float32) / self.suite_time_limit)
        return obs, mask

    # -- SuiteEnv ------------------------------------------------------------------------
    def suite_reset(self, key: jax.Array):
        """The suite's reset of one env.

        Args:
            key: a PRNG key.

        Returns:
            `(obs, state)`: the observation without its mask, `step_count` scaled; a
                `JumanjiInner`: jumanji's state, the mask, the step count.
        """
        state, timestep = self.env.reset(key)
        obs, mask = self._split(timestep.observation)
        return obs, JumanjiInner(state, mask, jnp.int32(0))

    def suite_step(self, key: jax.Array, inner: JumanjiInner, action):
        """The suite's step of one env.

        Args:
            key: a PRNG key.
            inner: `JumanjiInner`: jumanji's state, the mask, the step count.
            action: the action, as `action_space()` gives it.

        Returns:
            `(obs, state, reward, terminated, truncated)`; reward, terminated and truncated `[]`.
        """
        state, timestep = self.env.step(inner.state, self.suite_action(action))
        obs, mask = self._split(timestep.observation)
        step_count = inner.step_count + 1
        last = timestep.step_type == StepType.LAST
        at_suite_limit = (step_count >= self.suite_time_limit) if self.suite_time_limit \
            else jnp.bool_(False)
        terminated = last & jnp.all(timestep.discount == 0) & ~at_suite_limit
        truncated = last & ~terminated
        reward = jnp.sum(jnp.asarray(timestep.reward, jnp.float32))
        return obs, JumanjiInner(state, mask, step_count), reward, terminated, truncated

    def suite_action_mask(self, inner: JumanjiInner) -> Optional[jax.Array]:
        """The mask the last step's observation held.

        Args:
            inner: the `JumanjiInner`.

        Returns:
            bool `[action_mask_size]`, or None for an env without a mask.
        """
        return inner.mask


def _is_download_error(error: Exception) -> bool:
    module = type(error).__module__ or ""
    return isinstance(error, (OSError, URLError, ConnectionError)) or module.startswith(
        ("huggingface_hub", "requests", "urllib3"))


def make(env_id: str, config: EnvConfig) -> JumanjiEnv:
    """The Jumanji env `env.name="jumanji/<id>"` names.

    Args:
        env_id: a Jumanji id (`jumanji.registered_environments()`).
        config: the `env` settings (unused).

    Returns:
        The `JumanjiEnv`.

    Raises:
        ConfigError: an unknown id, or the env not made (its data not downloaded).
    """
    registered = sorted(jumanji.registered_environments())
    if env_id not in registered:
        raise ConfigError(f"env.name='jumanji/{env_id}' is not a Jumanji environment id; "
                          + close_matches(env_id, registered, "jumanji"))
    try:
        env = jumanji.make(env_id)
    except Exception as error:
        if _is_download_error(error):
            raise ConfigError(
                f"env.name='jumanji/{env_id}' downloads its data when it is made (Sokoban: its "
                f"levels from huggingface.co), and that failed ({one_line(error)}); connect, "
                "or put the files in the Hugging Face cache") from None
        raise ConfigError(
            f"env.name='jumanji/{env_id}' could not be made: {one_line(error)}") from None
    return JumanjiEnv(env_id, env)


def accepts(obj: Any) -> bool:
    """Whether `obj` is a Jumanji env this adapter wraps.

    Args:
        obj: a user's env object (`env.name=module:attr`).

    Returns:
        True when `wrap` takes it.
    """
    return isinstance(obj, jumanji.Environment)


def wrap(obj: Any, config: EnvConfig, params: Any = None) -> JumanjiEnv:
    """A user's Jumanji env, its settings (`time_limit` included) its own.

    Args:
        obj: the user's env (`accepts(obj)`).
        config: the `env` settings.
        params: unused (the env holds its settings).

    Returns:
        The `JumanjiEnv`.

    Raises:
        ConfigError: an auto-reset or vmap wrapper.
    """
    env = obj
    while isinstance(env, jumanji_wrappers.Wrapper):
        if isinstance(env, REFUSED_WRAPPERS):
            raise ConfigError(
                f"env.name={config.name!r}: {type(env).__name__} resets or batches the env; "
                "give the env without it (purerl auto-resets and vmaps itself)")
        env = env._env
    return JumanjiEnv(type(obj.unwrapped).__name__, obj)
