"""Key conversion, keys and numbers from one draw, and random permutations."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from purerl.plan import CPU
from purerl.prng import (
    convert_key,
    draw_bits,
    gumbel_from_bits,
    key_words,
    keys_from_bits,
    normal_from_bits,
    permutation_bits_shape,
    permutations_from_bits,
    uniform_from_bits,
)


@pytest.mark.parametrize("seed", [0, 7, 2**31 - 1])
def test_convert_key_maps_a_seeds_key_to_the_same_seeds_key(seed):
    data = jax.random.key_data
    rbg = convert_key(jax.random.key(seed), "unsafe_rbg")
    assert str(jax.random.key_impl(rbg)) == "unsafe_rbg"
    np.testing.assert_array_equal(data(rbg), data(jax.random.key(seed, impl="unsafe_rbg")))
    np.testing.assert_array_equal(data(convert_key(rbg, "threefry2x32")),
                                  data(jax.random.key(seed)))
    same = jax.random.key(seed, impl="rbg")
    assert convert_key(same, "rbg") is same


@pytest.mark.parametrize("impl", ["unsafe_rbg", "threefry2x32"])
def test_keys_from_one_draw_are_distinct_keys_of_each_shape(impl):
    key = jax.random.key(3, impl=impl)

    def draw_keys(key, *shapes):  # as the trainer makes its keys
        words = key_words(impl)
        return [keys_from_bits(bits, impl)
                for bits in draw_bits(key, *((*shape, words) for shape in shapes))]

    first, grid, single = draw_keys(key, (2,), (3, 4), ())
    assert (first.shape, grid.shape, single.shape) == ((2,), (3, 4), ())
    assert str(jax.random.key_impl(grid)) == impl
    words = np.concatenate([jax.random.key_data(k).reshape(-1, jax.random.key_data(k).shape[-1])
                            for k in (first, grid, single)])
    assert len({tuple(w) for w in words}) == 2 + 12 + 1
    again = draw_keys(key, (2,), (3, 4), ())[1]
    np.testing.assert_array_equal(jax.random.key_data(again), jax.random.key_data(grid))
    draws = jax.vmap(lambda k: jax.random.uniform(k))(grid.reshape(-1))
    assert len(set(np.asarray(draws).tolist())) == 12


@pytest.mark.parametrize("impl", ["unsafe_rbg", "threefry2x32"])
def test_draw_bits_is_one_draw_cut_into_shapes(impl):
    key = jax.random.key(5, impl=impl)
    first, grid = draw_bits(key, (3,), (2, 4))
    assert (first.shape, grid.shape, grid.dtype) == ((3,), (2, 4), np.uint32)
    whole = np.asarray(jax.random.bits(key, (11,), jnp.uint32))
    np.testing.assert_array_equal(np.concatenate([first, np.ravel(grid)]), whole)


@pytest.mark.parametrize("impl", ["unsafe_rbg", "threefry2x32"])
def test_numbers_from_bits_are_jax_randoms_numbers(impl):
    """Uniform, Gumbel and normal numbers made of a key's bits are exactly the numbers that
    `jax.random` draws from that key (both compiled: run op by op, `x * a + b` is not fused
    into one rounding)."""
    shape = (1000, 3)

    @jax.jit
    def both(key):
        bits = jax.random.bits(key, shape, jnp.uint32)
        ours = uniform_from_bits(bits, -2.0, 3.0), gumbel_from_bits(bits), normal_from_bits(bits)
        theirs = (jax.random.uniform(key, shape, minval=-2.0, maxval=3.0),
                  jax.random.gumbel(key, shape), jax.random.normal(key, shape))
        return ours, theirs

    ours, theirs = both(jax.random.key(9, impl=impl))
    for a, b in zip(ours, theirs):
        np.testing.assert_array_equal(a, b)


def _permutations(key, num, size, packed_bits=CPU.packed_sort_bits):
    """As the trainer shuffles: bits of `permutation_bits_shape` from one draw."""
    (bits,) = draw_bits(key, permutation_bits_shape(num, size, "unsafe_rbg", packed_bits))
    return np.asarray(permutations_from_bits(bits, size, "unsafe_rbg", packed_bits))


@pytest.mark.parametrize("size, packed", [(6, True), (512, True), (9000, True), (9000, False)])
def test_permutations_from_bits(size, packed):
    """Sizes up to 2^packed_bits sort packed bits `[num, size]` (the CPU plan: 20); larger
    ones (here: a limit of 13) take a key per row."""
    packed_bits = 20 if packed else 13
    shape = permutation_bits_shape(3, size, "unsafe_rbg", packed_bits)
    assert shape == ((3, size) if packed else (3, 4))
    perms = _permutations(jax.random.key(0, impl="unsafe_rbg"), 3, size, packed_bits)
    assert perms.shape == (3, size) and perms.dtype == np.int32
    for row in perms:
        np.testing.assert_array_equal(np.sort(row), np.arange(size))
    assert len({tuple(row) for row in perms}) == 3


def test_random_permutations_are_uniform():
    """Every position of a 4-element permutation takes each value a quarter of the time."""
    perms = _permutations(jax.random.key(1, impl="unsafe_rbg"), 4000, 4)
    counts = np.stack([(perms == v).sum(0) for v in range(4)])  # [value, position]
    assert np.all(np.abs(counts - 1000) < 5 * np.sqrt(4000 * 0.25 * 0.75)), counts


def test_minibatches_of_a_large_packed_permutation_are_random_sets():
    """At 2^17 indices (15 random bits, about 4 tied indices per value), each quarter of a
    permutation (a minibatch) holds about a quarter of every block of indices."""
    size, blocks = 2**17, 16
    perms = _permutations(jax.random.key(2, impl="unsafe_rbg"), 2, size)
    for row in perms:
        for minibatch in row.reshape(4, -1):
            counts = np.bincount(minibatch // (size // blocks), minlength=blocks)
            std = np.sqrt(size / blocks * 0.25 * 0.75)  # about the hypergeometric's
            assert np.all(np.abs(counts - size / blocks / 4) < 5 * std), counts
