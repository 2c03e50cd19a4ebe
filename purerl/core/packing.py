"""Packing a batched pytree into one array per dtype, for the carry of a loop on CPU.

XLA:CPU copies each carried leaf of a loop whose new value is computed from the old values of
the others; an env state of 9 leaves cost 9 copy kernels per rollout step. Packed, the carry
is one buffer per dtype: one copy each, and unpacking is slices that fuse into their users.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Tuple

import jax
import jax.numpy as jnp
import numpy as np

Packed = Tuple[Dict[str, jax.Array], List[Any]]  # ({dtype name: [B, n]}, PRNG-key leaves)


def batch_packer(example) -> Tuple[Callable[[Any], Packed], Callable[[Packed], Any]]:
    """`(pack, unpack)` for pytrees shaped like `example`, whose leaves are all `[B, ...]`.

    `pack(tree)` concatenates the leaves of each dtype, flattened to `[B, size]`, into one
    `[B, n]` array, keyed by dtype name (`int32_weak` for weakly typed int32 leaves); PRNG-key
    leaves are passed through as they are. `unpack(pack(tree))` is `tree`, bit for bit and
    type for type, for any batch size B (the example fixes only the trailing shapes).

    Args:
        example: a pytree (arrays or `jax.ShapeDtypeStruct`s), leaves `[B, ...]`.

    Returns:
        `(pack, unpack)`; `pack(tree) -> ({dtype name: [B, n]}, key leaves)`.
    """
    leaves, treedef = jax.tree.flatten(example)
    is_key = [jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key) for leaf in leaves]
    groups: Dict[str, List[int]] = {}
    for i, leaf in enumerate(leaves):
        if not is_key[i]:  # weakly typed leaves apart: they must come back weakly typed
            weak = "_weak" if jax.typeof(leaf).weak_type else ""
            groups.setdefault(jnp.dtype(leaf.dtype).name + weak, []).append(i)
    shapes = [leaf.shape[1:] for leaf in leaves]  # per batch entry
    sizes = [int(np.prod(shape, dtype=int)) for shape in shapes]

    def pack(tree) -> Packed:
        leaves = jax.tree.leaves(tree)
        packed = {name: jnp.concatenate([leaves[i].reshape(leaves[i].shape[0], -1)
                                          for i in members], axis=1)
                  for name, members in groups.items()}
        return packed, [leaf for leaf, key in zip(leaves, is_key) if key]

    def unpack(packed_tree: Packed):
        packed, keys = packed_tree
        out: List[Any] = [None] * len(shapes)
        for name, members in groups.items():
            start = 0
            for i in members:
                part = packed[name][:, start:start + sizes[i]]
                out[i] = part.reshape(part.shape[0], *shapes[i])
                start += sizes[i]
        keys = iter(keys)
        return jax.tree.unflatten(treedef, [next(keys) if key else x
                                            for x, key in zip(out, is_key)])

    return pack, unpack
