"""Key conversion, keys and numbers from one draw, and random permutations."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from purerl.core.prng import (
    SHUFFLE_ROUNDS,
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
from purerl.plan import CPU


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


def _permutations(key, num, size, packed_bits=CPU.packed_sort_bits,
                  index_shuffle=CPU.index_shuffle):
    """As the trainer shuffles: bits of `permutation_bits_shape` from one draw."""
    shape = permutation_bits_shape(num, size, "unsafe_rbg", packed_bits, index_shuffle)
    (bits,) = draw_bits(key, shape)
    return np.asarray(permutations_from_bits(bits, size, "unsafe_rbg", packed_bits,
                                             index_shuffle))


@pytest.mark.parametrize("size, path", [(6, "packed"), (512, "packed"), (9000, "packed"),
                                        (9000, "key"), (9000, "feistel")])
def test_permutations_from_bits(size, path):
    """Sizes up to 2^packed_bits sort packed bits `[num, size]` (the CPU plan: 20); larger
    ones (here: a limit of 13) take a key per row, or round keys with `index_shuffle`."""
    packed_bits = 20 if path == "packed" else 13
    index_shuffle = path == "feistel"
    shape = permutation_bits_shape(3, size, "unsafe_rbg", packed_bits, index_shuffle)
    assert shape == {"packed": (3, size), "key": (3, 4), "feistel": (3, SHUFFLE_ROUNDS)}[path]
    perms = _permutations(jax.random.key(0, impl="unsafe_rbg"), 3, size, packed_bits,
                          index_shuffle)
    assert perms.shape == (3, size) and perms.dtype == np.int32
    for row in perms:
        np.testing.assert_array_equal(np.sort(row), np.arange(size))
    assert len({tuple(row) for row in perms}) == 3


@pytest.mark.parametrize("packed_bits", [CPU.packed_sort_bits, 0])
def test_random_permutations_are_uniform(packed_bits):
    """Every position of a permutation of 4 (5) indices takes each value a quarter (a fifth) of
    the time, by the packed sort and by the Feistel network (cycle-walked from 8 indices at
    5)."""
    for size in (4, 5):
        perms = _permutations(jax.random.key(1, impl="unsafe_rbg"), 4000, size, packed_bits,
                              index_shuffle=True)
        counts = np.stack([(perms == v).sum(0) for v in range(size)])  # [value, position]
        p = 1 / size
        assert np.all(np.abs(counts - 4000 * p) < 5 * np.sqrt(4000 * p * (1 - p))), counts


def test_the_feistel_network_draws_every_permutation_alike():
    """All 24 orderings of 4 indices, each about 1/24 of 24,000 draws."""
    perms = _permutations(jax.random.key(3, impl="unsafe_rbg"), 24_000, 4, packed_bits=0,
                          index_shuffle=True)
    _, counts = np.unique(perms, axis=0, return_counts=True)
    assert len(counts) == 24
    assert np.all(np.abs(counts - 1000) < 5 * np.sqrt(24_000 / 24 * 23 / 24)), counts


@pytest.mark.parametrize("size", [1, 2, 3, 4096, 4097, 6143])
def test_a_feistel_permutation_is_a_permutation_of_any_size(size):
    """Powers of 2 map onto themselves; other sizes cycle-walk, from just past a power of 2
    (half the indices land outside at first) to 3/4 of the next."""
    perms = _permutations(jax.random.key(size, impl="unsafe_rbg"), 2, size, packed_bits=0,
                          index_shuffle=True)
    for row in perms:
        np.testing.assert_array_equal(np.sort(row), np.arange(size))


def test_minibatches_of_a_feistel_permutation_are_random_sets():
    """At 2^19 + 2^17 indices, the trainer's `[T, B]` samples flattened, each quarter of a
    permutation (a minibatch) holds about a quarter of every block of steps (high bits) and of
    envs (low bits), and two neighbouring indices (the next env, the next step) share a
    minibatch a quarter of the time, as they would in a uniformly random permutation."""
    size, envs, blocks = 2**19 + 2**17, 1024, 16
    perms = _permutations(jax.random.key(4, impl="unsafe_rbg"), 2, size, packed_bits=0,
                          index_shuffle=True)
    for row in perms:
        minibatch_of = np.empty(size, np.int64)
        minibatch_of[row] = np.arange(size) // (size // 4)
        for minibatch in row.reshape(4, -1):
            for block_of in (minibatch // (size // blocks), minibatch % blocks):
                counts = np.bincount(block_of, minlength=blocks)
                std = np.sqrt(size / blocks * 0.25 * 0.75)  # about the hypergeometric's
                assert np.all(np.abs(counts - size / blocks / 4) < 5 * std), counts
        for step in (1, envs):
            shared = np.mean(minibatch_of[:-step] == minibatch_of[step:])
            assert abs(shared - 0.25) < 5 * np.sqrt(0.25 * 0.75 / size), (step, shared)


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
