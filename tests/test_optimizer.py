"""The learner's optimizer on the parameter tree: a user's optax optimizer through `make_ppo`,
and `flat_update`, the default's CPU layout."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from purerl.envs import make_env
from purerl.learner import default_optimizer, flat_update, make_optimizer
from purerl.ppo import make_ppo
from purerl.schedules import hyperparams_from_config


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
    assert int(metrics.opt_steps) == 4 and int(metrics.nonfinite) == 0
    for (path, old), new in zip(leaves, jax.tree.leaves(new_state.params)):
        moved = bool(jnp.any(old != new))
        assert moved != _is_value_head(path), jax.tree_util.keystr(path)
    assert int(new_state.opt_state.inner_states["trained"].inner_state[1].count) == 4


def test_flat_update_is_the_tree_update_on_one_vector(make_config):
    """`flat_update(make_optimizer(...))` steps a param tree as the optimizer does on the tree
    (up to the order of the global norm's sums); its state holds `[P]` vectors."""
    keys = jax.random.split(jax.random.key(0), 4)
    params = {"a": jax.random.normal(keys[0], (3, 4)), "b": {"c": jax.random.normal(keys[1], (5,))}}
    grads = [jax.tree.map(lambda x, k=k: 3.0 * jax.random.normal(k, x.shape), params)
             for k in keys[2:]]
    tree, flat = make_optimizer(0.5, 1e-2), flat_update(make_optimizer(0.5, 1e-2))
    results = []
    for optimizer in (tree, flat):
        p, opt_state = params, optimizer.init(params)
        for g in grads:
            updates, opt_state = optimizer.update(g, opt_state, p)
            p = optax.apply_updates(p, updates)
        results.append((p, opt_state))
    (tree_params, _), (flat_params, flat_state) = results
    for a, b in zip(jax.tree.leaves(tree_params), jax.tree.leaves(flat_params)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6, atol=1e-7)
    assert flat_state[1].mu.shape == (17,) and int(flat_state[1].count) == 2


def test_the_default_optimizer_is_flat_in_the_cpu_plan(make_config):
    """The default optimizer is Adam on the tree; the CPU's plan takes `flat_update`."""
    from purerl.plan import CPU, PLAIN

    hp = hyperparams_from_config(make_config())
    params = {"a": jnp.zeros((3, 4)), "b": jnp.zeros(5)}
    assert (PLAIN.flat_optimizer, CPU.flat_optimizer) == (False, True)
    tree = default_optimizer(hp).init(params)[1]
    flat = default_optimizer(hp, flat=CPU.flat_optimizer).init(params)[1]
    assert jax.tree.structure(tree.mu) == jax.tree.structure(params)
    assert flat.mu.shape == (17,)
