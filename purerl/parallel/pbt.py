"""Population-based training (PBT) of a run's members: between chunks, every `pbt.every`
updates, the worst `pbt.fraction` of the members copy the params, optimizer state,
observation statistics and hyperparameters of members drawn from the best as many (exploit),
and each copied hyperparameter of `pbt.hparams` is multiplied by one of `pbt.perturb` at random
(explore). Both run in one compiled program on the members' axis: a gather of the runner
state; the host gives it each member's fitness, the mean episode return over the generation's
updates (M floats it already holds), and a key from the run's PBT stream.
"""

from __future__ import annotations

from typing import Callable, Tuple

import jax
import jax.numpy as jnp
import numpy as np

from purerl.algos.algorithm import RunnerState
from purerl.config import Config
from purerl.core.schedules import hyperparam, with_hyperparams

PBT_STREAM = 0x9B7  # the generations' keys: this stream of the run's seed
UNIT_INTERVAL = ("gamma", "gae_lambda")  # kept within [0, 1] when perturbed


def generation_fitness(return_sum: np.ndarray, count: np.ndarray) -> np.ndarray:
    """Each member's mean episode return over a generation's updates, from `[M, K]` sums and
    counts; -inf for a member that ended no episode (it ranks last).

    Args:
        return_sum: summed episode returns `[M, K]` (K updates of the generation).
        count: episodes ended `[M, K]`.

    Returns:
        float32 `[M]`.
    """
    sums, counts = return_sum.sum(axis=1), count.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / counts, -np.inf).astype(np.float32)


def make_pbt_step(config: Config) -> Callable[[RunnerState, jax.Array, jax.Array],
                                              Tuple[RunnerState, jax.Array]]:
    """`step(state, fitness [M], key) -> (state, source [M])`: one generation of exploit and
    explore over the members of `state` (leaves `[M, ...]`); member m now holds what member
    `source[m]` held (itself when it was not replaced), its evolving hyperparameters perturbed
    when it was.

    Args:
        config: the run's config: `num_members`, `pbt.fraction`, `pbt.perturb` and the
            hyperparameters that evolve (`PBTConfig.evolving`).

    Returns:
        `step`, pure and jittable: `fitness` float32 `[M]` (higher is better), `key` a typed
            PRNG key, `source` int32 `[M]`. It copies params, optimizer state and observation
            and return statistics; env states and keys stay each member's own.
    """
    members = config.num_members
    replaced_count = int(config.pbt.fraction * members)
    names = config.pbt.evolving(config.sweep)
    factors = jnp.asarray(config.pbt.perturb, jnp.float32)

    def step(state: RunnerState, fitness: jax.Array, key: jax.Array):
        order = jnp.argsort(fitness)  # ascending, ties by member index
        worst, best = order[:replaced_count], order[members - replaced_count:]
        donor_key, factor_key = jax.random.split(key)
        donors = best[jax.random.randint(donor_key, (replaced_count,), 0, replaced_count)]
        source = jnp.arange(members).at[worst].set(donors)
        replaced = jnp.zeros(members, bool).at[worst].set(True)

        def copy(tree):
            return jax.tree.map(lambda x: x[source], tree)

        hparams = copy(state.hparams)
        choice = jax.random.randint(factor_key, (len(names), members), 0, len(factors))
        perturbed = {}
        for i, name in enumerate(names):
            value = hyperparam(hparams, name) * jnp.where(replaced, factors[choice[i]], 1.0)
            perturbed[name] = jnp.clip(value, 0.0, 1.0) if name in UNIT_INTERVAL else value
        normalizer = state.normalizer._replace(obs=copy(state.normalizer.obs),
                                               ret=copy(state.normalizer.ret))
        state = state._replace(params=copy(state.params), opt_state=copy(state.opt_state),
                               normalizer=normalizer,
                               hparams=with_hyperparams(hparams, perturbed))
        return state, source

    return step
