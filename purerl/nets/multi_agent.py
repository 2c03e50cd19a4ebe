"""Many agents in one env: the agent axis folded into the batch the trainer acts and learns on.

A multi-agent env (one with `agent_names`, `purerl.envs.suites.jaxmarl`) steps `B` envs of `A`
agents each: its observations are `[B, A, ...]`, its rewards `[B, A]`, its action `[B, A]`.
The trainer sees `L = B * A` lanes, env-major (env `b`'s agent `a` is lane `b * A + a`), each
with the observations, reward, end flags and memory of one agent: one policy acts for every
agent (parameter sharing), GAE and the learner run per lane, and a seed's envs split over
devices keep each env's agents together. The episode statistics stay per env: an episode's
return is the team's, summed over its agents, with each agent's own beside it.

A lane ends (`terminated` or `truncated`) when its env's episode ends, and only then: an agent
done before that (a dead SMAX unit) stays in its lane, and its return counts what the env
pays it to the episode's end (SMAX pays dead units the team's reward, so that an agent's
sacrifice is credited to it), as JaxMARL's baselines and MAPPO's GAE count it.
"""

from __future__ import annotations

from typing import Callable, NamedTuple, Tuple

import jax
import jax.numpy as jnp


def agent_names(env) -> Tuple[str, ...]:
    """The agents of `env` in the order of its agent axis; `()` for a single-agent env.

    Args:
        env: an env, unwrapped (`purerl.envs.make_env`'s).

    Returns:
        The names.
    """
    return tuple(getattr(env, "agent_names", ()))


def outcome_names(env) -> Tuple[str, ...]:
    """The per-episode statistics a multi-agent env's episodes report besides the team's
    return and length: each agent's return, `return/<agent>`, then the outcomes its step's
    info gives on an episode's last step (SMAX's `won`).

    Args:
        env: a multi-agent env, unwrapped.

    Returns:
        The names, as metrics.jsonl keys them.
    """
    return (tuple(f"return/{name}" for name in agent_names(env))
            + tuple(getattr(env, "info_outcomes", ())))


def with_agent_ids(obs: jax.Array, mask_size: int, state_size: int = 0) -> jax.Array:
    """Observations `[B, A, ...]` with each agent's one-hot id `[A]` appended: to a vector
    before its action mask's last `mask_size` entries (and after the global state, its first
    `state_size` entries, too), to an image as `A` constant channels.

    Args:
        obs: the agents' observations `[B, A, *obs_shape]`.
        mask_size: the entries of an action mask at the vectors' end (0: none).
        state_size: the entries of a global state at the vectors' start (0: none).

    Returns:
        `[B, A, D + A]` for vectors (`[B, A, D + 2A]` with a global state), `[B, A, H, W,
            C + A]` for images.
    """
    num_agents = obs.shape[1]
    ids = jnp.eye(num_agents, dtype=obs.dtype)  # [A, A]
    if obs.ndim > 3:
        return jnp.concatenate([obs, _constant_channels(ids, obs.shape)], axis=-1)
    ids = jnp.broadcast_to(ids, obs.shape[:1] + ids.shape)
    split = obs.shape[-1] - mask_size
    state = [obs[..., :state_size], ids] if state_size else []
    return jnp.concatenate([*state, obs[..., state_size:split], ids, obs[..., split:]], axis=-1)


def with_group_ids(obs: jax.Array, groups: Tuple[int, ...]) -> jax.Array:
    """Observations `[B, A, ...]` with the one-hot of each agent's group `[G]` first along
    their last axis (a vector's first entries, an image's first channels): what a network with
    separate parameters per group (`purerl.nets.groups`) picks its group's by.

    Args:
        obs: the agents' observations `[B, A, *obs_shape]`.
        groups: each agent's group, `G = max(groups) + 1` of them.

    Returns:
        `[B, A, G + D]` for vectors, `[B, A, H, W, G + C]` for images.
    """
    one_hot = jnp.eye(max(groups) + 1, dtype=obs.dtype)[jnp.asarray(groups)]  # [A, G]
    return jnp.concatenate([_constant_channels(one_hot, obs.shape), obs], axis=-1)


def _constant_channels(rows: jax.Array, shape: Tuple[int, ...]) -> jax.Array:
    """`rows [A, K]` broadcast to observations of `shape` `[B, A, ..., C]`: `[B, A, ..., K]`."""
    rows = rows.reshape(rows.shape[0], *([1] * (len(shape) - 3)), rows.shape[1])
    return jnp.broadcast_to(rows, shape[:-1] + rows.shape[-1:])


class LaneLayout(NamedTuple):
    """How an env's agents' observations `[B, A, *agent_shape]` become its lanes' `[B * A,
    *obs_shape]`: each agent's one-hot id appended (`agent_id`, `with_agent_ids`), and its
    group's one-hot first where each group of agents has parameters of its own (`groups`,
    `with_group_ids`)."""

    num_agents: int
    mask_size: int = 0  # the env's `action_mask_size`, the mask at each vector's end
    state_size: int = 0  # the env's `global_state_size`, the global state at its start
    agent_id: bool = False
    groups: Tuple[int, ...] = ()  # each agent's group (separate params per group); (): shared

    @property
    def num_groups(self) -> int:
        """The groups `G` of separate parameters; 0 where every agent shares one set."""
        return max(self.groups) + 1 if self.groups else 0

    @property
    def value_inputs(self) -> int:
        """The entries at the start of each lane that a central critic's value tower reads: the
        global state, then (with `agent_id`) the agent's one-hot id; 0 without a global
        state."""
        return self.state_size + self.num_agents * self.agent_id if self.state_size else 0

    def lane_shape(self, agent_shape: Tuple[int, ...]) -> Tuple[int, ...]:
        """A lane's observation shape, of an agent's `agent_shape` (its last axis longer by
        the ids and the group's one-hot)."""
        ids = self.num_agents * self.agent_id * (1 + (self.state_size > 0))
        return agent_shape[:-1] + (agent_shape[-1] + ids + self.num_groups,)

    def lanes(self, obs: jax.Array) -> jax.Array:
        """`[B, A, *agent_shape]` -> `[B * A, *lane_shape]`, env-major."""
        if self.agent_id:
            obs = with_agent_ids(obs, self.mask_size, self.state_size)
        if self.groups:
            obs = with_group_ids(obs, self.groups)
        return obs.reshape(obs.shape[0] * self.num_agents, *obs.shape[2:])


def agent_lanes(reset_envs: Callable, step_envs: Callable, layout: LaneLayout,
                outcomes: Tuple[str, ...]):
    """The vmapped reset and step of a multi-agent env as the trainer's lanes `[B * A]`.

    Args:
        reset_envs: `(keys [B], env_params) -> (obs [B, A, ...], env_state [B])`.
        step_envs: `(keys [B], env_state [B], action [B, A], env_params, resets) -> (obs,
            env_state, reward [B, A], terminated [B], truncated [B], info)`, the wrapped
            env's (`EpisodeStats` outermost: its `episode_return` `[B, A]`).
        layout: how the agents' observations become the lanes', their count `A`.
        outcomes: `outcome_names`: `return/<agent>` per agent, then the info's own.

    Returns:
        `(reset_lanes, step_lanes)`: `reset_lanes(keys [B], env_params) -> (obs [L, ...],
            env_state [B])`; `step_lanes(keys [B], env_state, action [L, ...], env_params,
            resets) -> (obs [L, ...], env_state, reward [L], terminated [L], truncated [L],
            info)`, info with `final_observation [L, ...]`, the episode's `episode_done`,
            `episode_length` and team `episode_return` per env `[B]`, and `outcomes`, a dict
            of each of `outcomes` per env `[B]` (zero where no episode ended).
    """
    lanes, num_agents = layout.lanes, layout.num_agents

    def reset_lanes(keys: jax.Array, env_params):
        obs, env_state = reset_envs(keys, env_params)
        return lanes(obs), env_state

    def step_lanes(keys: jax.Array, env_state, action: jax.Array, env_params, resets):
        per_env = action.reshape(keys.shape[0], num_agents, *action.shape[1:])
        obs, env_state, reward, terminated, truncated, info = step_envs(
            keys, env_state, per_env, env_params, resets)
        lane_terminated = jnp.broadcast_to(terminated[:, None], reward.shape)
        lane_truncated = jnp.broadcast_to(truncated[:, None], reward.shape)
        agent_returns = info["episode_return"]  # [B, A], zero where no episode ended
        done = info["episode_done"]
        own = {name: jnp.where(done, info[name], 0.0).astype(jnp.float32)
               for name in outcomes if not name.startswith("return/")}
        returns = {name: agent_returns[:, i] for i, name in enumerate(
            name for name in outcomes if name.startswith("return/"))}
        info = {**info, "final_observation": lanes(info["final_observation"]),
                "episode_return": agent_returns.sum(axis=1), "outcomes": {**returns, **own}}
        return (lanes(obs), env_state, reward.reshape(-1), lane_terminated.reshape(-1),
                lane_truncated.reshape(-1), info)

    return reset_lanes, step_lanes
