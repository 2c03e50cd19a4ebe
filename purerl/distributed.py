"""Joining the processes of a multi-host run: JAX's multi-controller runtime
(`jax.distributed`), started before anything touches a device.

Each process then sees every device of every process in `jax.devices()`; the run's programs map
one global mesh over them (`purerl.parallel.make_mesh`), and XLA's collectives cross the
processes (gloo between CPU processes).
"""

from __future__ import annotations

import jax

from purerl.config import DistributedConfig


def initialize(dist: DistributedConfig) -> None:
    """`jax.distributed.initialize` with `dist`'s settings (None ones detected by JAX: TPU pods,
    SLURM, Open MPI), once per process; nothing when `dist.enabled` is false. Call it before
    any JAX device is touched, and so before importing gymnax (or `purerl.program`, `purerl.envs`),
    which makes arrays on import."""
    if not dist.enabled or jax.distributed.is_initialized():
        return
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(
        coordinator_address=dist.coordinator, num_processes=dist.num_processes,
        process_id=dist.process_id,
        local_device_ids=None if dist.local_device_ids is None else list(dist.local_device_ids),
        heartbeat_timeout_seconds=dist.heartbeat_timeout_s)
