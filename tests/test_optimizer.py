"""The learner's optimizer on the parameter tree: a user's optax optimizer through `make_ppo`,
and the raveled layout the CPU plan steps the default's state in."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax.flatten_util import ravel_pytree

from purerl.algos.learner import (
    default_optimizer,
    make_optimizer,
    ravel_like_params,
    unravel_like_params,
)
from purerl.algos.ppo import make_ppo
from purerl.core.schedules import hyperparams_from_config
from purerl.envs import make_env


def _is_value_head(path) -> bool:
    return "value_head" in jax.tree_util.keystr(path)


def frozen_value_head(hp):
    """The default optimizer on every param but the value head's, which stays as it is."""
    def labels(params):
        return jax.tree_util.tree_map_with_path(
            lambda path, _: "frozen" if _is_value_head(path) else "trained", params)

    return optax.multi_transform(
        {"trained": make_optimizer(hp.max_grad_norm, hp.lr), "frozen": optax.set_to_zero()},
        labels)


@pytest.mark.parametrize("target_kl", [None, 1e6])
def test_a_multi_transform_freezes_the_value_head(make_config, target_kl):
    """`optax.multi_transform` per leaf, through `make_ppo(..., optimizer=)`: over one update
    the value head's params stay bit-identical while every other param moves; the optimizer
    state is optax's of the param tree (also through the target-KL stop's selects)."""
    config = make_config(**{"network.shared": True, "ppo.target_kl": target_kl})
    env, env_params = make_env(config.env)
    ppo = make_ppo(config, env, env_params, optimizer=frozen_value_head)
    state = jax.jit(ppo.init)(jax.random.key(0, impl=config.prng_impl),
                              hyperparams_from_config(config))
    leaves = jax.tree_util.tree_flatten_with_path(state.params)[0]
    assert any(_is_value_head(path) for path, _ in leaves)
    adam = state.opt_state.inner_states["trained"].inner_state[1]
    assert ([x.shape for x in jax.tree.leaves(adam.mu)]
            == [x.shape for path, x in leaves if not _is_value_head(path)])
    new_state, metrics = jax.jit(ppo.update)(state)
    assert int(metrics.scalars["opt_steps"]) == 4 and int(metrics.nonfinite) == 0
    for (path, old), new in zip(leaves, jax.tree.leaves(new_state.params)):
        moved = bool(jnp.any(old != new))
        assert moved != _is_value_head(path), jax.tree_util.keystr(path)
    assert int(new_state.opt_state.inner_states["trained"].inner_state[1].count) == 4


def test_the_optimizer_state_ravels_and_unravels_like_the_params():
    """`ravel_like_params` turns each param-shaped subtree of an optimizer state (Adam's `mu`
    and `nu`) into one vector in `ravel_pytree`'s order, leading (member) axes kept, and leaves
    the rest; `unravel_like_params` gives the state back exactly."""
    keys = jax.random.split(jax.random.key(0), 3)
    params = {"a": jax.random.normal(keys[0], (2, 3, 4)),
              "b": {"c": jax.random.normal(keys[1], (2, 5))}}  # 2 members
    state = jax.vmap(make_optimizer(0.5, 1e-2).init)(params)
    state = jax.tree.map(lambda x: x + jax.random.normal(keys[2], x.shape).astype(x.dtype)
                         if x.dtype == jnp.float32 else x, state)
    flat = ravel_like_params(state, params, lead=1)
    adam, flat_adam = state[1], flat[1]
    assert flat_adam.mu.shape == flat_adam.nu.shape == (2, 17)
    assert flat_adam.count.shape == (2,)
    for member in range(2):
        tree_mu = jax.tree.map(lambda x, m=member: x[m], adam.mu)
        np.testing.assert_array_equal(flat_adam.mu[member], ravel_pytree(tree_mu)[0])
    back = unravel_like_params(flat, state, params, lead=1)
    assert jax.tree.structure(back) == jax.tree.structure(state)
    for a, b in zip(jax.tree.leaves(back), jax.tree.leaves(state)):
        np.testing.assert_array_equal(a, b)


def test_the_default_optimizer_is_adam_on_the_tree_in_every_plan(make_config):
    """The default optimizer's state is optax's of the param tree: what the learner keeps
    between updates and a checkpoint holds, whichever plan runs."""
    hp = hyperparams_from_config(make_config())
    params = {"a": jnp.zeros((3, 4)), "b": jnp.zeros(5)}
    adam = default_optimizer(hp).init(params)[1]
    assert jax.tree.structure(adam.mu) == jax.tree.structure(params)
