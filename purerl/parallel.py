"""Mapping a per-seed, per-device function over seeds (`vmap`) and devices (`shard_map`), and
the collectives over the device axis (which are identities on one device)."""

from __future__ import annotations

from typing import Callable, Optional

import jax
import numpy as np
from jax.flatten_util import ravel_pytree
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


def pmean(tree, axis_name: Optional[str]):
    """The mean of `tree` over the devices of `axis_name` (None: `tree` itself), as one
    all-reduce of the whole tree raveled into a vector.

    Args:
        tree: a pytree of float arrays.
        axis_name: the device axis, or None.

    Returns:
        `tree`'s structure and shapes.
    """
    if axis_name is None:
        return tree
    flat, unravel = ravel_pytree(tree)
    return unravel(jax.lax.pmean(flat, axis_name))


def psum(x, axis_name: Optional[str]):
    """The sum of `x` over the devices of `axis_name` (None: `x` itself).

    Args:
        x: an array or pytree.
        axis_name: the device axis, or None.

    Returns:
        `x`'s structure and shapes.
    """
    return x if axis_name is None else jax.lax.psum(x, axis_name)


def per_device(tree, axis_name: Optional[str]):
    """`tree` typed as per-device values (`shard_map`'s varying), as the envs' states must be
    to stay the carry of a scan, and as the parameters are made for the gradient (their
    gradient then stays per device, without an implicit all-reduce in the backward pass;
    `pmean` averages it in one).

    Args:
        tree: a pytree of arrays.
        axis_name: the device axis, or None.

    Returns:
        `tree`, each leaf varying over `axis_name`.
    """
    if axis_name is None:
        return tree

    def cast(x):
        if axis_name in jax.typeof(x).manual_axis_type.varying:
            return x
        return jax.lax.pcast(x, axis_name, to="varying")

    return jax.tree.map(cast, tree)
