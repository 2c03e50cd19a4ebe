"""The collectives over the device axis that `shard_map` names (`parallel.DEVICE_AXIS`), as an
algorithm calls them: each is an identity when the axis is None (one device, or a seed's envs
not split)."""

from __future__ import annotations

from typing import Optional

import jax
from jax.flatten_util import ravel_pytree


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
