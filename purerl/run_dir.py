"""A run directory before training: whether the request fits what it holds (the update to resume
from), and the network params that `init_from` starts a run from."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from purerl.config import Config, ConfigError


def resume_point(config: Config, run_dir: Path, checkpoints, num_devices: int) -> Optional[int]:
    """The update to resume from (None for a new run), after checking that the run directory
    fits the request; raises ConfigError."""
    from purerl.checkpoint import check_resumable

    latest = checkpoints.latest()
    if not config.resume:
        if latest is not None:
            raise ConfigError(
                f"{run_dir} already holds a run (checkpoints up to update {latest}): pass "
                "resume=true to continue it, or choose another hydra.run.dir")
        return None
    if latest is None:
        raise ConfigError(f"resume=true: {checkpoints.directory} has no complete checkpoint "
                          "(pass the run's directory as hydra.run.dir=...)")
    check_resumable(checkpoints.restore_record(latest), config, num_devices, run_dir)
    return latest


def params_from(run_dir: Path, like, init_member: Optional[int] = None):
    """The network params (host arrays `[M, ...]`) of another run's final checkpoint: member
    `init_member`'s for every member (default: a sweep's best member; else each seed its own,
    or the one seed's for all), shape-checked against `like`, this run's abstract params;
    raises ConfigError."""
    import jax
    import numpy as np

    from purerl.checkpoint import restore_run
    from purerl.trained import checked_member

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
    return jax.tree.map(lambda p, l: np.broadcast_to(p, l.shape), params, like)
