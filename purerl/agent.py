"""The agent: what training and evaluation share about acting in the envs.

`make_agent(config, env, env_params) -> Agent`: the env's action spec, the policy's
distribution, the network, and the env as the trainer steps it (wrapped: auto-reset, one-hot,
frame stack, episode stats), vmapped over envs.
"""

from __future__ import annotations

import functools
from typing import Callable, NamedTuple, Optional, Tuple

import jax

from purerl.config import Config
from purerl.distributions import ActionDistribution
from purerl.envs import check_env, takes_drawn_resets, wrap_env
from purerl.envs.normalization import network_input
from purerl.networks import ActorCritic, make_network
from purerl.spaces import ActionSpec


class Agent(NamedTuple):
    spec: ActionSpec
    obs_shape: Tuple[int, ...]  # of the wrapped env's observations
    policy: ActionDistribution
    network: ActorCritic
    # (obs_stats, obs [..., *obs_shape]) -> the network's input: standardized with the running
    # statistics when env.normalize_obs, else obs itself
    observe: Callable
    reset_envs: Callable  # (keys [B], env_params) -> (obs [B, ...], env_state [B])
    # (keys [B], env_state [B], action [B], env_params, resets) -> six values [B]; `resets`
    # (from `draw_resets`, or None to draw them inside) are the base env's (obs, state) [B]
    step_envs: Callable
    draw_resets: Optional[Callable]  # (keys [B], env_params) -> resets; None: env can't take them


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
                 draw_resets)
