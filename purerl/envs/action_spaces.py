"""Action spaces: purerl's MultiDiscrete, and `analyze_action_space` -> `ActionSpec`."""

from __future__ import annotations

import math
from typing import NamedTuple, Sequence, Tuple

import jax
import jax.numpy as jnp
import numpy as np
from gymnax.environments import spaces


class UnsupportedSpaceError(ValueError):
    """The trainer cannot build a policy for this action space."""


class MultiDiscrete(spaces.Space):
    """k independent discrete controls; control i takes values in [0, nvec[i]).

    Actions are int32 arrays of shape `[k]`.
    """

    def __init__(self, nvec: Sequence[int]):
        self.nvec = tuple(int(n) for n in nvec)
        if not self.nvec or min(self.nvec) < 1:
            raise ValueError(f"MultiDiscrete needs at least one control of >= 1 choice, got {nvec}")
        self.shape = (len(self.nvec),)
        self.dtype = jnp.int32

    def __repr__(self) -> str:
        return f"MultiDiscrete({list(self.nvec)})"

    def sample(self, key: jax.Array) -> jax.Array:
        """A uniformly random action.

        Args:
            key: a PRNG key.

        Returns:
            int32 `[k]`, each control's choice in `[0, nvec[i])`.
        """
        return jax.random.randint(key, self.shape, 0, jnp.asarray(self.nvec), dtype=jnp.int32)

    def contains(self, x: jax.Array) -> jax.Array:
        """Whether `x` is an action of this space.

        Args:
            x: integers `[k]`.

        Returns:
            bool `[]`.
        """
        x = jnp.asarray(x)
        return jnp.all((x >= 0) & (x < jnp.asarray(self.nvec)))


class ActionSpec(NamedTuple):
    """What the policy head produces and how its actions reach the env.

    kind: "categorical" (a categorical per control, factorized) or "gaussian" (diagonal).
    num_choices: choices per control (categorical); () for gaussian.
    shape: the env's action shape: () for Discrete, (k,) for MultiDiscrete / Tuple, the Box shape.
    low, high: the Box's bounds, flattened (gaussian); () otherwise.
    as_tuple: the env takes a tuple of ints (a gymnax Tuple of Discrete spaces).
    """

    kind: str
    num_choices: Tuple[int, ...] = ()
    shape: Tuple[int, ...] = ()
    low: Tuple[float, ...] = ()
    high: Tuple[float, ...] = ()
    as_tuple: bool = False

    @property
    def num_controls(self) -> int:
        """Number of independent controls (categorical) or action dimensions (gaussian)."""
        return len(self.num_choices) if self.kind == "categorical" else math.prod(self.shape)

    @property
    def num_outputs(self) -> int:
        """Width of the policy head: all logits, or the Gaussian means."""
        return sum(self.num_choices) if self.kind == "categorical" else self.num_controls

    def to_env(self, action: jax.Array):
        """A flat action (`[..., num_controls]`) as the env takes it: clipped to a Box's bounds
        and reshaped, the scalar of a Discrete, or a tuple for a Tuple space.

        Args:
            action: `[..., num_controls]`, as `ActionDistribution.sample` gives it.

        Returns:
            `[..., *shape]`, or a tuple of `num_controls` arrays `[...]` for a Tuple space.
        """
        batch = action.shape[:-1]
        if self.kind == "gaussian":
            low = jnp.asarray(self.low, jnp.float32)
            high = jnp.asarray(self.high, jnp.float32)
            return jnp.clip(action, low, high).reshape(batch + self.shape)
        if self.as_tuple:
            return tuple(action[..., i] for i in range(self.num_controls))
        return action.reshape(batch + self.shape)


def analyze_action_space(space: spaces.Space) -> ActionSpec:
    """The ActionSpec of a Discrete, MultiDiscrete, Tuple-of-Discrete or bounded Box space.

    As in trax, a MultiDiscrete space with equal choices per control gives
    (controls, choices) = (len(nvec), nvec[0]). Anything else raises UnsupportedSpaceError.

    Args:
        space: the env's action space (gymnax's, or `MultiDiscrete`).

    Returns:
        The `ActionSpec`.

    Raises:
        UnsupportedSpaceError: another space, a control with no choices, or a Box with
            infinite bounds.
    """
    if isinstance(space, spaces.Discrete):
        _check_choices(space, [space.n])
        return ActionSpec("categorical", num_choices=(int(space.n),))
    if isinstance(space, MultiDiscrete):
        return ActionSpec("categorical", num_choices=space.nvec, shape=space.shape)
    if isinstance(space, spaces.Tuple):
        parts = list(space.spaces)
        if not parts or not all(isinstance(p, spaces.Discrete) for p in parts):
            raise UnsupportedSpaceError(
                f"action space {space!r}: only a Tuple of Discrete spaces is supported")
        _check_choices(space, [p.n for p in parts])
        return ActionSpec("categorical", num_choices=tuple(int(p.n) for p in parts),
                          shape=(len(parts),), as_tuple=True)
    if isinstance(space, spaces.Box):
        shape = tuple(int(d) for d in space.shape)
        low = np.broadcast_to(np.asarray(space.low, np.float64), shape).ravel()
        high = np.broadcast_to(np.asarray(space.high, np.float64), shape).ravel()
        if not (np.isfinite(low).all() and np.isfinite(high).all()):
            raise UnsupportedSpaceError(
                f"action space {space!r} has infinite bounds; a Gaussian policy needs finite ones")
        return ActionSpec("gaussian", shape=shape, low=tuple(low.tolist()),
                          high=tuple(high.tolist()))
    raise UnsupportedSpaceError(
        f"action space {space!r} is not supported (supported: Discrete, MultiDiscrete, "
        "Tuple of Discrete, bounded Box)")


def _check_choices(space, choices) -> None:
    if min(choices) < 1:
        raise UnsupportedSpaceError(f"action space {space!r} has a control with no choices")
