"""A trained policy from Python: `purerl.load(run_dir)`, then `act` and `evaluate`.

    policy = purerl.load("outputs/2026-12-02/10-00-00")
    obs, state = policy.env.reset(key, policy.env_params)
    action, carry = policy.act(obs)                       # greedy (temperature 0)
    action, carry = policy.act(obs, carry, key=k, temperature=1.0)
    policy.evaluate(episodes=32)                          # {"1.0": {"return", "length"}, ...}

Observations are those the trained network read: the env's, one-hot for Discrete observation
spaces and stacked with `env.frame_stack`, as `policy.env` (the env as the trainer stepped it)
returns them; normalization with the run's statistics happens inside `act`.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Dict, Optional, Sequence, Tuple

import jax
import jax.numpy as jnp
import numpy as np

from purerl.algos.evaluation import make_evaluator, with_evaluation
from purerl.config import Config, ConfigError
from purerl.envs import make_env, wrap_env
from purerl.logging.history import RunHistory
from purerl.nets.agent import Memory, make_agent
from purerl.reports.sweep import is_sweep
from purerl.storage.restoring import restore_run
from purerl.validation import validate


@dataclasses.dataclass
class TrainedPolicy:
    """One member (seed) of a saved run, ready to act: what `load` returns.

    Observations are those the trained network read: the env's, one-hot for Discrete
    observation spaces and stacked with `env.frame_stack`, as `env` returns them;
    normalization with the run's statistics happens inside `act`.

    Attributes:
        config: the run's settings.
        params: the network's parameters, one member's (no members axis).
        obs_stats: the running observation statistics the network's input is standardized by.
        member: which member (seed, or grid point x seed) of the run.
        update: the update its checkpoint was saved at.
        env: the env as the trainer stepped it, wrappers included (gymnax interface:
            `reset`, `step`).
        env_params: the env's params.
        base_env: the env inside `env`'s wrappers.
        network: the user's network the run was given from Python, or None.
        agent: the agent the run's algorithm acts with (`Algorithm.agent`; `load` gives it);
            None: the one the settings and `network` describe (`purerl.nets.agent.make_agent`).
    """

    config: Config
    params: Any  # the network's params, one member's (no seed axis)
    obs_stats: Any  # the running observation statistics the network input is standardized by
    member: int  # which seed of the run
    update: int  # the update its checkpoint was saved at
    env: Any  # the env as the trainer stepped it (gymnax interface: reset, step)
    env_params: Any
    base_env: Any = dataclasses.field(repr=False)  # the env inside `env`'s wrappers
    network: Any = dataclasses.field(default=None, repr=False)  # a user's, given from Python
    # the agent its algorithm acts with (`purerl.load`: the run's); None: the settings' one
    agent: Any = dataclasses.field(default=None, repr=False)

    def __post_init__(self):
        self._agent = self.agent if self.agent is not None else make_agent(
            self.config.env, self.config.network, self.base_env, self.env_params, self.network,
            marl=self.config.marl)
        self._act = jax.jit(self.apply)

    @property
    def obs_shape(self) -> Tuple[int, ...]:
        """The shape of one observation `act` takes."""
        return self._agent.obs_shape

    @property
    def agent_names(self) -> Tuple[str, ...]:
        """A multi-agent env's agents (`act` takes and gives dicts by these names); `()`."""
        return self._agent.agent_names

    @property
    def recurrent(self) -> bool:
        """Whether the policy is recurrent (`act` then takes and returns a carry)."""
        return self._agent.recurrent

    def initial_carry(self, batch: Optional[int] = None) -> Optional[jax.Array]:
        """A recurrent policy's carry at an episode's start.

        Reset an env's row to zeros when its episode ends.

        Args:
            batch: the number of envs B, or None for a single env.

        Returns:
            Zeros `[B, carry_size]` (`[carry_size]` when `batch` is None); None for a
                feed-forward policy.
        """
        if not self.recurrent:
            return None
        carry = self._agent.network.initial_carry((1 if batch is None else batch,))
        return carry[0] if batch is None else carry

    def apply(self, obs: jax.Array, carry: Optional[jax.Array] = None,
              first: Optional[jax.Array] = None, key: Optional[jax.Array] = None,
              temperature: float | jax.Array = 0.0) -> Tuple[Any, Optional[jax.Array]]:
        """The policy as a pure function of arrays: what `act` runs compiled and
        `purerl.export_policy` exports (the params and observation statistics are constants).

        Args:
            obs: observations `[B, *obs_shape]`, as `env` returns them (not normalized).
            carry: a recurrent policy's carry `[B, carry_size]`; None for a feed-forward one.
            first: bool `[B]`, True where `obs` is its episode's first: the carry is reset to
                zeros there before the policy reads it (default: nowhere).
            key: a PRNG key of the action noise; None: the mode (no noise).
            temperature: with `key`, logits / temperature (categorical) or std x temperature
                (Gaussian); 0 gives the mode.

        Returns:
            The tuple `(action, carry)`: the env's actions `[B, *action_shape]` and the carry
                after them `[B, carry_size]` (None for a feed-forward policy).
        """
        agent, num = self._agent, obs.shape[0]
        memory = None
        if carry is not None:
            memory = Memory(carry, jnp.zeros((num,), bool) if first is None else first)
        policy_out, _, carry = agent.policy_step(self.params, self.obs_stats, obs, memory)
        if key is None:
            action = agent.policy.mode(policy_out)
        else:
            action = agent.policy.sample(policy_out, agent.policy.noise(key, (num,)),
                                         temperature)
        return agent.spec.to_env(action), carry

    def act(self, obs, carry=None, key: Optional[jax.Array] = None,
            temperature: float = 0.0) -> Tuple[jax.Array, Optional[jax.Array]]:
        """The env's action for an observation or a batch of them, and the carry after it.

        Args:
            obs: one observation `[*obs_shape]` or a batch `[B, *obs_shape]`, as `env`
                returns them (not normalized).
            carry: a recurrent policy's carry, `[carry_size]` or `[B, carry_size]`: what the
                previous call returned; None at an episode's start (and for a feed-forward
                policy).
            key: a PRNG key, needed when `temperature` > 0.
            temperature: 0.0 takes the most likely action (the mode); above 0 samples, with
                logits / temperature (categorical) or std x temperature (Gaussian).

        Returns:
            The tuple `(action, carry)`: the env's action, `[*action_shape]` or
                `[B, *action_shape]`, and the carry after it (None for a feed-forward
                policy). For a multi-agent env, `obs` is a dict of each agent's observation
                by name and the action a dict of each agent's, the carry every agent's.

        Raises:
            ValueError: `obs` has neither shape, or `temperature` > 0 without `key`.
        """
        if isinstance(obs, dict):  # a multi-agent env's agents
            return self._act_agents(obs, carry, key, temperature)
        obs = jnp.asarray(obs)
        single = obs.shape == self.obs_shape
        if not single and obs.shape[1:] != self.obs_shape:
            raise ValueError(f"act: obs of shape {obs.shape}; this policy takes "
                             f"{self.obs_shape} or a batch [B, *{self.obs_shape}]")
        if temperature > 0 and key is None:
            raise ValueError(f"act: temperature={temperature} samples the action: pass key=")
        batch = obs[None] if single else obs
        num = batch.shape[0]
        if self.recurrent:
            if carry is None:
                carry = self.initial_carry(num)
            else:
                carry = jnp.asarray(carry)[None] if single else jnp.asarray(carry)
        action, carry = self._act(batch, carry, None, key, jnp.float32(temperature))
        if single:
            action, carry = jax.tree.map(lambda x: x[0], (action, carry))
        return action, carry

    def _act_agents(self, obs: Dict[str, Any], carry, key, temperature: float):
        """`act` for a multi-agent env: each agent's observation `[*agent_shape]` or
        `[B, *agent_shape]` by name (row `i` of `env`'s `[A, *agent_shape]`) -> each agent's
        action by name, and the carry of the agents' lanes, `[A, carry_size]` or
        `[B * A, carry_size]` (`purerl.nets.multi_agent`)."""
        names, agent = self._agent.agent_names, self._agent
        if sorted(obs) != sorted(names):
            raise ValueError(f"act: observations of agents {sorted(obs)}; this policy's "
                             f"agents are {list(names)}")
        agent_shape = tuple(self.env.observation_space(self.env_params).shape[1:])
        arrays = [jnp.asarray(obs[name], jnp.float32) for name in names]
        single = arrays[0].shape == agent_shape
        if any(a.shape[0 if single else 1:] != agent_shape for a in arrays):
            raise ValueError(f"act: agents' observations of shapes {[a.shape for a in arrays]};"
                             f" this policy takes {agent_shape} or a batch [B, *{agent_shape}]")
        stacked = jnp.stack([a[None] if single else a for a in arrays], axis=1)  # [B, A, ...]
        if agent.global_state_size:  # the value tower's; the policy reads its own part only
            stacked = jnp.concatenate([jnp.zeros(stacked.shape[:2] + (
                agent.global_state_size,)), stacked], axis=-1)
        action, carry = self.act(agent.lane_layout.lanes(stacked), carry, key, temperature)
        action = action.reshape(stacked.shape[0], len(names), *action.shape[1:])
        return {name: action[0, i] if single else action[:, i]
                for i, name in enumerate(names)}, carry

    def evaluate(self, episodes: int = 16, temperatures: Optional[Sequence[float]] = None,
                 max_steps: Optional[int] = None, seed: int = 0) -> Dict[str, Dict[str, float]]:
        """The policy's mean return and episode length on fresh envs.

        Args:
            episodes: episodes per temperature, played in parallel.
            temperatures: the sampling temperatures (default: the run's `eval.temperatures`).
            max_steps: steps per episode at most (default: the run's `eval.max_steps`).
            seed: the seed of the envs' and the actions' randomness.

        Returns:
            `{temperature: {"return": mean, "length": mean}}`, the temperature as a string
                ("1.0").

        Raises:
            ConfigError: `episodes`, `temperatures` or `max_steps` is not a valid setting.
        """
        config = validate(with_evaluation(self.config, episodes, temperatures, max_steps), None)
        evaluator = make_evaluator(self._agent, self.env_params, config.eval)
        result = jax.jit(evaluator.evaluate)(self.params, self.obs_stats, jax.random.key(seed))
        returns, lengths = np.asarray(result.episode_return), np.asarray(result.episode_length)
        return {str(float(t)): {"return": float(r), "length": float(n)}
                for t, r, n in zip(config.eval.temperatures, returns, lengths)}


def best_member(record: Dict) -> int:
    """The member (seed, or grid point x seed of a sweep) with the best final return in a
    checkpoint's record (0 when none ended an episode).

    Args:
        record: a checkpoint's record (`SavedRun.record`), with its `history`.

    Returns:
        The member's index, the first of those tied.
    """
    finals = RunHistory.from_record(record["history"]).final_returns()
    scored = [(r, -i) for i, r in enumerate(finals) if r is not None]
    return -max(scored)[1] if scored else 0


def checked_member(saved, run_dir, member: Optional[int], setting: str = "member",
                   best_by_default: bool = True) -> Optional[int]:
    """`member` of a restored run (`purerl.storage.restoring.restore_run`), range-checked; when
    None, the member with the best final return if `best_by_default` or the run is a sweep,
    else None (every member). Raises ConfigError naming `setting`.

    Args:
        saved: the restored run (`purerl.storage.restoring.SavedRun`).
        run_dir: the run directory, named in the error.
        member: the member asked for, or None.
        setting: the setting named in the error.
        best_by_default: pick the best member for None on a run that is not a sweep.

    Returns:
        The member's index, or None for every member.

    Raises:
        ConfigError: `member` is not in `[0, num_members)`.
    """
    if member is None and (best_by_default or is_sweep(saved.config)):
        member = best_member(saved.record)
    num_members = saved.config.num_members
    if member is not None and not 0 <= member < num_members:
        raise ConfigError(f"{setting}={member}: {run_dir} has {num_members} member(s), "
                          f"0-{num_members - 1}")
    return member


def load(run_dir, checkpoint: str = "final", member: Optional[int] = None,
         network=None) -> TrainedPolicy:
    """The policy of one member of a run directory's `final` (newest) or `best` checkpoint.

    Args:
        run_dir: the run directory, a path.
        checkpoint: "final" (the newest intact one) or "best" (`checkpoint.best`).
        member: which member of a multi-seed run or sweep (default: the one with the best
            final return).
        network: the network the run was given from Python (`make_program(config,
            network=...)`), if it was; a `network.factory` of the run's config is imported.

    Returns:
        The `TrainedPolicy`, with `act` and `evaluate`.

    Raises:
        ConfigError: the directory has no intact checkpoint, `member` is out of range, or
            the checkpoint was written with another network than the one given.
    """
    saved = restore_run(Path(run_dir), checkpoint, network=network)
    member = checked_member(saved, run_dir, member)
    state = jax.tree.map(lambda x: jnp.asarray(x[member]), saved.state)
    env, env_params = make_env(saved.config.env)
    return TrainedPolicy(saved.config, state.params, state.normalizer.obs, member, saved.update,
                         wrap_env(env, saved.config.env, env_params), env_params, env, network,
                         saved.agent)

