import jax
import jax.numpy as jnp
import numpy as np
import pytest

from purerl.networks import ActorCritic, _orthogonal_from_normal, image_patches, init_params


@pytest.mark.parametrize("shape, kernel, stride", [((2, 10, 10, 3), 3, 1), ((1, 7, 5, 2), 3, 2),
                                                   ((1, 6, 6, 1), 4, 2)])
def test_patch_matmul_equals_a_same_convolution(shape, kernel, stride):
    x = jax.random.normal(jax.random.key(0), shape)
    w = jax.random.normal(jax.random.key(1), (kernel, kernel, shape[-1], 4))
    expected = jax.lax.conv_general_dilated(x, w, (stride, stride), "SAME",
                                            dimension_numbers=("NHWC", "HWIO", "NHWC"))
    got = image_patches(x, kernel, stride) @ w.reshape(-1, 4)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("obs_shape", [(10, 10, 4), (10, 5)])
def test_cnn_actor_critic_shapes(obs_shape):
    net = ActorCritic(num_outputs=3, hidden_sizes=(32,), activation="relu", conv_channels=(8,))
    params = init_params(net, jax.random.key(0), jnp.zeros((1, *obs_shape)))
    logits, value = net.apply(params, jnp.ones((6, *obs_shape)))
    assert logits.shape == (6, 3) and value.shape == (6,)
    values = net.apply(params, jnp.ones((2, 3, *obs_shape)), 2, method=ActorCritic.value)
    assert values.shape == (2, 3)


def test_shared_trunk_has_one_torso():
    shared = ActorCritic(num_outputs=2, shared=True)
    towers = ActorCritic(num_outputs=2, shared=False)
    obs = jnp.zeros((1, 4))
    assert "value_torso" not in init_params(shared, jax.random.key(0), obs)["params"]
    params = init_params(towers, jax.random.key(0), obs)["params"]
    assert "policy_torso" not in params and params["towers"]["kernel_0"].shape == (2, 4, 64)


def test_tokenizer_quantizes_with_bounds_and_squashes_unbounded_dims():
    from purerl.networks import Tokenizer

    tok = Tokenizer(low=(-1.0, -3e38), high=(1.0, 3e38), vocab_size=4, embed_dim=1)
    params = tok.init(jax.random.key(0), jnp.zeros((1, 2)))
    table = params["params"]["embedding"][..., 0]  # [D, V]
    x = jnp.array([[-1.0, -10.0], [-0.2, 0.0], [0.6, 0.3], [1.0, 10.0]])
    out = tok.apply(params, x)
    # dim 0 in [-1, 1]: tokens 0, 1, 3, 3 (clipped); dim 1 via (tanh + 1) / 2: 0, 2, 2, 3
    np.testing.assert_allclose(out[:, 0], table[0, jnp.array([0, 1, 3, 3])])
    np.testing.assert_allclose(out[:, 1], table[1, jnp.array([0, 2, 2, 3])])


def test_two_towers_are_two_orthogonal_mlps_in_one():
    """The batched towers: each tower's kernels orthogonal with gain sqrt 2 on their own, the
    towers different, and each tower's output what a plain MLP with its weights computes."""
    from purerl.networks import MLP

    towers = MLP((8, 6), "tanh", num_towers=2)
    x = jax.random.normal(jax.random.key(1), (5, 3))
    params = init_params(towers, jax.random.key(0), x)["params"]
    kernel = params["kernel_1"]  # [2, 8, 6]
    for k in kernel:
        np.testing.assert_allclose(k.T @ k, 2.0 * np.eye(6), atol=1e-5)
    assert not np.allclose(kernel[0], kernel[1])
    out = towers.apply({"params": params}, x)
    assert out.shape == (2, 5, 6)
    for t in range(2):
        h = x
        for i in range(2):
            h = jnp.tanh(h @ params[f"kernel_{i}"][t] + params[f"bias_{i}"][t])
        np.testing.assert_allclose(out[t], h, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shape", [(4, 64), (64, 64), (64, 2), (7, 3)])
def test_orthogonal_kernel_is_jax_orthogonal_init_of_the_same_normal_sample(shape):
    key = jax.random.key(3)
    expected = jax.nn.initializers.orthogonal(0.5)(key, shape)
    np.testing.assert_allclose(_orthogonal_from_normal(jax.random.normal(key, shape), 0.5),
                               expected, rtol=1e-5, atol=1e-6)


def test_init_params_draws_each_kernel_orthogonal_with_its_gain():
    net = ActorCritic(num_outputs=3, hidden_sizes=(16, 8))
    params = init_params(net, jax.random.key(0), jnp.zeros((1, 5)))["params"]
    heads = params["towers"]["kernel_head"]  # [2, 8, 3]: policy, value (its first column)
    np.testing.assert_allclose(heads[0].T @ heads[0], 0.01 ** 2 * np.eye(3), atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(heads[1][:, 0]), 1.0, rtol=1e-5)
    np.testing.assert_array_equal(heads[1][:, 1:], 0)
    np.testing.assert_array_equal(params["towers"]["bias_head"], 0)
    first = params["towers"]["kernel_0"]  # [2, 5, 16]: orthogonal rows (5 < 16)
    for k in first:
        np.testing.assert_allclose(k @ k.T, 2.0 * np.eye(5), atol=1e-5)
    assert not np.allclose(first[0], first[1])
    again = init_params(net, jax.random.key(0), jnp.zeros((1, 5)))["params"]
    other = init_params(net, jax.random.key(1), jnp.zeros((1, 5)))["params"]
    np.testing.assert_array_equal(again["towers"]["kernel_1"], params["towers"]["kernel_1"])
    assert not np.allclose(other["towers"]["kernel_1"], params["towers"]["kernel_1"])
    shared = init_params(ActorCritic(num_outputs=3, hidden_sizes=(8,), shared=True),
                         jax.random.key(0), jnp.zeros((1, 5)))["params"]
    for name, gain in {"policy_head": 0.01, "value_head": 1.0}.items():
        kernel = shared[name]["kernel"]  # [8, out]
        np.testing.assert_allclose(kernel.T @ kernel, gain ** 2 * np.eye(kernel.shape[1]),
                                   atol=1e-5)


def test_batched_heads_are_the_two_heads_of_separate_towers():
    """The towers' batched heads compute what a policy head and a value head on each tower's
    features would, and the value head's padding columns get no gradient."""
    net = ActorCritic(num_outputs=3, hidden_sizes=(8,))
    variables = init_params(net, jax.random.key(2), jnp.zeros((1, 5)))
    towers = variables["params"]["towers"]
    x = jax.random.normal(jax.random.key(3), (4, 5))
    features = [jnp.tanh(x @ towers["kernel_0"][t] + towers["bias_0"][t]) for t in range(2)]
    logits, value = net.apply(variables, x)
    np.testing.assert_allclose(logits, features[0] @ towers["kernel_head"][0], atol=1e-6)
    np.testing.assert_allclose(value, features[1] @ towers["kernel_head"][1][:, 0], atol=1e-6)
    grads = jax.grad(lambda v: sum(jnp.sum(out) for out in net.apply(v, x)))(variables)
    head_grad = grads["params"]["towers"]["kernel_head"][1]
    assert np.abs(head_grad[:, 0]).sum() > 0
    np.testing.assert_array_equal(head_grad[:, 1:], 0)


@pytest.mark.parametrize("kwargs, obs_shape", [
    ({}, (5,)), ({"shared": True}, (5,)), ({"gaussian": True}, (5,)),
    ({"conv_channels": (4,), "hidden_sizes": (8,)}, (6, 6, 2)),
])
def test_policy_and_value_methods_match_the_full_network(kwargs, obs_shape):
    net = ActorCritic(num_outputs=3, **kwargs)
    params = init_params(net, jax.random.key(0), jnp.zeros((1, *obs_shape)))
    obs = jax.random.normal(jax.random.key(1), (2, 3, *obs_shape))
    policy_out, value = net.apply(params, obs, 2)
    alone = net.apply(params, obs, 2, method=ActorCritic.policy)
    for a, b in zip(jax.tree.leaves(alone), jax.tree.leaves(policy_out)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(net.apply(params, obs, 2, method=ActorCritic.value), value,
                               rtol=1e-5, atol=1e-6)
