"""Joining the processes of a multi-host run: JAX's multi-controller runtime
(`jax.distributed`), started before anything touches a device.

Each process then sees every device of every process in `jax.devices()`; the run's programs map
one global mesh over them (`purerl.parallel.devices.make_mesh`), and XLA's collectives cross the
processes (gloo between CPU processes).
"""

from __future__ import annotations

import os
import sys
from typing import List, Sequence

import jax
import numpy as np
from jax.experimental import multihost_utils

from purerl.config import DistributedConfig


def initialize(dist: DistributedConfig) -> None:
    """`jax.distributed.initialize` with `dist`'s settings (None ones detected by JAX: TPU pods,
    SLURM, Open MPI), once per process; nothing when `dist.enabled` is false. Call it before
    any JAX device is touched, and so before importing gymnax (or `purerl.parallel.program`,
    `purerl.envs`), which makes arrays on import.

    Args:
        dist: the `distributed` settings.
    """
    if not dist.enabled or jax.distributed.is_initialized():
        return
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(
        coordinator_address=dist.coordinator, num_processes=dist.num_processes,
        process_id=dist.process_id,
        local_device_ids=None if dist.local_device_ids is None else list(dist.local_device_ids),
        heartbeat_timeout_seconds=dist.heartbeat_timeout_s)


def writes_files() -> bool:
    """Whether this process writes the run's files and console lines: process 0 alone.

    Returns:
        True in process 0.
    """
    return jax.process_index() == 0


def to_host(tree):
    """`tree`'s arrays as numpy arrays, whole: gathered from every process when there are
    several (each holds only its devices' shards).

    Args:
        tree: a pytree of arrays, leaves sharded over the run's devices.

    Returns:
        The tree of numpy arrays, each the whole global array.
    """
    if jax.process_count() == 1:
        return jax.device_get(tree)

    return multihost_utils.process_allgather(tree, tiled=True)


def process_max(values: Sequence[int]) -> List[int]:
    """Each of `values` (ints or bools), its maximum over the processes (a collective: every
    process must call it, with as many values).

    Args:
        values: ints or bools, as many in every process.

    Returns:
        The maxima, ints, in order.
    """
    if jax.process_count() == 1:
        return [int(v) for v in values]

    gathered = multihost_utils.process_allgather(np.asarray(values, np.int32))
    return np.asarray(gathered).max(axis=0).tolist()


def each_process(text: str) -> list:
    """`text` of every process, by process index (a collective: every process must call it).

    Args:
        text: this process's text.

    Returns:
        `process_count()` strings.
    """
    if jax.process_count() == 1:
        return [text]

    data = np.frombuffer(text.encode(), np.uint8)
    sizes = np.asarray(multihost_utils.process_allgather(np.int32(data.size))).reshape(-1)
    padded = np.zeros(int(sizes.max()), np.uint8)
    padded[:data.size] = data
    rows = np.asarray(multihost_utils.process_allgather(padded)).reshape(len(sizes), -1)
    return [bytes(row[:size]).decode() for row, size in zip(rows, sizes)]


def lost_peer(error: Exception) -> bool:
    """Whether `error` is a collective that failed because another process of the run is gone
    (killed, crashed, unreachable): a JAX runtime error in a run of several processes.

    Args:
        error: the exception a collective raised.

    Returns:
        True for a `JaxRuntimeError` with more than one process.
    """
    return jax.process_count() > 1 and isinstance(error, jax.errors.JaxRuntimeError)


def exit_lost_peer(error: Exception, run_dir) -> None:
    """Ends this process at once, exit code 1, with one line: the run lost a process. Skips
    the exit handlers, whose shutdown barrier would wait for the lost process and then abort;
    what is on disk (metrics rows, finished checkpoints) stays valid.

    Args:
        error: the error that the lost process caused (`lost_peer`).
        run_dir: the run directory, named in the line (the restart command).
    """
    reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    print(f"purerl: error: process {jax.process_index()} of {jax.process_count()} lost another "
          f"process of the run ({reason}); its finished checkpoints are kept: restart every "
          f"process with resume=auto hydra.run.dir={run_dir}", file=sys.stderr, flush=True)
    sys.stdout.flush()
    os._exit(1)
