"""A saved run read back: whether a config continues the run a checkpoint holds
(`check_resumable`, `config_differences`), the config it was saved with (`load_config`), and a
run directory's checkpoint restored into the state its config describes (`restore_run`). The
checkpoints themselves and their record: `purerl.storage.checkpoint`."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Dict, List, NamedTuple, Tuple

import jax

from purerl.config import RESUMABLE_CHANGES, Config, ConfigError, flat_settings
from purerl.parallel.program import make_program
from purerl.storage.checkpoint import BEST, CHECKPOINTS, Checkpoints, config_record

if TYPE_CHECKING:  # for the type alone
    from purerl.algos.algorithm import RunnerState
    from purerl.nets.agent import Agent

log = logging.getLogger("purerl")


def config_differences(saved: Dict, config: Config,
                       ignore: Tuple[str, ...] = RESUMABLE_CHANGES) -> List[str]:
    """The settings that differ between a saved config and `config`.

    Args:
        saved: the config of a checkpoint's record; a setting that it lacks (added to purerl
            later) counts as its default.
        config: the config now.
        ignore: the top-level settings (sections) not compared.

    Returns:
        `key=saved -> now` for every setting that differs, sorted by key.
    """
    old = flat_settings(config_record(_from_dict(Config, saved)))
    new = flat_settings(config_record(config))
    keys = sorted(k for k in set(old) | set(new) if k.split(".")[0] not in ignore)
    return [f"{k}={old.get(k)!r} -> {new.get(k)!r}" for k in keys if old.get(k) != new.get(k)]


def check_resumable(record: Dict, config: Config, num_devices: int, directory: Path,
                    plan: str) -> None:
    """Checks that `config` continues the run whose checkpoint `record` this is.

    Only the settings of `RESUMABLE_CHANGES` may differ, and `total_timesteps` may grow: a
    finished or stopped run then trains more. The devices, processes and plan may differ too
    (where the envs divide over the devices: `validate` checks that): the run goes on from the
    saved state, and the log says that the rest of it is not bit for bit what it would have
    been where it was saved (docs/runs.md says why).

    Args:
        record: the checkpoint's record.
        config: the config of the run that resumes.
        num_devices: the devices it runs on.
        directory: the run directory, as the messages name it.
        plan: the name of the execution plan it runs (`purerl.plan.plan_name`).

    Raises:
        ConfigError: another setting differs, or the checkpoint is past `total_timesteps`.
    """
    resume = f"resume={str(config.resume).lower()}"
    processes = jax.process_count()
    saved = (record.get("devices", num_devices), record.get("processes", 1),
             record.get("plan", "cpu"))  # purerl 0.2.0 saved no plan; it ran on CPUs
    now = (num_devices, processes, plan)
    if saved != now:
        log.info("%s: %s was trained on %d device(s) of %d process(es) with plan %s, this run "
                 "has %d device(s) of %d process(es) with plan %s: it goes on from the saved "
                 "state, not bit for bit as it would have gone on there (docs/runs.md)",
                 resume, directory, *saved, *now)
    changed = config_differences(record["config"], config,
                                 ignore=RESUMABLE_CHANGES + ("total_timesteps",))
    if changed:
        more = f" and {len(changed) - 3} more" if len(changed) > 3 else ""
        shown = ", ".join(changed[:3]) + more
        raise ConfigError(
            f"{resume}: {directory} was trained with other settings ({shown}); only "
            f"{', '.join(RESUMABLE_CHANGES)} may change on resume, and total_timesteps grow")
    if record["update"] > config.num_updates:
        raise ConfigError(
            f"{resume}: total_timesteps={config.total_timesteps} is {config.num_updates} "
            f"updates, fewer than the {record['update']} that {directory}'s checkpoint holds")


def load_config(record: Dict) -> Config:
    """The `Config` saved in a checkpoint's record.

    Args:
        record: the checkpoint's record.

    Returns:
        The config, the settings that the record lacks at their defaults.
    """
    return _from_dict(Config, record["config"])


def _from_dict(cls, values: Dict):
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name not in values:
            continue
        value = values[f.name]
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else None
        kwargs[f.name] = (_from_dict(type(default), value)
                          if dataclasses.is_dataclass(default) else value)
    return cls(**kwargs)


def final_checkpoint(run_dir: Path, which: str = "final") -> Tuple[Checkpoints, int]:
    """The checkpoints of a run directory and the update of its newest checkpoint.

    Args:
        run_dir: the run directory.
        which: "final" (checkpoints/) or "best" (checkpoints/best/).

    Returns:
        `(checkpoints, update)`; the caller closes the checkpoints.

    Raises:
        ConfigError: `which` is neither, or there is no such checkpoint.
    """
    directory = Path(run_dir) / CHECKPOINTS
    if which == BEST:
        directory = directory / BEST
    elif which != "final":
        raise ConfigError(f"checkpoint={which!r} must be final or best")
    if not directory.is_dir():
        kind = " with checkpoint.best=true" if which == BEST else ""
        raise ConfigError(f"{run_dir}: no {directory.relative_to(Path(run_dir))}/ directory "
                          f"(is it a purerl run directory{kind}?)")
    checkpoints = Checkpoints(directory)
    update = checkpoints.latest()
    if update is None:
        raise ConfigError(f"{directory}: no complete checkpoint")
    return checkpoints, update


class SavedRun(NamedTuple):
    """A run restored from its checkpoint.

    Attributes:
        update: the checkpoint's update.
        config: the config the run was saved with.
        state: the `RunnerState`, leaves `[S, ...]` on this process's first device.
        record: the checkpoint's record.
        agent: the agent its algorithm acts with (`purerl.parallel.program.Program.agent`).
    """

    update: int
    config: Config
    state: RunnerState
    record: Dict
    agent: Agent


def restore_run(run_dir: Path, which: str = "final", **given) -> SavedRun:
    """A run directory's newest intact checkpoint, restored into the state its saved config
    describes.

    Args:
        run_dir: the run directory.
        which: "final" (checkpoints/) or "best" (checkpoints/best/).
        **given: what the run was given from Python, as `make_program` takes it (`network`,
            `loss_terms`, ...).

    Returns:
        The restored run.

    Raises:
        ConfigError: no such checkpoint, or none that restores.
    """
    checkpoints, update = final_checkpoint(run_dir, which)
    try:
        update, record = checkpoints.record_intact(update)
        config = load_config(record)
        # On this process's first device, whatever devices the run was saved from.
        device = jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
        program = make_program(config, **given)
        like = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=device),
                            jax.eval_shape(program.init, jax.random.key(0)))
        update, state, record = checkpoints.restore_intact(update, like)
    finally:
        checkpoints.close()
    return SavedRun(update, config, state, record, program.agent)
