"""The agent: what training and evaluation share about acting in the envs.

`make_agent(config, env, env_params) -> Agent`: the env's action spec, the policy's
distribution, the network, and the env as the trainer steps it (wrapped: auto-reset, one-hot,
frame stack, episode stats), vmapped over envs; `Agent.policy_step` acts with or without a
recurrent policy's `Memory`.
"""

from __future__ import annotations

import functools
from typing import Callable, NamedTuple, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np

from purerl.config import Config
from purerl.distributions import ActionDistribution
from purerl.envs import check_env, takes_drawn_resets, wrap_env
from purerl.envs.normalization import network_input
from purerl.envs.suites.base import action_mask_from_obs
from purerl.networks import ActorCritic, ActorCriticBase, make_network
from purerl.recurrent import RecurrentActorCritic
from purerl.spaces import ActionSpec


class Memory(NamedTuple):
    """A recurrent policy's memory of each of `B` envs."""

    carry: jax.Array  # `[B, carry_size]` float32, the cells' states after the last step
    first: jax.Array  # bool `[B]`: the env's current observation is its episode's first


class Agent(NamedTuple):
    spec: ActionSpec
    obs_shape: Tuple[int, ...]  # of the wrapped env's observations
    policy: ActionDistribution
    network: ActorCriticBase  # ActorCritic, or a RecurrentActorCritic (`recurrent`)
    # (obs_stats, obs [..., *obs_shape]) -> the network's input: standardized with the running
    # statistics when env.normalize_obs, else obs itself
    observe: Callable
    reset_envs: Callable  # (keys [B], env_params) -> (obs [B, ...], env_state [B])
    # (keys [B], env_state [B], action [B], env_params, resets) -> six values [B]; `resets`
    # (from `draw_resets`, or None to draw them inside) are the base env's (obs, state) [B]
    step_envs: Callable
    draw_resets: Optional[Callable]  # (keys [B], env_params) -> resets; None: env can't take them
    # > 0: the env appends its action mask to its observations (`purerl.envs.suites.base`);
    # the policy gives illegal actions no probability
    action_mask_size: int = 0

    @property
    def recurrent(self) -> bool:
        return isinstance(self.network, RecurrentActorCritic)

    def example_inputs(self) -> Tuple:
        """Inputs of one step of one env, to initialize the network with."""
        obs = np.zeros((1, *self.obs_shape), np.float32)
        if not self.recurrent:
            return (obs,)
        return np.zeros((1, self.network.carry_size), np.float32), obs, np.ones((1,), bool)

    def initial_memory(self, num_envs: int) -> Optional[Memory]:
        """The memory of `num_envs` envs at their episodes' start; None for a feed-forward
        policy."""
        if not self.recurrent:
            return None
        return Memory(self.network.initial_carry((num_envs,)), jnp.ones((num_envs,), bool))

    def action_mask(self, obs: jax.Array) -> Optional[jax.Array]:
        """bool `[..., num_actions]`, the legal actions at observations `obs [..., *obs_shape]`
        (as the env returned them); None for an env without a mask."""
        return action_mask_from_obs(obs, self.action_mask_size) if self.action_mask_size else None

    def masked(self, policy_out, mask: Optional[jax.Array]):
        """The policy's output with the actions illegal under `mask` made impossible."""
        return policy_out if mask is None else self.policy.masked(policy_out, mask)

    def policy_step(self, params, obs_stats, obs: jax.Array, memory: Optional[Memory]):
        """The policy's output for observations `obs [B, *obs_shape]` (as the env returned
        them) and, for a recurrent policy, the value `[B]` and the carry after this step (its
        memory before any reset): `(policy_out, value or None, carry or None)`. A feed-forward
        policy with separate towers runs its policy tower alone (value None)."""
        network_obs, mask = self.observe(obs_stats, obs), self.action_mask(obs)
        if memory is not None:
            carry, policy_out, value = self.network.apply(params, memory.carry, network_obs,
                                                          memory.first)
            return self.masked(policy_out, mask), value, carry
        if self.network.shared:  # one trunk gives both
            policy_out, value = self.network.apply(params, network_obs)
            return self.masked(policy_out, mask), value, None
        policy_out = self.network.apply(params, network_obs, method=ActorCritic.policy)
        return self.masked(policy_out, mask), None, None


def make_agent(config: Config, env, env_params) -> Agent:
    """Checks the env's spaces (raises ConfigError) and builds the shared pieces."""
    spec = check_env(env, env_params, config)
    wrapped = wrap_env(env, config.env, env_params)
    obs_space = wrapped.observation_space(env_params)
    draw_resets = None
    if takes_drawn_resets(env):
        draw_resets = jax.vmap(env.reset_env, in_axes=(0, None))
    return Agent(spec, tuple(obs_space.shape), ActionDistribution(spec),
                 make_network(config, spec, obs_space),
                 functools.partial(network_input, config.env),
                 jax.vmap(wrapped.reset, in_axes=(0, None)),
                 jax.vmap(wrapped.step, in_axes=(0, 0, 0, None, 0)),
                 draw_resets, getattr(env, "action_mask_size", 0))
