"""The rollout carry packed into one array per dtype."""

import jax
import jax.numpy as jnp
import numpy as np

from purerl.core.packing import batch_packer


def _tree(seed):
    keys = jax.random.split(jax.random.key(seed), 4)
    return {
        "pos": jax.random.normal(keys[0], (3,)),
        "grid": jax.random.uniform(keys[1], (3, 2, 4)) < 0.5,
        "state": (jnp.arange(3, dtype=jnp.int32) + seed, jax.random.normal(keys[2], (3, 5))),
        "time": jax.vmap(lambda _: 0)(jnp.arange(3)),  # weakly typed int32, as gymnax's

        "key": jax.random.split(keys[3], 3),
    }


def _data(x):
    return jax.random.key_data(x) if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key) else x


def test_pack_is_one_array_per_dtype_and_unpack_restores_the_tree():
    tree = _tree(0)
    pack, unpack = batch_packer(tree)
    packed, keys = pack(tree)
    assert {name: x.shape for name, x in packed.items()} == {
        "float32": (3, 6), "bool": (3, 8), "int32": (3, 1), "int32_weak": (3, 1)}
    assert len(keys) == 1
    restored = unpack((packed, keys))
    assert jax.tree.structure(restored) == jax.tree.structure(tree)
    for a, b in zip(jax.tree.leaves(tree), jax.tree.leaves(restored)):
        assert jax.typeof(a) == jax.typeof(b)  # dtype, shape and weak type
        np.testing.assert_array_equal(_data(a), _data(b))


def test_packed_carry_of_a_scan_matches_the_tree_carry():
    tree = _tree(1)
    pack, unpack = batch_packer(tree)

    def step(tree):
        return {"pos": tree["pos"] * 2 + tree["state"][0], "grid": ~tree["grid"],
                "state": (tree["state"][0] + 1, tree["state"][1] - tree["pos"][:, None]),
                "time": tree["time"] + 1,
                "key": jax.vmap(lambda k: jax.random.split(k)[0])(tree["key"])}

    plain = jax.lax.scan(lambda c, _: (step(c), None), tree, None, 5)[0]
    packed = jax.lax.scan(lambda c, _: (pack(step(unpack(c))), None), pack(tree), None, 5)[0]
    for a, b in zip(jax.tree.leaves(plain), jax.tree.leaves(unpack(packed))):
        np.testing.assert_array_equal(_data(a), _data(b))


def test_unpack_takes_any_batch_size():
    """The packer of a `[3, ...]` example unpacks `[6, ...]` arrays of the same trailing
    shapes (a rollout's resets, drawn for all steps at once and sliced per step)."""
    small, large = _tree(2), jax.tree.map(lambda a, b: jnp.concatenate([a, b]), _tree(3), _tree(4))
    pack, unpack = batch_packer(small)
    restored = unpack(pack(large))
    for a, b in zip(jax.tree.leaves(large), jax.tree.leaves(restored)):
        assert jax.typeof(a) == jax.typeof(b)
        np.testing.assert_array_equal(_data(a), _data(b))
