"""Keys and random permutations, with as few random-number kernels as the run can have.

On CPU each draw from a key (a split, a `bits`, a `uniform`) is a random-bit generator that
XLA expands into kernels of about 500 ops each; they were the most expensive kernels of the
training program to compile. So the run converts keys without drawing, and derives all the
keys a step needs from one draw.
"""

from __future__ import annotations

import math
from typing import List, Tuple

import jax
import jax.numpy as jnp


def key_words(impl: str) -> int:
    """The number of uint32 words of a key of PRNG `impl`."""
    return jax.random.key_data(jax.random.key(0, impl=impl)).shape[-1]


def convert_key(key: jax.Array, impl: str) -> jax.Array:
    """`key` as a key of PRNG `impl`: its words repeated or cut to the new key's width.

    No bits are drawn. A seed's key keeps its seed: JAX's threefry2x32 key of seed s is the
    words `[0, s]` and its rbg key `[0, s, 0, s]`, so `jax.random.key(s)` converts to
    `jax.random.key(s, impl="unsafe_rbg")` and back.
    """
    if str(jax.random.key_impl(key)) == impl:
        return key
    data = jax.random.key_data(key)
    words = key_words(impl)
    reps = -(-words // data.shape[-1])
    tiled = jnp.tile(data, (1,) * (data.ndim - 1) + (reps,))[..., :words]
    return jax.random.wrap_key_data(tiled, impl=impl)


def draw_keys(key: jax.Array, *shapes: Tuple[int, ...]) -> List[jax.Array]:
    """Keys of each of `shapes` (same PRNG as `key`), all from one draw of `key`'s bits, where
    a split per shape would be a random-bit generator each."""
    impl = str(jax.random.key_impl(key))
    words = key_words(impl)
    sizes = [math.prod(shape) * words for shape in shapes]
    bits = jax.random.bits(key, (sum(sizes),), jnp.uint32)
    keys, start = [], 0
    for shape, size in zip(shapes, sizes):
        keys.append(jax.random.wrap_key_data(bits[start:start + size].reshape(*shape, words),
                                             impl=impl))
        start += size
    return keys


# Up to this many index bits, `random_permutations` packs a random key and the index into one
# uint32 (at least 19 random bits: about 32 tied pairs among 8192 indices, each kept in index
# order, where a separate key array would order them at random).
_PACKED_SORT_MAX_INDEX_BITS = 13


def random_permutations(key: jax.Array, num: int, size: int) -> jax.Array:
    """`[num, size]` int32, each row a random permutation of `range(size)`.

    Small sizes sort one uint32 array (random high bits, the index in the low bits): XLA:CPU
    sorts a single primitive array with its fast path, where `jax.random.permutation`'s
    key-value sort calls a comparator per comparison (about 4x slower for 4 x 512).
    """
    index_bits = max(size - 1, 1).bit_length()
    if index_bits > _PACKED_SORT_MAX_INDEX_BITS:
        return jax.vmap(lambda k: jax.random.permutation(k, size))(jax.random.split(key, num))
    bits = jax.random.bits(key, (num, size), jnp.uint32)
    packed = (bits >> index_bits << index_bits) | jnp.arange(size, dtype=jnp.uint32)
    return (jax.lax.sort(packed, dimension=1) & ((1 << index_bits) - 1)).astype(jnp.int32)
