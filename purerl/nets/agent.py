"""The agent: what training and evaluation share about acting in the envs.

`make_agent(env_config, network_config, env, env_params) -> Agent`: the env's action spec, the
policy's distribution, the network (purerl's, or a user's), and the env as the trainer steps it
(wrapped: auto-reset, one-hot, frame stack, episode stats), vmapped over envs;
`Agent.policy_step` acts with or without a recurrent policy's `Memory`.
"""

from __future__ import annotations

import functools
import logging
from typing import Callable, NamedTuple, Optional, Tuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from purerl.config import ConfigError, EnvConfig, MarlConfig, NetworkConfig
from purerl.envs import check_env, takes_drawn_resets, wrap_env
from purerl.envs.action_spaces import ActionSpec
from purerl.envs.normalization import network_input
from purerl.envs.suites.base import action_mask_from_obs
from purerl.nets.distributions import ActionDistribution
from purerl.nets.groups import grouped_network
from purerl.nets.multi_agent import LaneLayout, agent_lanes, agent_names, outcome_names
from purerl.nets.networks import RecurrentActorCriticNetwork, UserNetwork, make_network
from purerl.plan import ExecutionPlan, execution_plan


class Memory(NamedTuple):
    """A recurrent policy's memory of each of `B` envs."""

    carry: jax.Array  # `[B, carry_size]` float32, the cells' states after the last step
    first: jax.Array  # bool `[B]`: the env's current observation is its episode's first


class Agent(NamedTuple):
    spec: ActionSpec
    obs_shape: Tuple[int, ...]  # of the wrapped env's observations
    policy: ActionDistribution
    # an `ActorCriticNetwork`, or a `RecurrentActorCriticNetwork` (`recurrent`), as
    # purerl.nets.networks states them
    network: nn.Module
    # (obs_stats, obs [..., *obs_shape]) -> the network's input: standardized with the running
    # statistics when env.normalize_obs, else obs itself
    observe: Callable
    reset_envs: Callable  # (keys [B], env_params) -> (obs [B, ...], env_state [B])
    # (keys [B], env_state [B], action [B], env_params, resets) -> six values [B]; `resets`
    # (from `draw_resets`, or None to draw them inside) are the base env's (obs, state) [B]
    step_envs: Callable
    draw_resets: Optional[Callable]  # (keys [B], env_params) -> resets; None: env can't take them
    plan: ExecutionPlan  # the faster paths that the rollout and learner take
    # > 0: the env appends its action mask to its observations (`purerl.envs.suites.base`);
    # the policy gives illegal actions no probability
    action_mask_size: int = 0
    # A multi-agent env's agents (`purerl.nets.multi_agent`): `reset_envs` and `step_envs`
    # take and give its `A` agents as lanes `[B * A]` (obs, action, reward, end flags), the
    # episode statistics per env `[B]`; `()` for a single-agent env (A = 1)
    agent_names: Tuple[str, ...] = ()
    outcome_names: Tuple[str, ...] = ()  # the episodes' statistics besides return and length
    # > 0 (`marl.critic=central`): a lane's observation starts with the global state, this
    # long, which the value tower reads (`value_inputs`, with the agent's id after it)
    global_state_size: int = 0
    # how a multi-agent env's agents' observations become its lanes' (ids, groups); None for
    # a single-agent env
    lane_layout: Optional[LaneLayout] = None

    @property
    def num_agents(self) -> int:
        """The agents `A` of each env: 1 for a single-agent env."""
        return max(len(self.agent_names), 1)

    def team_sum(self, x: jax.Array) -> jax.Array:
        """Per-lane values `[B * A]` summed over each env's agents: `[B]` (`x` itself for a
        single-agent env)."""
        return x.reshape(-1, self.num_agents).sum(axis=1) if self.agent_names else x

    @property
    def recurrent(self) -> bool:
        """Whether the network has memory, a `RecurrentActorCriticNetwork` (acting needs a
        `Memory`)."""
        return isinstance(self.network, RecurrentActorCriticNetwork)

    def example_inputs(self) -> Tuple:
        """Inputs of one step of one env, to initialize the network with.

        Returns:
            `(obs,)`, float32 zeros `[1, *obs_shape]`; for a recurrent network `(carry, obs,
                first)`: zeros `[1, carry_size]`, obs, and True `[1]`.
        """
        obs = np.zeros((1, *self.obs_shape), np.float32)
        if not self.recurrent:
            return (obs,)
        return np.zeros((1, self.network.carry_size), np.float32), obs, np.ones((1,), bool)

    def initial_memory(self, num_envs: int) -> Optional[Memory]:
        """The memory of `num_envs` envs at their episodes' start; None for a feed-forward
        policy.

        Args:
            num_envs: the envs `B`.

        Returns:
            `Memory`: the network's initial carry `[B, carry_size]`, `first` True `[B]`; or None.
        """
        if not self.recurrent:
            return None
        return Memory(self.network.initial_carry((num_envs,)), jnp.ones((num_envs,), bool))

    def action_mask(self, obs: jax.Array) -> Optional[jax.Array]:
        """bool `[..., num_actions]`, the legal actions at observations `obs [..., *obs_shape]`
        (as the env returned them); None for an env without a mask.

        Args:
            obs: observations `[..., *obs_shape]`, the mask their last `action_mask_size` entries.

        Returns:
            The mask, or None.
        """
        return action_mask_from_obs(obs, self.action_mask_size) if self.action_mask_size else None

    def masked(self, policy_out, mask: Optional[jax.Array]):
        """The policy's output with the actions illegal under `mask` made impossible.

        Args:
            policy_out: the policy head's output, logits `[..., num_outputs]` for a categorical.
            mask: bool `[..., num_outputs]`, True where legal; None: no mask.

        Returns:
            `policy_out`, illegal logits set to -1e9 (`ActionDistribution.masked`).
        """
        return policy_out if mask is None else self.policy.masked(policy_out, mask)

    def policy_step(self, params, obs_stats, obs: jax.Array, memory: Optional[Memory]):
        """The policy's output for observations `obs [B, *obs_shape]` (as the env returned
        them) and, for a recurrent policy, the value `[B]` and the carry after this step (its
        memory before any reset): `(policy_out, value or None, carry or None)`. A feed-forward
        policy with separate towers runs its policy tower alone (value None), unless the plan
        says `value_in_step`.

        Args:
            params: one member's network params.
            obs_stats: its observation statistics (`RunningMeanStd`, `[*obs_shape]`).
            obs: `[B, *obs_shape]`.
            memory: the recurrent policy's `Memory` of the `B` envs; None for a feed-forward one.

        Returns:
            `(policy_out [B, num_outputs], value [B] or None, carry [B, carry_size] or None)`.
        """
        network_obs, mask = self.observe(obs_stats, obs), self.action_mask(obs)
        if memory is not None:
            carry, policy_out, value = self.network.apply(params, memory.carry, network_obs,
                                                          memory.first)
            return self.masked(policy_out, mask), value, carry
        if self.network.shared or self.plan.value_in_step:  # one call gives both
            policy_out, value = self.network.apply(params, network_obs)[:2]
            return self.masked(policy_out, mask), value, None
        policy_out = self.network.apply(params, network_obs, method="policy")
        return self.masked(policy_out, mask), None, None


def make_agent(env_config: EnvConfig, network_config: NetworkConfig, env, env_params,
               network: Optional[UserNetwork] = None,
               plan: Optional[ExecutionPlan] = None,
               marl: Optional[MarlConfig] = None) -> Agent:
    """The agent of `env`: checks its spaces and builds the shared pieces (raises ConfigError).

    Args:
        env_config: the `env` settings (wrappers, normalization).
        network_config: the `network` settings.
        env: the unwrapped env (`purerl.envs.make_env`).
        env_params: its params.
        network: a user's network given from Python (a flax module, or a factory as
            `network.factory` names one); default: what `network_config` describes.
        plan: the execution plan of the programs the agent is part of (default: the default
            backend's, `purerl.plan.execution_plan`).
        marl: the `marl` settings, for a multi-agent env (default: `MarlConfig()`).

    Returns:
        The `Agent`; its `reset_envs` and `step_envs` vmapped over envs `[B]` (a multi-agent
            env's over its agents' lanes `[B * A]`, `purerl.nets.multi_agent`).

    Raises:
        ConfigError: the env's spaces do not fit the trainer, or the network does not fit.
    """
    spec = check_env(env, env_params, env_config.name)
    plan = execution_plan() if plan is None else plan
    marl = MarlConfig() if marl is None else marl
    names, mask_size = agent_names(env), getattr(env, "action_mask_size", 0)
    outcomes = outcome_names(env)  # () for a single-agent env
    for setting, asked in (("marl.critic=central", marl.critic == "central"),
                           ("marl.share_params=false", not marl.share_params)):
        if asked and not names:
            raise ConfigError(f"{setting}: env.name={env_config.name!r} has one agent; it is "
                              "for multi-agent envs")
    if marl.critic == "central":
        env = env.with_global_state()
    state_size = getattr(env, "global_state_size", 0)
    wrapped = wrap_env(env, env_config, env_params)
    obs_space = wrapped.observation_space(env_params)
    obs_shape = tuple(obs_space.shape)
    reset_envs = jax.vmap(wrapped.reset, in_axes=(0, None))
    step_envs = jax.vmap(wrapped.step, in_axes=(0, 0, 0, None, 0))
    layout = None
    if names:  # each agent a lane: its own observation [*lane_shape]
        layout = LaneLayout(len(names), mask_size, state_size, marl.agent_id,
                            _separate_groups(env, env_config.name, marl))
        obs_shape = layout.lane_shape(obs_shape[1:])
        reset_envs, step_envs = agent_lanes(reset_envs, step_envs, layout, outcomes)
    num_groups = layout.num_groups if layout else 0
    # the network of one group reads the lanes without the group's one-hot
    network_shape = obs_shape[:-1] + (obs_shape[-1] - num_groups,)
    value_inputs = layout.value_inputs if layout else 0
    bounds = None  # of what the network reads: a quantizing torso scales by them
    if network_config.vocab_size:
        clip = env_config.clip_obs
        bounds = (-clip, clip) if env_config.normalize_obs else (obs_space.low, obs_space.high)
    draw_resets = None
    if takes_drawn_resets(env):
        draw_resets = jax.vmap(env.reset_env, in_axes=(0, None))
    net = make_network(network_config, spec, network_shape, bounds, network, plan, value_inputs)
    if num_groups:
        net = grouped_network(net, num_groups)
    return Agent(spec, obs_shape, ActionDistribution(spec), net,
                 functools.partial(network_input, env_config), reset_envs, step_envs,
                 draw_resets, plan, mask_size, names, outcomes, state_size, layout)


def _separate_groups(env, env_name: str, marl: MarlConfig) -> Tuple[int, ...]:
    """Each agent's group of separate parameters (`marl.share_params=false`: the env's
    `agent_groups`); `()` where all agents share one set (one group, or sharing asked for)."""
    if marl.share_params:
        return ()
    groups = tuple(env.agent_groups)
    if max(groups) == 0:
        logging.getLogger(__name__).warning(
            "marl.share_params=false: env.name=%s puts all its agents in one class "
            "(agent_classes); they share one set of parameters", env_name)
        return ()
    return groups
