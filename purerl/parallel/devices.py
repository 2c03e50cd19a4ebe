"""Mapping a per-seed, per-device function over seeds (`vmap`) and devices (`shard_map`); the
collectives over the device axis that the mapped function calls are `purerl.core.collectives`'."""

from __future__ import annotations

from typing import Callable, Optional

import jax
import numpy as np
from jax.sharding import AxisType, Mesh

DEVICE_AXIS = "devices"


def make_mesh(num_devices: Optional[int] = None) -> Mesh:
    """A one-axis mesh over the first `num_devices` devices of all processes (default: all;
    one process's are its local devices).

    Args:
        num_devices: how many devices; None (or 0): all of them.

    Returns:
        The `Mesh`, its axis `DEVICE_AXIS`.
    """
    devices = jax.devices()[: num_devices or jax.device_count()]
    return Mesh(np.array(devices), (DEVICE_AXIS,), axis_types=(AxisType.Auto,))


def shard_over_devices(fn: Callable, *, mesh: Mesh, in_specs, out_specs,
                       collectives: bool = True) -> Callable:
    """`shard_map` of `fn` over `mesh`; on a single device, `fn` itself. Without `collectives`
    (`fn` never communicates across devices) its values are not typed per device.

    Args:
        fn: the per-device function.
        mesh: the device mesh (`make_mesh`).
        in_specs: `shard_map`'s partition specs of the inputs.
        out_specs: those of the outputs.
        collectives: whether `fn` communicates over the device axis (checks varying values).

    Returns:
        The mapped function.
    """
    if mesh.size == 1:
        return fn
    return jax.shard_map(fn, mesh=mesh, in_specs=in_specs, out_specs=out_specs,
                         check_vma=collectives)


def map_seeds(fn: Callable, num_seeds: int, in_axes=0) -> Callable:
    """`vmap` of `fn` over a leading seed axis of size `num_seeds`.

    With one seed the function runs unbatched and its outputs gain the axis, so a
    `lax.cond` inside it stays a real branch instead of becoming a select.

    Args:
        fn: the per-seed function.
        num_seeds: the seed axis's size `S`.
        in_axes: as `jax.vmap` takes them: 0 (the seed axis) or None (shared) per argument.

    Returns:
        The function of inputs with the leading axis `[S, ...]` where mapped; outputs
            `[S, ...]`.
    """
    if num_seeds > 1:
        return jax.vmap(fn, in_axes=in_axes)

    def single(*args):
        axes = in_axes if isinstance(in_axes, tuple) else (in_axes,) * len(args)
        args = [arg if axis is None else jax.tree.map(lambda x: x[0], arg)
                for arg, axis in zip(args, axes)]
        return jax.tree.map(lambda x: x[None], fn(*args))

    return single
