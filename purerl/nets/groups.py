"""Separate parameters per group of agents (`marl.share_params=false`): one network of the
settings' kind per group, each lane acting and learning with its own group's.

A lane's observation starts with the one-hot of its agent's group `[G]` (its first entries, an
image's first channels: `purerl.nets.multi_agent.with_group_ids`), so that any minibatch, its
samples shuffled across agents, still knows each sample's group. Every group's network runs on
the lanes with that one-hot dropped, and each lane keeps its own group's outputs: the selection
gives the other groups' parameters no gradient from it. The cost is `G` times the network's
work per lane; the rollout, GAE, the learner and the memory stay as they are for shared
parameters.
"""

from __future__ import annotations

import functools
from typing import Any, Sequence, Tuple

import flax.linen as nn
import jax
import jax.numpy as jnp

from purerl.nets.networks import RecurrentActorCriticNetwork
from purerl.nets.recurrent import StepOfUnroll


def lane_group(obs: jax.Array, num_groups: int, batch_ndim: int) -> jax.Array:
    """int32 `[*batch]`: each observation's group, the largest of its first `num_groups`
    entries (an image's first channels at its first pixel); observation normalization keeps
    the own group's entry the only positive one.

    Args:
        obs: `[*batch, *obs_shape]`, the group's one-hot first along the last axis.
        num_groups: the groups `G`.
        batch_ndim: the leading batch axes of `obs`.

    Returns:
        The groups.
    """
    one_hot = obs[..., :num_groups].reshape(*obs.shape[:batch_ndim], -1, num_groups)
    return jnp.argmax(one_hot[..., 0, :], axis=-1).astype(jnp.int32)


def select_groups(group: jax.Array, outputs: Sequence[Any]) -> Any:
    """Each lane's outputs from its own group's: `outputs[group[i]]` at lane `i`, leaf by leaf.

    Args:
        group: int32 `[*batch]`.
        outputs: one pytree per group, of the same structure, each leaf `[*batch, ...]`.

    Returns:
        The pytree of the selected leaves.
    """
    def select(*leaves):
        index = group.reshape(group.shape + (1,) * (leaves[0].ndim - group.ndim))
        return functools.reduce(
            lambda chosen, g: jnp.where(index == g, leaves[g], chosen),
            range(1, len(leaves)), leaves[0])

    return jax.tree.map(select, *outputs)


class _Groups(nn.Module):
    """What both grouped networks share: `num_groups` copies of `network`, each with its own
    parameters (`groups_<g>`), and their step variables."""

    network: nn.Module  # one group's network, reading observations without the group one-hot
    num_groups: int

    def setup(self):
        self.groups = [self.network.clone(parent=None) for _ in range(self.num_groups)]

    def _split(self, obs: jax.Array, batch_ndim: int) -> Tuple[jax.Array, jax.Array]:
        """`(group [*batch], obs without the group one-hot)`."""
        return lane_group(obs, self.num_groups, batch_ndim), obs[..., self.num_groups:]

    def step_variables(self, variables: Any) -> Any:
        """Each group's network's step variables (`ActorCriticNetwork.step_variables`), under
        its name in every collection.

        Args:
            variables: the network's variables, `{"params": {"groups_<g>": ...}}`.

        Returns:
            The variables to act with.
        """
        prepared = {}
        for g in range(self.num_groups):
            name = f"groups_{g}"
            own = self.network.step_variables({"params": variables["params"][name]})
            for collection, tree in own.items():
                if collection != "params":
                    prepared.setdefault(collection, {})[name] = tree
        return {**variables, **prepared}


class GroupedActorCritic(_Groups):
    """An `ActorCriticNetwork` with separate parameters per group of agents: `network`'s
    outputs of each lane's group, the group read from its observation's first entries."""

    @property
    def shared(self) -> bool:
        """As the group's network: one call gives both the policy and the value."""
        return self.network.shared

    def _per_group(self, method: str, obs: jax.Array, batch_ndim: int) -> Any:
        group, obs = self._split(obs, batch_ndim)
        return select_groups(group, [getattr(module, method)(obs, batch_ndim)
                                     for module in self.groups])

    def __call__(self, obs: jax.Array, batch_ndim: int = 1) -> Tuple[Any, ...]:
        """`[*batch, *obs_shape]` -> `(policy_out, value [*batch], *extras)`, each lane its
        group's."""
        return self._per_group("__call__", obs, batch_ndim)

    def policy(self, obs: jax.Array, batch_ndim: int = 1) -> Any:
        """`__call__`'s policy output alone (`ActorCriticNetwork.policy`)."""
        return self._per_group("policy", obs, batch_ndim)

    def value(self, obs: jax.Array, batch_ndim: int = 1) -> jax.Array:
        """`__call__`'s value alone `[*batch]` (`ActorCriticNetwork.value`)."""
        return self._per_group("value", obs, batch_ndim)


class GroupedRecurrentActorCritic(StepOfUnroll, _Groups):
    """A `RecurrentActorCriticNetwork` with separate parameters per group of agents: each
    lane's carry advanced by its own group's cells."""

    @property
    def carry_size(self) -> int:
        """The group's network's carry width C."""
        return self.network.carry_size

    def unroll(self, carry: jax.Array, obs: jax.Array, first: jax.Array) -> Tuple[Any, ...]:
        """`T` steps of each lane's group (`RecurrentActorCriticNetwork.unroll`).

        Args:
            carry: `[B, C]`.
            obs: `[T, B, *obs_shape]`.
            first: bool `[T, B]`.

        Returns:
            `(carry [B, C], policy_out [T, B, ...], value [T, B])`.
        """
        group, obs = self._split(obs, 2)
        outputs = [module.unroll(carry, obs, first) for module in self.groups]
        final = select_groups(group[0], [out[0] for out in outputs])
        return (final, *select_groups(group, [out[1:] for out in outputs]))

    def value(self, carry: jax.Array, obs: jax.Array, first: jax.Array) -> jax.Array:
        """One step's value `[B]` of each lane's group (`RecurrentActorCriticNetwork.value`)."""
        group, obs = self._split(obs, 1)
        return select_groups(group, [module.value(carry, obs, first) for module in self.groups])


def grouped_network(network: nn.Module, num_groups: int) -> nn.Module:
    """`network` with separate parameters for each of `num_groups` groups of agents.

    Args:
        network: the network of one group (`purerl.nets.networks.make_network`'s), reading
            the lanes' observations without their group one-hot.
        num_groups: the groups `G` >= 2.

    Returns:
        A `GroupedRecurrentActorCritic` where `network` has memory, else a
            `GroupedActorCritic`.
    """
    if isinstance(network, RecurrentActorCriticNetwork):
        return GroupedRecurrentActorCritic(network, num_groups)
    return GroupedActorCritic(network, num_groups)
