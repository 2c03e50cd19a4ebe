"""The contract every suite adapter presents: a gymnax 1.0 `Environment`.

`SuiteEnv` turns a suite's own reset and step into gymnax's `reset_env` / `step_env`, so that
everything the trainer does with a gymnax env (auto-reset with fresh random resets drawn by
gymnax's `step`, resets drawn ahead, `info["final_observation"]`, the wrappers) works
unchanged. An adapter implements `suite_reset` and `suite_step`, keeping the suite's signals
apart: `terminated` (a terminal state: no bootstrap) and `truncated` (the suite's own time
limit: bootstrap). The adapter's time limit, `max_steps_in_episode` in its params
(`env.params.max_steps_in_episode=`), is reported as truncation too.

Observations: an array observation with no action mask stays as the suite gives it (images
keep their `[H, W, C]` for a CNN; integers become float32). A structured one (a NamedTuple, a
dict) is flattened: its array leaves, in the tree's order, each raveled and cast to float32,
concatenated into one
vector. An env with an action mask (`action_mask_size = n > 0`) appends its mask (1 = legal)
as the vector's last `n` entries: the network sees it, and the policy reads it there
(`action_mask_from_obs`) to give illegal actions no probability.
"""

from __future__ import annotations

import difflib
import math
from typing import Any, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct
from gymnax.environments import spaces
from gymnax.environments.environment import Environment


@struct.dataclass
class SuiteState:
    inner: Any  # the suite's own state
    time: jax.Array  # int32 [], steps taken in the episode
    truncated: jax.Array  # bool []: the last step ended the episode by a time limit


@struct.dataclass
class SuiteParams:
    max_steps_in_episode: int = 1000


def flatten_observation(obs: Any, action_mask: Optional[jax.Array] = None) -> jax.Array:
    """A structured observation's array leaves (and the mask, last) as one float32 vector
    `[D]`; an array observation with no mask keeps its shape (cast to float32 unless it is
    floating already).

    Args:
        obs: the suite's observation of one env: an array, or a pytree of arrays.
        action_mask: bool `[n]`, appended last; None: no mask.

    Returns:
        float32 `[D]` (D the leaves' sizes summed, plus n), or the array observation as it is.
    """
    leaves = jax.tree.leaves(obs)
    if action_mask is None and len(leaves) == 1 and not isinstance(obs, (dict, tuple, list)):
        obs = jnp.asarray(obs)
        return obs if jnp.issubdtype(obs.dtype, jnp.floating) else obs.astype(jnp.float32)
    if action_mask is not None:
        leaves = leaves + [action_mask]
    return jnp.concatenate([jnp.ravel(leaf).astype(jnp.float32) for leaf in leaves])


def strongly_typed(tree: Any) -> Any:
    """`tree` with no weakly typed leaves: Brax, Craftax and Playground return states whose
    Python-scalar leaves are weak from `reset` and strong from `step` (or the other way), which
    would make the env state's type differ between them and a jitted step recompile.

    Args:
        tree: a suite's state, a pytree.

    Returns:
        The same tree, each weakly typed leaf a strongly typed array of its dtype.
    """
    def strong(x):
        if isinstance(x, jax.Array) and (not x.weak_type or jax.dtypes.issubdtype(
                x.dtype, jax.dtypes.prng_key)):
            return x
        return jnp.asarray(x, dtype=jnp.result_type(x))
    return jax.tree.map(strong, tree)


def one_line(error: BaseException) -> str:
    """`Type: first line of the message`, for a ConfigError about a suite's failure.

    Args:
        error: the suite's exception.

    Returns:
        The line, without a trailing ": " when the message is empty.
    """
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}".rstrip(": ")


def close_matches(env_id: str, valid, prefix: str) -> str:
    """`did you mean ...?` for close ids, else the list of valid ids, each as `prefix/<id>`.

    Args:
        env_id: the id asked for, without `prefix/`.
        valid: the suite's ids.
        prefix: the suite's name in `env.name`.

    Returns:
        The hint, one line.
    """
    close = difflib.get_close_matches(env_id, valid, n=3, cutoff=0.5)
    if not close:  # ids differing mostly in case (`Hopper`, `cartpolebalance`)
        lowered = {name.lower(): name for name in valid}
        close = [lowered[name] for name in difflib.get_close_matches(
            env_id.lower(), list(lowered), n=3, cutoff=0.5)]
    if close:
        return "did you mean " + ", ".join(f"{prefix}/{name}" for name in close) + "?"
    return "valid ids: " + ", ".join(f"{prefix}/{name}" for name in valid)


class EmptyLeaves:
    """Takes a suite state's zero-size arrays out of the state purerl carries, and puts them
    back for the suite. MJX's `Data` (Playground, Brax's `mjx` pipeline) has many (no
    actuators' activations, no contacts, ...), and orbax cannot checkpoint a zero-size array.
    The state carried is then a tuple of the other leaves (`full(inner)` is the suite's)."""

    def __init__(self, state_shape: Any):
        leaves, self.treedef = jax.tree.flatten(state_shape)
        self.empty = {i: (leaf.shape, leaf.dtype) for i, leaf in enumerate(leaves)
                      if math.prod(leaf.shape) == 0}
        self.num_leaves = len(leaves)

    def carried(self, state: Any) -> Any:
        """The state as purerl carries it.

        Args:
            state: the suite's state, of the structure `EmptyLeaves` was made with.

        Returns:
            `state` itself when it has no zero-size leaves, else a tuple of its other leaves.
        """
        if not self.empty:
            return state
        leaves = self.treedef.flatten_up_to(state)
        return tuple(leaf for i, leaf in enumerate(leaves) if i not in self.empty)

    def full(self, inner: Any) -> Any:
        """The suite's state of what `carried` gave.

        Args:
            inner: `carried`'s value.

        Returns:
            The suite's state, its zero-size leaves zeros again.
        """
        if not self.empty:
            return inner
        kept = iter(inner)
        return jax.tree.unflatten(self.treedef, [
            jnp.zeros(*self.empty[i]) if i in self.empty else next(kept)
            for i in range(self.num_leaves)])


def action_mask_from_obs(obs: jax.Array, mask_size: int) -> jax.Array:
    """The action mask an env appended to its observations `[..., D]`: bool `[..., mask_size]`
    (with frame history, the newest frame's, which is last).

    Args:
        obs: observations `[..., D]`, their last `mask_size` entries the mask.
        mask_size: the env's `action_mask_size`.

    Returns:
        bool `[..., mask_size]`, True where an action is legal.
    """
    return obs[..., obs.shape[-1] - mask_size:] > 0.5


class SuiteEnv(Environment):
    """A suite's env as a gymnax `Environment`. Subclasses set `suite_name`, `env_id`,
    `action_space_` and implement `suite_reset`, `suite_step` (and, with an action mask,
    `action_mask_size` and `suite_action_mask`)."""

    action_mask_size: int = 0

    def __init__(self, env_id: str, action_space: spaces.Space, max_steps_in_episode: int):
        super().__init__()
        self.env_id = env_id
        self.action_space_ = action_space
        self.default_max_steps = int(max_steps_in_episode)
        def observed_reset(key):  # the reset traced once, for the two shapes it gives
            obs, inner = self.suite_reset(key)
            return self._observe(obs, inner), inner

        obs_shape, inner_shape = jax.eval_shape(observed_reset, jax.random.key(0))
        self.empty_leaves = EmptyLeaves(inner_shape)
        self.obs_shape = tuple(obs_shape.shape)
        self.obs_dtype = obs_shape.dtype

    # -- what an adapter implements ------------------------------------------------------
    def suite_reset(self, key: jax.Array) -> Tuple[Any, Any]:
        """-> (the suite's observation, the suite's state).

        Args:
            key: a PRNG key.

        Returns:
            `(obs, state)`, the suite's own, of one env.
        """
        raise NotImplementedError

    def suite_step(self, key: jax.Array, inner: Any, action) -> Tuple[Any, Any, jax.Array,
                                                                      jax.Array, jax.Array]:
        """-> (observation, state, reward, terminated, truncated by the suite's own limit).

        Args:
            key: a PRNG key.
            inner: the suite's state (`suite_state`).
            action: the action of one env, as the suite takes it.

        Returns:
            `(obs, state, reward, terminated, truncated)`; reward, terminated and truncated
                scalars.
        """
        raise NotImplementedError

    def suite_action_mask(self, inner: Any) -> Optional[jax.Array]:
        """bool `[action_mask_size]`, True where an action is legal; None without a mask.

        Args:
            inner: the suite's state.

        Returns:
            The mask, or None.
        """
        return None

    def suite_state(self, inner: Any) -> Any:
        """The suite's own state of `SuiteState.inner` (which lacks its zero-size arrays).

        Args:
            inner: `SuiteState.inner`.

        Returns:
            The suite's state, as `suite_step` takes it.
        """
        return self.empty_leaves.full(inner)

    # -- gymnax's Environment ------------------------------------------------------------
    @property
    def name(self) -> str:
        """`<suite>/<id>`, as `env.name` gives it."""
        return f"{self.suite_name}/{self.env_id}"

    @property
    def default_params(self) -> SuiteParams:
        """`SuiteParams` with the adapter's time limit."""
        return SuiteParams(max_steps_in_episode=self.default_max_steps)

    def _observe(self, obs: Any, inner: Any) -> jax.Array:
        return flatten_observation(obs, self.suite_action_mask(inner))

    def reset_env(self, key: jax.Array, params: SuiteParams):
        """gymnax's reset of one env: the suite's reset, its observation flattened
        (`flatten_observation`), the episode clock at 0.

        Args:
            key: a PRNG key.
            params: the `SuiteParams` (unused).

        Returns:
            `(obs, SuiteState)`, obs `[*obs_shape]`.
        """
        obs, inner = self.suite_reset(key)
        return self._observe(obs, inner), SuiteState(self._carried(inner), jnp.int32(0),
                                                     jnp.bool_(False))

    def _carried(self, inner: Any) -> Any:
        return self.empty_leaves.carried(strongly_typed(inner))

    def step_env(self, key: jax.Array, state: SuiteState, action, params: SuiteParams):
        """gymnax's step of one env, without the auto-reset: the suite's step, truncated by the
        suite's own limit or at `params.max_steps_in_episode` steps, never when terminated.

        Args:
            key: a PRNG key.
            state: the `SuiteState`.
            action: the action, as the suite takes it.
            params: the `SuiteParams`.

        Returns:
            `(obs, state, reward, terminated, info)`: obs `[*obs_shape]`, reward float32 `[]`,
                terminated bool `[]`, info empty; the truncation is in `state.truncated`.
        """
        obs, inner, reward, terminated, suite_truncated = self.suite_step(
            key, self.suite_state(state.inner), action)
        time = state.time + 1
        terminated = jnp.asarray(terminated, bool)
        truncated = (jnp.asarray(suite_truncated, bool) | (time >= params.max_steps_in_episode)
                     ) & ~terminated
        new_state = SuiteState(self._carried(inner), time, truncated)
        return (self._observe(obs, inner), new_state, jnp.asarray(reward, jnp.float32),
                terminated, {})

    def is_truncated(self, state: SuiteState, params: SuiteParams) -> jax.Array:
        """Whether the last step ended the episode by a time limit.

        Args:
            state: the `SuiteState`.
            params: the `SuiteParams` (unused).

        Returns:
            bool `[]`.
        """
        return state.truncated

    def observation_space(self, params: SuiteParams) -> spaces.Box:
        """An unbounded Box of the observation.

        Args:
            params: the `SuiteParams` (unused).

        Returns:
            `Box` of shape `obs_shape`: float32, or the suite's floating dtype.
        """
        dtype = self.obs_dtype if jnp.issubdtype(self.obs_dtype, jnp.floating) else jnp.float32
        return spaces.Box(-np.inf, np.inf, self.obs_shape, dtype)

    def action_space(self, params: Optional[SuiteParams] = None) -> spaces.Space:
        """The adapter's action space, `action_space_`.

        Args:
            params: the `SuiteParams` (unused).

        Returns:
            The gymnax space.
        """
        return self.action_space_

    @property
    def num_actions(self) -> int:
        """A Discrete space's choices, or the size of the action's shape."""
        space = self.action_space_
        if isinstance(space, spaces.Discrete):
            return int(space.n)
        return math.prod(space.shape)
