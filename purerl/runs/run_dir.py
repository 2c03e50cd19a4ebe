"""A run directory: one run writes it at a time (`lock_run_dir`); before training, whether the
request fits what it holds (the update to resume from) and the network params that `init_from`
starts a run from."""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import re
import socket
from pathlib import Path
from typing import Iterator, List, Optional

import jax
import numpy as np

from purerl.config import Config, ConfigError
from purerl.parallel.distributed import each_process, writes_files
from purerl.storage.restoring import check_resumable, restore_run
from purerl.storage.trained import checked_member

log = logging.getLogger("purerl")
LOCK = ".purerl.lock"  # held (an OS file lock) by the process whose run writes the directory
HYDRA_FILES = re.compile(r"\.hydra|.*\.log")  # what Hydra writes before a job starts
# What a run writes before its first checkpoint, beside Hydra's (its lock apart): a directory
# that holds only these and no checkpoint is a run that never saved one, which resume=auto
# starts afresh.
RUN_FILES = re.compile(HYDRA_FILES.pattern + r"|(metrics|pbt)\.jsonl(\.tmp)?|summary\.json(\.tmp)?"
                       r"|learning_curve\.png|events\.out\.tfevents\..*|wandb|checkpoints")


@contextlib.contextmanager
def lock_run_dir(run_dir: Path) -> Iterator[None]:
    """Holds `run_dir` for this run (created if missing) while within: an OS lock on its
    `.purerl.lock`, which the OS releases when the process ends however it ends. Raises
    ConfigError in every process, naming the holder's process id and host, when another
    run holds it. Process 0 holds it for the processes of a multi-process run (a
    collective).

    Args:
        run_dir: the run directory.

    Yields:
        None, while the lock is held.

    Raises:
        ConfigError: another run holds the directory.
    """
    handle, holder = None, ""
    if writes_files():
        run_dir.mkdir(parents=True, exist_ok=True)
        handle = open(run_dir / LOCK, "a+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            handle.close()
            handle = None
        else:
            handle.seek(0)
            handle.truncate()
            handle.write(f"process {os.getpid()} on {socket.gethostname()}\n")
            handle.flush()
    refused = [h for h in each_process(holder) if h]
    try:
        if refused:
            raise ConfigError(f"{run_dir} is in use by another run ({refused[0]}): wait for it "
                              "to end, or choose another hydra.run.dir")
        yield
    finally:
        if handle is not None:
            handle.close()


def resume_point(config: Config, run_dir: Path, checkpoints, num_devices: int,
                 plan: str) -> Optional[int]:
    """The update to resume from (None for a new run) on `num_devices` devices with the plan
    named `plan`, after checking that the run directory fits the request (`resume`: false,
    true or auto); raises ConfigError.

    Args:
        config: the run's config (`resume`).
        run_dir: the run directory.
        checkpoints: its `Checkpoints`.
        num_devices: the devices this run runs on.
        plan: the execution plan's name (`plan_name`).

    Returns:
        The update of the newest intact checkpoint, or None.

    Raises:
        ConfigError: `resume=false` with checkpoints there, `resume=true` without, files that
            are no run's, no intact checkpoint, or a config that does not continue the saved
            run (`purerl.storage.restoring.check_resumable`).
    """
    latest = checkpoints.latest()
    if config.resume is False:
        if latest is not None:
            raise ConfigError(
                f"{run_dir} already holds a run (checkpoints up to update {latest}): pass "
                "resume=auto to continue it, or choose another hydra.run.dir")
        return None
    if latest is None:
        found = _contents(run_dir)
        foreign = [name for name in found if not RUN_FILES.fullmatch(name)]
        if foreign:
            raise ConfigError(
                f"resume={str(config.resume).lower()}: {run_dir} holds no checkpoint but "
                f"other files ({_names(foreign)}): is it a purerl run directory? Choose another "
                "hydra.run.dir")
        if config.resume == "auto":
            if any(not HYDRA_FILES.fullmatch(name) for name in found):
                log.warning("resume=auto: %s holds no checkpoint (a run that saved none): "
                            "starting afresh", run_dir)
            return None
        raise ConfigError(
            f"resume=true: {run_dir} holds no checkpoint"
            + (f" (only {_names(found)})" if found else " (it is empty)")
            + ": pass resume=auto to start a run there, or the run's own directory as "
            "hydra.run.dir=...")
    update, record = checkpoints.record_intact(latest)
    check_resumable(record, config, num_devices, run_dir, plan)
    return update


def _names(names: List[str]) -> str:
    return ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")


def _contents(run_dir: Path) -> List[str]:
    """The names in `run_dir` but its lock, sorted (none when it does not exist)."""
    if not run_dir.is_dir():
        return []
    return sorted(p.name for p in run_dir.iterdir() if p.name != LOCK)


def params_from(run_dir: Path, like, init_member: Optional[int] = None):
    """The network params (host arrays `[M, ...]`) of another run's final checkpoint: member
    `init_member`'s for every member (default: a sweep's best member; else each seed its own,
    or the one seed's for all), shape-checked against `like`, this run's abstract params;
    raises ConfigError.

    Args:
        run_dir: the other run's directory (`init_from`).
        like: this run's params, leaves `[M, ...]` (arrays or shape structs).
        init_member: the member to take (`init_member`), or None.

    Returns:
        numpy params in `like`'s structure, leaves `[M, ...]` (broadcast from one member).

    Raises:
        ConfigError: no intact checkpoint, `init_member` out of range, a member count that
            is neither 1 nor M, or params of other shapes.
    """
    saved = restore_run(run_dir)
    source, params = saved.config, saved.state.params
    num_members = jax.tree.leaves(like)[0].shape[0]
    member = checked_member(saved, run_dir, init_member, "init_member", best_by_default=False)
    if member is not None:
        params = jax.tree.map(lambda x: x[member:member + 1], params)
    elif source.num_members not in (1, num_members):
        raise ConfigError(f"init_from={run_dir}: it has {source.num_members} members, this "
                          f"run {num_members}; use 1 or {num_members}, or pick one by "
                          "init_member")
    mine = dict(jax.tree_util.tree_flatten_with_path(like)[0])
    theirs = dict(jax.tree_util.tree_flatten_with_path(params)[0])
    for path in sorted(set(mine) | set(theirs), key=jax.tree_util.keystr):
        shapes = [None if leaf is None else tuple(leaf.shape[1:])
                  for leaf in (theirs.get(path), mine.get(path))]
        if shapes[0] != shapes[1]:
            there, here = (shape or "missing" for shape in shapes)
            raise ConfigError(
                f"init_from={run_dir}: params{jax.tree_util.keystr(path)} has shape {there} "
                f"there and {here} here (network and env must match)")
    return jax.tree.map(lambda p, target: np.broadcast_to(p, target.shape), params, like)
