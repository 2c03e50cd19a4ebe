"""Keys and random permutations, with as few random-number kernels as the run can have.

On CPU each draw from a key (a split, a `bits`, a `uniform`) is a random-bit generator that
XLA expands into kernels of about 500 ops each; they were the most expensive kernels of the
training program to compile. So the run converts keys without drawing, and makes all the
keys and random numbers a step needs from one draw of bits.
"""

from __future__ import annotations

import math
from typing import List, Optional, Sequence, Tuple

import jax
import jax.numpy as jnp
import numpy as np


def key_words(impl: str) -> int:
    """The number of uint32 words of a key of PRNG `impl`.

    Args:
        impl: a PRNG implementation's name, e.g. "threefry2x32", "unsafe_rbg".

    Returns:
        2 for threefry2x32, 4 for rbg and unsafe_rbg.
    """
    return jax.random.key_data(jax.random.key(0, impl=impl)).shape[-1]


def convert_key(key: jax.Array, impl: str) -> jax.Array:
    """`key` as a key of PRNG `impl`: its words repeated or cut to the new key's width.

    No bits are drawn. A seed's key keeps its seed: JAX's threefry2x32 key of seed s is the
    words `[0, s]` and its rbg key `[0, s, 0, s]`, so `jax.random.key(s)` converts to
    `jax.random.key(s, impl="unsafe_rbg")` and back.

    Args:
        key: typed PRNG keys `[...]`.
        impl: the PRNG implementation to convert to.

    Returns:
        Typed keys `[...]` of `impl`; `key` itself when it is of `impl` already.
    """
    if str(jax.random.key_impl(key)) == impl:
        return key
    data = jax.random.key_data(key)
    words = key_words(impl)
    reps = -(-words // data.shape[-1])
    tiled = jnp.tile(data, (1,) * (data.ndim - 1) + (reps,))[..., :words]
    return jax.random.wrap_key_data(tiled, impl=impl)


def draw_bits(key: jax.Array, *shapes: Tuple[int, ...]) -> List[jax.Array]:
    """uint32 bits of each of `shapes`, all from one draw of `key`'s bits, where a draw per
    shape would be a random-bit generator each.

    Args:
        key: a typed PRNG key.
        *shapes: the shapes to fill.

    Returns:
        uint32 arrays, one of each shape, in order.
    """
    sizes = [math.prod(shape) for shape in shapes]
    bits = jax.random.bits(key, (sum(sizes),), jnp.uint32)
    starts = np.cumsum([0, *sizes])
    return [bits[start:start + size].reshape(shape)
            for shape, start, size in zip(shapes, starts, sizes)]


def keys_from_bits(bits: jax.Array, impl: str) -> jax.Array:
    """Keys `[...]` of PRNG `impl` made of the words `bits [..., key_words(impl)]`.

    Args:
        bits: uint32 `[..., key_words(impl)]`.
        impl: the PRNG implementation.

    Returns:
        Typed keys `[...]`.
    """
    return jax.random.wrap_key_data(bits, impl=impl)


def uniform_from_bits(bits: jax.Array, minval: float = 0.0, maxval: float = 1.0) -> jax.Array:
    """float32 uniform in `[minval, maxval)` of the same shape as the uint32 `bits`, made the
    way `jax.random.uniform` makes them: the same numbers as it gives for a key whose
    `jax.random.bits` are `bits`.

    Args:
        bits: uint32, any shape.
        minval: the lower bound.
        maxval: the upper bound.

    Returns:
        float32, `bits`' shape.
    """
    mantissa = jax.lax.shift_right_logical(bits, jnp.uint32(32 - 23))
    one = jnp.uint32(np.float32(1.0).view(np.uint32))
    floats = jax.lax.bitcast_convert_type(mantissa | one, jnp.float32) - 1.0
    return jnp.maximum(jnp.float32(minval), floats * (jnp.float32(maxval) - minval) + minval)


def gumbel_from_bits(bits: jax.Array) -> jax.Array:
    """Standard Gumbel noise from uint32 `bits`, as `jax.random.gumbel` makes it.

    Args:
        bits: uint32, any shape.

    Returns:
        float32, `bits`' shape.
    """
    return -jnp.log(-jnp.log(uniform_from_bits(bits, np.finfo(np.float32).tiny, 1.0)))


def normal_from_bits(bits: jax.Array) -> jax.Array:
    """Standard normal noise from uint32 `bits`, as `jax.random.normal` makes it.

    Args:
        bits: uint32, any shape.

    Returns:
        float32, `bits`' shape.
    """
    low = np.nextafter(np.float32(-1.0), np.float32(0.0))
    return np.float32(np.sqrt(2)) * jax.lax.erf_inv(uniform_from_bits(bits, low, 1.0))


def _index_bits(size: int) -> int:
    return max(size - 1, 1).bit_length()


def _packs_sort(size: int, packed_bits: int) -> bool:
    """Whether permutations of `size` sort packed uint32 arrays (up to `packed_bits` index
    bits) rather than take `jax.random.permutation` of a key per row."""
    return _index_bits(size) <= packed_bits


# `feistel_permutation`'s rounds, each with one uint32 key: each half of an index's bits is
# changed three times.
SHUFFLE_ROUNDS = 6


def permutation_bits_shape(num: int, size: int, impl: str, packed_bits: int = 0,
                           index_shuffle: bool = False) -> Tuple[int, ...]:
    """The shape of the uint32 bits that `permutations_from_bits` makes `[num, size]` from.

    Args:
        num: the permutations (rows).
        size: each permutation's length.
        impl: the PRNG implementation of a key per row.
        packed_bits: the most index bits a packed sort takes (`ExecutionPlan.packed_sort_bits`);
            0: none.
        index_shuffle: shuffle larger sizes with `feistel_permutation`
            (`ExecutionPlan.index_shuffle`).

    Returns:
        `(num, size)` for a packed sort, `(num, SHUFFLE_ROUNDS)` for round keys, else
            `(num, key_words(impl))`.
    """
    if _packs_sort(size, packed_bits):
        return (num, size)
    if index_shuffle:
        return (num, SHUFFLE_ROUNDS)  # round keys per row
    return (num, key_words(impl))  # a key per row


def permutations_from_bits(bits: jax.Array, size: int, impl: str, packed_bits: int = 0,
                           index_shuffle: bool = False) -> jax.Array:
    """`[num, size]` int32, each row a random permutation of `range(size)`, from uint32 `bits`
    of `permutation_bits_shape(num, size, impl, packed_bits, index_shuffle)`.

    For sizes up to 2^`packed_bits` (`ExecutionPlan.packed_sort_bits`), one sort of a uint32
    array (random high bits, the index in the low bits, at least 12 random bits): XLA:CPU sorts
    a single primitive array with its fast path, where `jax.random.permutation`'s key-value
    sort calls a comparator per comparison (about 4x slower for 4 x 512; at 4 x 2^17 450 ms
    per update against 40-75 ms). Indices with the same random bits stay in index order,
    where a key per row would order them at random; a minibatch, a contiguous run of a
    permutation, is still a uniformly random set but for the tied indices that straddle its
    ends (at 2^17 indices about 4 per end), and the order within a minibatch changes no mean.
    Larger sizes take `feistel_permutation` of each row's round keys with `index_shuffle`
    (`ExecutionPlan.index_shuffle`: no sort), else `jax.random.permutation` of a key per row.

    Args:
        bits: uint32 of `permutation_bits_shape(num, size, ...)`.
        size: each permutation's length.
        impl: the PRNG implementation of a key per row.
        packed_bits: as `permutation_bits_shape` takes it.
        index_shuffle: as `permutation_bits_shape` takes it.

    Returns:
        int32 `[num, size]`.
    """
    if _packs_sort(size, packed_bits):
        index_bits = _index_bits(size)
        packed = (bits >> index_bits << index_bits) | jnp.arange(size, dtype=jnp.uint32)
        return (jax.lax.sort(packed, dimension=1) & ((1 << index_bits) - 1)).astype(jnp.int32)
    if index_shuffle:
        return jax.vmap(lambda keys: feistel_permutation(keys, size))(bits)
    return jax.vmap(lambda k: jax.random.permutation(k, size))(keys_from_bits(bits, impl))


def _mix(x: jax.Array) -> jax.Array:
    """A 32-bit integer hash of uint32 `x`, elementwise (xor-shifts and odd multipliers: C.
    Wellons' "lowbias32", whose every input bit flips each output bit with probability
    close to 1/2)."""
    x = (x ^ (x >> 16)) * jnp.uint32(0x7FEB352D)
    x = (x ^ (x >> 15)) * jnp.uint32(0x846CA68B)
    return x ^ (x >> 16)


def feistel_permutation(round_keys: jax.Array, size: int) -> jax.Array:
    """`[size]` int32, a random permutation of `range(size)` that `round_keys [SHUFFLE_ROUNDS]`
    (uint32) choose, made elementwise with no sort.

    Each index's `k = max(1, ceil(log2 size))` bits go through a Feistel network: split into a
    high and a low half, each round xors one half with a keyed hash (`_mix`) of the other, the
    halves taking turns. Every round is a bijection of `[0, 2^k)`, so their composition is. It
    is a keyed bijection, not a draw from all `size!` permutations (at a power of 2 from 16 up
    every round is an even permutation, so only even ones come out), but the sets it cuts into
    minibatches are as random as a uniform shuffle's, by blocks of steps and of envs and for
    neighbouring indices (tests/test_prng.py). An index that lands at or beyond `size` goes
    through the network again until it lands below (cycle walking): the permutation of
    `[0, 2^k)` restricted to `[0, size)`; the whole array passes again until its last index
    lands, about `k` times just above a power of 2, never at one. Where a sort costs
    `O(size log size)` comparator calls, this is a few dozen integer ops per index and pass
    (timed against the sorts at commit 62d759d).

    Args:
        round_keys: uint32 `[SHUFFLE_ROUNDS]`.
        size: the permutation's length, at least 1.

    Returns:
        int32 `[size]`.
    """
    index_bits = _index_bits(size)
    low_bits = (index_bits + 1) // 2
    low_mask = jnp.uint32((1 << low_bits) - 1)
    high_mask = jnp.uint32((1 << (index_bits - low_bits)) - 1)

    def network(index):
        high, low = index >> low_bits, index & low_mask
        for r in range(SHUFFLE_ROUNDS):
            if r % 2 == 0:
                high = high ^ (_mix(low ^ round_keys[r]) & high_mask)
            else:
                low = low ^ (_mix(high ^ round_keys[r]) & low_mask)
        return (high << low_bits) | low

    shuffled = network(jnp.arange(size, dtype=jnp.uint32))
    if size < 1 << index_bits:  # cycle-walk the indices that land outside
        shuffled = jax.lax.while_loop(
            lambda x: jnp.any(x >= size),
            lambda x: jnp.where(x >= size, network(x), x), shuffled)
    return shuffled.astype(jnp.int32)


def draw_bits_per_device(key: jax.Array, shared: Sequence[Tuple[int, ...]],
                         per_device: Sequence[Tuple[int, ...]], impl: str,
                         axis_name: Optional[str]) -> Tuple[List[jax.Array], List[jax.Array]]:
    """uint32 bits of each of the `shared` shapes, the same on every device of `axis_name`, and
    of each of the `per_device` shapes, each device its own: one draw on one device (None), two
    and a fold-in of the device index on several. A key of shape `s` is bits `(*s, words)`.

    Args:
        key: a typed PRNG key, the same on every device.
        shared: the shapes whose bits every device shares.
        per_device: the shapes whose bits differ by device.
        impl: `key`'s PRNG implementation.
        axis_name: the device axis; None on one device.

    Returns:
        `(shared_bits, per_device_bits)`, lists of uint32 arrays of those shapes.
    """
    if axis_name is None:
        bits = draw_bits(key, *shared, *per_device)
        return bits[:len(shared)], bits[len(shared):]
    *shared_bits, device_key = draw_bits(key, *shared, (key_words(impl),))
    device_key = jax.random.fold_in(keys_from_bits(device_key, impl),
                                    jax.lax.axis_index(axis_name))
    return shared_bits, draw_bits(device_key, *per_device)
