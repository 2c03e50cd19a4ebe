"""Key conversion, keys from one draw, and random permutations."""

import jax
import numpy as np
import pytest

from purerl.prng import convert_key, draw_keys, random_permutations


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
def test_draw_keys_gives_distinct_keys_of_each_shape(impl):
    key = jax.random.key(3, impl=impl)
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


@pytest.mark.parametrize("size", [6, 512, 9000])
def test_random_permutations(size):
    perms = np.asarray(random_permutations(jax.random.key(0), 3, size))
    assert perms.shape == (3, size) and perms.dtype == np.int32
    for row in perms:
        np.testing.assert_array_equal(np.sort(row), np.arange(size))
    assert len({tuple(row) for row in perms}) == 3


def test_random_permutations_are_uniform():
    """Every position of a 4-element permutation takes each value a quarter of the time."""
    perms = np.asarray(random_permutations(jax.random.key(1), 4000, 4))
    counts = np.stack([(perms == v).sum(0) for v in range(4)])  # [value, position]
    assert np.all(np.abs(counts - 1000) < 5 * np.sqrt(4000 * 0.25 * 0.75)), counts
