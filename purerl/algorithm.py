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
    """Everything a run carries from one update to the next, for one seed on one device.

    Under `make_program` every leaf gains a leading members axis `[S, ...]`; the shapes below
    are one seed's, with B the envs on this device.

    Attributes:
        params: the agent's network's parameter tree, which evaluation and `purerl.load` act
            with.
        opt_state: the optimizer's state of the parameter tree.
        env_state: the envs' states, a pytree with leaves `[B, ...]`.
        obs: `[B, *obs_shape]`, the envs' current observations as the envs returned them
            (before normalization).
        normalizer: the running observation statistics (`obs`, of `[*obs_shape]`), return
            statistics (`ret`) and each env's running discounted return (`returns`, float32
            `[B]`); unused when normalization is off.
        key: the typed PRNG key of the next update, the same on every device.
        update: int32 `[]`, the updates done so far.
        hparams: the member's base (unscheduled) `HyperParams`, leaves `[]`; PBT copies and
            perturbs them.
        memory: a recurrent policy's `Memory` (`carry` `[B, carry_size]`, `first` bool `[B]`);
            None for a feed-forward one.
    """

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
    """The scalars of one update, already reduced over envs, steps, minibatches and devices.

    Every field is a `[]` array for one seed; `make_program`'s `run` and `train` return them
    stacked, `[S, updates]`. `metrics.jsonl`, TensorBoard and W&B write them by name.

    Attributes:
        episode_return_sum: float, the sum of the returns of the episodes completed in the
            update.
        episode_length_sum: float, the sum of their lengths.
        episode_count: the number of episodes completed in the update.
        losses: the loss terms' metrics by name, means over the update's minibatches: PPO's
            `policy_loss`, `value_loss`, `entropy`, `approx_kl`, `clip_frac`, and a user
            term's as `loss/<name>`.
        explained_variance: 1 - Var(returns - values) / Var(returns) over the rollout (0 when
            the returns do not vary).
        value_mean: the mean of the rollout's values.
        opt_steps: the optimizer steps taken (fewer than epochs x minibatches after a
            target-KL stop).
        learning_rate: the update's (scheduled) learning rate.
        ent_coef: the update's entropy coefficient.
        clip_eps: the update's clip range.
        vf_coef: the update's value-loss coefficient.
        gamma: the update's discount.
        gae_lambda: the update's GAE lambda.
        nonfinite: int32 bit mask of what was not finite (`purerl.learner.NONFINITE_QUANTITIES`);
            0 when all is well.
    """

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

    `make_fn(config, env, env_params, *, num_envs, axis_name, network, loss_terms, optimizer,
    plan) -> Algorithm` builds one, the keywords as `make_ppo` takes them;
    `make_program(config, algorithm=make_fn)` or `algorithm=pkg.module:make_fn` trains it in
    place of PPO, mapped over seeds and devices.

    Attributes:
        init: `init(key, hparams) -> RunnerState`, the state before the first update, from a
            PRNG key and the member's base `HyperParams` (leaves `[]`).
        update: `update(state) -> (RunnerState, Metrics)`, one update, a pure function of
            arrays.
    """

    init: Callable[[jax.Array, HyperParams], RunnerState]
    update: Callable[[RunnerState], Tuple[RunnerState, Metrics]]


# What `make_program(config, algorithm=...)` and `algorithm=pkg.module:make_fn` take:
# `make_fn(config, env, env_params, *, num_envs, axis_name, network, loss_terms, optimizer,
# plan) -> Algorithm`, the keywords as `purerl.ppo.make_ppo` takes them.
MakeAlgorithm = Callable[..., Algorithm]
