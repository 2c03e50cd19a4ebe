"""The controller: hyperparameters as a pytree of arrays, and their schedules over updates.

Every hyperparameter that does not change array shapes travels through the jitted code as a
float32 array in `HyperParams`, so sweeps can `vmap` over it. A schedule multiplies a base value
by a factor of the run's progress (update / num_updates), evaluated inside jit.
"""

from __future__ import annotations

import math
from dataclasses import replace
from types import MappingProxyType
from typing import Callable, Dict, Mapping, NamedTuple, Optional

import jax
import jax.numpy as jnp

from purerl.config import ALGORITHM_PREFIX, Config, ScheduleConfig


class HyperParams(NamedTuple):
    """The hyperparameters that travel through the compiled program as arrays.

    Each is a float32 array: `[]` for one member inside an algorithm, `[M]` over the members
    of a run (`member_hyperparams`), so that a sweep `vmap`s over them and PBT copies and
    perturbs them. `RunnerState.hparams` holds the base values; each update moves the
    scheduled ones to their value at its progress (`ppo.schedule`).

    Attributes:
        lr: the learning rate (`ppo.lr`).
        ent_coef: the entropy bonus's weight (`ppo.ent_coef`).
        clip_eps: the ratio clip, also the value clip (`ppo.clip_eps`).
        vf_coef: the value loss's weight (`ppo.vf_coef`).
        gamma: the discount (`ppo.gamma`).
        gae_lambda: GAE's lambda (`ppo.gae_lambda`).
        max_grad_norm: the global gradient-norm clip (`ppo.max_grad_norm`).
        target_kl: the target-KL stop (`ppo.target_kl`); +inf when it is off.
        extra: an algorithm's own hyperparameters (`purerl.hyperparameter`), `{name: array}`
            (`algorithm.<name>` in sweeps and PBT, which copies them with the rest); None for
            an algorithm without any, as PPO.
    """

    lr: jax.Array
    ent_coef: jax.Array
    clip_eps: jax.Array
    vf_coef: jax.Array
    gamma: jax.Array
    gae_lambda: jax.Array
    max_grad_norm: jax.Array
    target_kl: jax.Array  # +inf when target-KL stopping is off
    extra: Optional[Dict[str, jax.Array]] = None  # an algorithm's own, by name


# The `ppo` settings that HyperParams carries
PPO_HYPERPARAMS = tuple(name for name in HyperParams._fields if name != "extra")


def hyperparams_from_config(config: Config, own: Mapping[str, float] = MappingProxyType({})
                            ) -> HyperParams:
    """The config's hyperparameters, unscheduled, for one member.

    Args:
        config: the run's config: `ppo`'s hyperparameters.
        own: the algorithm's own hyperparameters' values by name
            (`validation.check_algorithm_settings`); none for PPO.

    Returns:
        `HyperParams`, each a float32 `[]` array; `target_kl` +inf when it is null, `extra`
            `own`'s values as arrays (None when it is empty).
    """
    ppo = config.ppo
    target_kl = math.inf if ppo.target_kl is None else ppo.target_kl
    values = {name: getattr(ppo, name) for name in PPO_HYPERPARAMS if name != "target_kl"}
    return HyperParams(**{k: jnp.float32(v) for k, v in values.items()},
                       target_kl=jnp.float32(target_kl),
                       extra={k: jnp.float32(v) for k, v in own.items()} or None)


def hyperparam(hparams: HyperParams, name: str) -> jax.Array:
    """One hyperparameter by the name sweeps and PBT give it.

    Args:
        hparams: the hyperparameters (any leading axes).
        name: PPO's (`lr`, ...) or an algorithm's own, `algorithm.<name>`.

    Returns:
        Its array.
    """
    if name.startswith(ALGORITHM_PREFIX):
        return hparams.extra[name[len(ALGORITHM_PREFIX):]]
    return getattr(hparams, name)


def with_hyperparams(hparams: HyperParams, values: Mapping[str, jax.Array]) -> HyperParams:
    """`hparams` with some hyperparameters replaced, named as `hyperparam` takes them.

    Args:
        hparams: the hyperparameters.
        values: the new values by name.

    Returns:
        The new `HyperParams`.
    """
    own = {name[len(ALGORITHM_PREFIX):]: value for name, value in values.items()
           if name.startswith(ALGORITHM_PREFIX)}
    ppo = {name: value for name, value in values.items() if not name.startswith(ALGORITHM_PREFIX)}
    return hparams._replace(**ppo, **({"extra": {**hparams.extra, **own}} if own else {}))


def program_settings(config: Config) -> Config:
    """`config` without what only the programs' arguments carry: the seed (the key) and the
    base hyperparameters' values (`HyperParams`), zeroed; target-KL stopping stays on or off.
    Two configs with equal program settings build the same programs.

    Args:
        config: the run's config.

    Returns:
        The config with `seed` 0 and `ppo`'s `HyperParams` values 0.0 (`target_kl` 0.0 or
            None).
    """
    values = {name: 0.0 for name in PPO_HYPERPARAMS}
    values["target_kl"] = None if config.ppo.target_kl is None else 0.0
    return replace(config, seed=0, ppo=replace(config.ppo, **values))


def member_hyperparams(config: Config, own: Mapping[str, float] = MappingProxyType({})
                       ) -> HyperParams:
    """Every member's base hyperparameters, leaves `[M]` (M = config.num_members): the config's
    values, with the swept ones taken from each member's grid point (member m is grid point
    m // num_seeds).

    Args:
        config: the run's config, with its `sweep` grid.
        own: the algorithm's own hyperparameters' base values by name, as
            `hyperparams_from_config` takes them.

    Returns:
        `HyperParams`, each float32 `[M]`; `extra` None without `own`.
    """
    base = hyperparams_from_config(config, own)
    grid = config.sweep.grid()
    columns = {name: jnp.repeat(jnp.asarray([point[name] for point in grid], jnp.float32),
                                config.num_seeds)
               for name in config.sweep.swept()}
    members = jax.tree.map(lambda value: jnp.broadcast_to(value, (config.num_members,)), base)
    return with_hyperparams(members, columns)


def schedule_factor(schedule: ScheduleConfig, progress: jax.Array) -> jax.Array:
    """The multiplier of `schedule` at `progress` in [0, 1] (a float32 scalar array).

    Args:
        schedule: the schedule: constant, piecewise (`boundaries`, `values`), or linear,
            cosine or exponential from 1 to `end` over the first `fraction` of the run.
        progress: float32 `[]`, the update over `num_updates`.

    Returns:
        float32 `[]`.

    Raises:
        ValueError: `schedule.kind` is none of those.
    """
    if schedule.kind == "constant":
        return jnp.float32(1.0)
    if schedule.kind == "piecewise":
        index = jnp.searchsorted(jnp.asarray(schedule.boundaries, jnp.float32), progress,
                                 side="right")
        return jnp.asarray(schedule.values, jnp.float32)[index]
    t = jnp.clip(progress / schedule.fraction, 0.0, 1.0)
    end = jnp.float32(schedule.end)
    if schedule.kind == "linear":
        return 1.0 + (end - 1.0) * t
    if schedule.kind == "cosine":
        return end + (1.0 - end) * 0.5 * (1.0 + jnp.cos(jnp.pi * t))
    if schedule.kind == "exponential":
        return jnp.power(end, t)
    raise ValueError(f"unknown schedule kind {schedule.kind!r}")


def make_schedules(schedules: Mapping[str, ScheduleConfig], num_updates: int
                   ) -> Callable[[HyperParams, jax.Array], HyperParams]:
    """`scheduled(base, update) -> HyperParams`: `base` with each hyperparameter named in
    `schedules` (`Config.schedules()`: PPO's, and an algorithm's own as `algorithm.<name>`)
    moved to its value at update `update` (an int32 scalar) of `num_updates`.

    Args:
        schedules: the scheduled hyperparameters' schedules by name.
        num_updates: the run's updates, progress 1.

    Returns:
        `scheduled(base, update)`, jittable: `base` a `HyperParams` of one member (leaves
            `[]`), `update` int32 `[]`.
    """

    def scheduled(base: HyperParams, update: jax.Array) -> HyperParams:
        progress = update.astype(jnp.float32) / num_updates
        return with_hyperparams(base, {
            name: hyperparam(base, name) * schedule_factor(schedule, progress)
            for name, schedule in schedules.items()})

    return scheduled
