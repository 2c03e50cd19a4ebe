"""The protocol of an algorithm, what the rest of purerl relies on: `Algorithm(init, update)`
and its `RunnerState` and `Metrics`.

`make_program` maps an algorithm over seeds and devices; evaluation, checkpoints, `purerl.load`
and PBT read its state. The contract:

- `RunnerState.params` are the parameters of the agent's network (`purerl.nets.agent.make_agent`),
  which evaluation and `purerl.load` act with, the observations standardized with
  `normalizer.obs`; `hparams` are the member's hyperparameters, which PBT copies and perturbs
  (an algorithm's own, which its settings declare, in `HyperParams.extra`); the leaves that
  `Algorithm.envs_axis` names (PPO's: `env_state`, `obs`, `normalizer.returns` and `memory`)
  have the envs' axis `[B, ...]`, which `shard_map` splits over devices when a seed's envs are
  split; every other leaf is the seed's own. Checkpoints hold the whole state.
- `Metrics` are one update's scalars: the episode statistics and NaN-guard bits the run reads,
  and the algorithm's own `scalars` by name, written to metrics.jsonl, TensorBoard and W&B as
  they are named.

`MakeAlgorithm` is the factory's protocol. PPO (`purerl.algos.ppo.make_ppo`) is the default; a
variant usually wraps it (examples/).
"""

from __future__ import annotations

from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Dict,
    NamedTuple,
    Optional,
    Protocol,
    Sequence,
    Tuple,
)

import jax
import jax.numpy as jnp

from purerl.core.schedules import HyperParams
from purerl.envs.normalization import Normalizer
from purerl.nets.agent import Memory

if TYPE_CHECKING:  # the learner and PPO import this module
    from purerl.algos.learner import Optimizer
    from purerl.config import Config
    from purerl.core.losses import LossTerm
    from purerl.nets.agent import Agent
    from purerl.plan import ExecutionPlan


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
    stacked, `[S, updates]`. The episode statistics and the NaN guard's bits are what the run
    itself reads (its returns, `stop_at_return`, PBT, the NaN guard); everything else an
    algorithm logs goes in `scalars`, which metrics.jsonl, TensorBoard and W&B write by name.

    Attributes:
        episode_return_sum: float, the sum of the returns of the episodes completed in the
            update.
        episode_length_sum: float, the sum of their lengths.
        episode_count: the number of episodes completed in the update.
        nonfinite: int32 bit mask of what was not finite
            (`purerl.algos.learner.NONFINITE_QUANTITIES`); 0 when all is well.
        scalars: the algorithm's own scalars by name. PPO's: its loss terms' metrics as
            `loss/<name>` (`loss/policy_loss`, `loss/value_loss`, `loss/entropy`,
            `loss/approx_kl`, `loss/clip_frac`, then a user term's), `explained_variance`,
            `value_mean`, `opt_steps` and the update's hyperparameters (`learning_rate`,
            `ent_coef`, `clip_eps`, `vf_coef`, `gamma`, `gae_lambda`).
        episode_outcome_sums: more per-episode statistics by name, summed over the episodes
            completed in the update and written per episode, as `episode_return` is: a
            multi-agent env's each agent's return (`return/<agent>`) and outcomes (`won`).
    """

    episode_return_sum: jax.Array  # over the episodes completed in this update
    episode_length_sum: jax.Array
    episode_count: jax.Array
    nonfinite: jax.Array  # int32 bit mask, 0 when all is well; see learner.NONFINITE_QUANTITIES
    scalars: Dict[str, jax.Array]  # the algorithm's own, logged by name
    episode_outcome_sums: Dict[str, jax.Array] = {}  # more per-episode sums (never mutated)

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


# Which leaves of a `RunnerState` carry the envs' axis `[B, ...]`, as PPO's state has them: a
# prefix tree of the state
RUNNER_STATE_ENVS_AXIS = RunnerState(
    params=False, opt_state=False, env_state=True, obs=True,
    normalizer=Normalizer(obs=False, ret=False, returns=True), key=False, update=False,
    hparams=False, memory=True)


class Algorithm(NamedTuple):
    """An algorithm for one seed on one device (or one device's share of its envs).

    A `MakeAlgorithm` builds one; `make_program(config, algorithm=make_fn)` or
    `algorithm=pkg.module:make_fn` trains it in place of PPO, mapped over seeds and devices.

    Attributes:
        init: `init(key, hparams) -> RunnerState`, the state before the first update, from a
            PRNG key and the member's base `HyperParams` (leaves `[]`).
        update: `update(state) -> (RunnerState, Metrics)`, one update, a pure function of
            arrays.
        envs_axis: which leaves of the state carry the envs' axis `[B, ...]`: a prefix tree
            of the state with True there and False elsewhere (default: PPO's,
            `RUNNER_STATE_ENVS_AXIS`). When a seed's envs are split over devices,
            `shard_map` splits those leaves and gives every device the others whole.
        agent: the `purerl.nets.agent.Agent` whose network `RunnerState.params` are the
            parameters of: evaluation, `python -m purerl.evaluate`, `purerl.load` and export
            act with it. None: the agent the settings describe (`make_agent`), which
            `make_ppo`'s is.
    """

    init: Callable[[jax.Array, HyperParams], RunnerState]
    update: Callable[[RunnerState], Tuple[RunnerState, Metrics]]
    envs_axis: Any = RUNNER_STATE_ENVS_AXIS
    agent: Optional[Agent] = None


class MakeAlgorithm(Protocol):
    """What `algorithm=pkg.module:make_fn` names, or `make_program(config, algorithm=make_fn)`
    takes: builds the algorithm of one seed on one device. `purerl.make_ppo` is one; a
    variant usually wraps it (examples/kl_penalty.py, examples/a2c.py).

    A factory with settings of its own declares them as `make_fn.settings`, a dataclass type
    whose fields are the `algorithm.<key>` settings (checked against the fields' defaults
    before anything compiles; its `__post_init__` may check more). A field whose default is
    `purerl.hyperparameter(value)` is a hyperparameter: a float32 array in
    `HyperParams.extra[name]`, which `sweep.algorithm.<name>` sweeps inside one program and
    `pbt.hparams=[algorithm.<name>]` evolves.
    """

    def __call__(self, config: Config, env: Any, env_params: Any, *, num_envs: int,
                 axis_name: Optional[str], network: Any, loss_terms: Sequence[LossTerm],
                 optimizer: Optional[Optimizer], plan: ExecutionPlan,
                 **settings: Any) -> Algorithm:
        """The algorithm.

        Args:
            config: the run's settings.
            env: the unwrapped env, a gymnax `Environment` (`purerl.envs.make_env`).
            env_params: its params.
            num_envs: the envs B this device steps for the seed.
            axis_name: the device axis to average over when a seed's envs are split over
                devices under `shard_map` (`purerl.core.collectives.pmean`); None when they are not.
            network: a user's network given from Python (`purerl.nets.networks.UserNetwork`), or
                None for what `config.network` describes.
            loss_terms: the user's loss terms (`ppo.loss_terms`, `make_program(loss_terms=)`).
            optimizer: a user's `purerl.algos.learner.Optimizer`, or None for the default.
            plan: the faster paths to take (`purerl.plan.ExecutionPlan`).
            **settings: `settings=`, an instance of `make_fn.settings` from the run's
                `algorithm.<key>` settings and its defaults, its hyperparameters None (their
                values are arrays in `hparams.extra`); given only when it declares settings.

        Returns:
            The `Algorithm(init, update)`, pure functions of arrays.
        """
