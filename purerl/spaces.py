"""Turns an environment's action space into the `ActionSpec` the policy head is built from."""

from __future__ import annotations

from typing import NamedTuple, Tuple

from gymnax.environments import spaces


class UnsupportedSpaceError(ValueError):
    """The trainer cannot build a policy for this action space."""


class ActionSpec(NamedTuple):
    """What the policy head must produce.

    num_choices: choices per control, e.g. (2,) for Discrete(2); the policy is a categorical
        factorized over the controls.
    """

    num_choices: Tuple[int, ...]

    @property
    def num_controls(self) -> int:
        return len(self.num_choices)


def analyze_action_space(space: spaces.Space) -> ActionSpec:
    """Discrete(n) -> ActionSpec((n,)); any other space raises UnsupportedSpaceError."""
    if isinstance(space, spaces.Discrete):
        if space.n < 1:
            raise UnsupportedSpaceError(f"Discrete({space.n}) has no actions")
        return ActionSpec(num_choices=(int(space.n),))
    raise UnsupportedSpaceError(
        f"action space {space!r} is not supported yet (supported: Discrete)"
    )
