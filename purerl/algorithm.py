"""The protocol of an algorithm, what the rest of purerl relies on: `Algorithm(init, update)`
and its `RunnerState` and `Metrics`.

`make_program` maps an algorithm over seeds and devices; evaluation, checkpoints, `purerl.load`
and PBT read its state. The contract:

- `RunnerState.params` are the parameters of the agent's network (`purerl.agent.make_agent`),
  which evaluation and `purerl.load` act with, the observations standardized with
  `normalizer.obs`; `hparams` are the member's hyperparameters, which PBT copies and perturbs
  (an algorithm's own go in `HyperParams.extra`); `env_state`, `obs`, `normalizer.returns` and
  `memory` have the envs' axis `[B, ...]`, which `shard_map` splits over devices when a seed's
  envs are split; every other leaf is the seed's own. Checkpoints hold the whole state.
- `Metrics` are one update's scalars; `losses` takes any number of named entries, written to
  metrics.jsonl, TensorBoard and W&B as they are named.

PPO (`purerl.ppo.make_ppo`) is the default; a variant usually wraps it (examples/).
"""

from __future__ import annotations

from typing import Any, Callable, Dict, NamedTuple, Optional, Tuple

import jax
import jax.numpy as jnp

from purerl.agent import Memory
from purerl.envs.normalization import Normalizer
from purerl.schedules import HyperParams


class RunnerState(NamedTuple):
    """Everything a run carries from one update to the next (one seed, one device's envs)."""

    params: Any
    opt_state: Any  # the optimizer's state of the param tree
    env_state: Any  # [B] env states (B = envs on this device)
    obs: jax.Array  # [B, *obs_shape], as the env returned it (before normalization)
    normalizer: Normalizer  # running observation / return statistics (unused when off)
    key: jax.Array  # typed PRNG key, the same on every device
    update: jax.Array  # int32 [], updates done so far
    hparams: HyperParams  # base (unscheduled) hyperparameters
    memory: Optional[Memory] = None  # [B], a recurrent policy's; None for a feed-forward one


class Metrics(NamedTuple):
    """Scalars of one update, already reduced over envs, steps, minibatches and devices."""

    episode_return_sum: jax.Array  # over the episodes completed in this update
    episode_length_sum: jax.Array
    episode_count: jax.Array
    # The loss terms' metrics, means over the update's minibatches: PPO's `policy_loss`,
    # `value_loss`, `entropy`, `approx_kl`, `clip_frac`, and a user term's `loss/<name>`
    losses: Dict[str, jax.Array]
    explained_variance: jax.Array
    value_mean: jax.Array
    opt_steps: jax.Array  # optimizer steps taken (fewer than epochs x minibatches on early stop)
    learning_rate: jax.Array
    ent_coef: jax.Array
    clip_eps: jax.Array
    vf_coef: jax.Array
    gamma: jax.Array
    gae_lambda: jax.Array
    nonfinite: jax.Array  # int32 bit mask, 0 when all is well; see learner.NONFINITE_QUANTITIES

    @property
    def episode_return(self) -> jax.Array:
        """The mean return of the episodes completed in the update (NaN where none were)."""
        return _mean_per_episode(self.episode_return_sum, self.episode_count)

    @property
    def episode_length(self) -> jax.Array:
        """The mean length of the episodes completed in the update (NaN where none were)."""
        return _mean_per_episode(self.episode_length_sum, self.episode_count)


def _mean_per_episode(total: jax.Array, count: jax.Array) -> jax.Array:
    return jnp.where(count > 0, total / jnp.maximum(count, 1), jnp.nan)


class Algorithm(NamedTuple):
    """An algorithm for one seed on one device (or one device's share of its envs).

    init(key, hparams) -> RunnerState: the state before the first update; `hparams` the
        member's base `HyperParams` (leaves `[]`).
    update(state) -> (RunnerState, Metrics): one update, a pure function of arrays.
    """

    init: Callable[[jax.Array, HyperParams], RunnerState]
    update: Callable[[RunnerState], Tuple[RunnerState, Metrics]]


# What `make_program(config, algorithm=...)` and `algorithm=pkg.module:make_fn` take:
# `make_fn(config, env, env_params, *, num_envs, axis_name, network, loss_terms, optimizer,
# plan) -> Algorithm`, the keywords as `purerl.ppo.make_ppo` takes them.
MakeAlgorithm = Callable[..., Algorithm]
