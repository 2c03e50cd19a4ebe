import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import tiny_config
from gymnax.environments import spaces
from hydra import compose, initialize_config_dir

from purerl.cli.preflight import load_config
from purerl.config import ConfigError, NetworkConfig, config_dir
from purerl.envs.action_spaces import ActionSpec
from purerl.nets.layers import (
    TOWER_KERNELS,
    Conv,
    conv_output_size,
    init_params,
    kernel_normal_size,
    orthogonal_from_normal,
)
from purerl.nets.networks import ActorCritic, make_network
from purerl.validation import validate

NATURE = {"conv_channels": (32, 64, 64), "conv_kernels": (8, 4, 3), "conv_strides": (4, 2, 1)}


@pytest.mark.parametrize("shape, kernel, stride, padding, out_hw", [
    ((2, 10, 10, 3), 3, 1, "SAME", (10, 10)), ((1, 7, 5, 2), 3, 2, "SAME", (4, 3)),
    ((1, 6, 6, 1), 4, 2, "SAME", (3, 3)), ((2, 10, 10, 3), 3, 1, "VALID", (8, 8)),
    ((1, 9, 12, 2), 4, 3, "VALID", (2, 3)), ((1, 3, 3, 2), 3, 1, "VALID", (1, 1)),
])
def test_conv_patch_matmul_equals_lax_conv(shape, kernel, stride, padding, out_hw):
    """Both paths of a `Conv` on the same params: the patch matmul (XLA:CPU's) and
    `lax.conv_general_dilated` (every other backend's), of the hand-computed output size."""
    x = jax.random.normal(jax.random.key(0), shape)
    patch, plain = (Conv(4, kernel, stride, padding, patch_matmul=flag) for flag in (True, False))
    params = plain.init(jax.random.key(1), x)
    params = jax.tree.map(lambda p: p + 0.1, params)  # a bias that is not zero
    assert tuple(conv_output_size(n, kernel, stride, padding) for n in shape[1:3]) == out_hw
    expected = plain.apply(params, x)
    assert expected.shape == (shape[0], *out_hw, 4)
    np.testing.assert_allclose(patch.apply(params, x), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("obs_shape", [(10, 10, 4), (10, 5)])
def test_cnn_actor_critic_shapes(obs_shape):
    net = ActorCritic(num_outputs=3, hidden_sizes=(32,), activation="relu", conv_channels=(8,),
                      conv_kernels=(3,), conv_strides=(1,), conv_padding=("SAME",))
    params = init_params(net, jax.random.key(0), jnp.zeros((1, *obs_shape)))
    logits, value = net.apply(params, jnp.ones((6, *obs_shape)))
    assert logits.shape == (6, 3) and value.shape == (6,)
    values = net.apply(params, jnp.ones((2, 3, *obs_shape)), 2, method=ActorCritic.value)
    assert values.shape == (2, 3)


@pytest.mark.parametrize("padding, flat", [("VALID", 1 * 1 * 64), ("SAME", 5 * 5 * 64)])
def test_per_layer_cnn_output_size(padding, flat):
    """The Nature CNN's layers on 36x36x2 images: VALID 36 -> (36-8)//4+1 = 8 -> (8-4)//2+1 = 3
    -> 3-3+1 = 1; SAME ceil(36/4) = 9 -> ceil(9/2) = 5 -> 5."""
    net = ActorCritic(num_outputs=3, hidden_sizes=(16,), activation="relu", shared=True,
                      conv_padding=(padding,) * 3, **NATURE)
    obs = jnp.zeros((2, 36, 36, 2))
    params = jax.eval_shape(net.init, jax.random.key(0), obs)["params"]["policy_torso"]
    assert [params[f"Dense_{i}"]["kernel"].shape for i in range(3)] == [
        (8 * 8 * 2, 32), (4 * 4 * 32, 64), (3 * 3 * 64, 64)]
    assert params["MLP_0"]["Dense_0"]["kernel"].shape == (flat, 16)
    logits, value = jax.eval_shape(lambda: net.apply(net.init(jax.random.key(0), obs), obs))
    assert logits.shape == (2, 3) and value.shape == (2,)


def _cnn_config(**network):
    return tiny_config(network=NetworkConfig(hidden_sizes=[16], activation="relu", **network))


@pytest.mark.parametrize("network, message", [
    ({"conv_channels": [16, 32], "conv_kernels": [3], "conv_strides": [1, 1],
      "conv_padding": ["SAME", "SAME"]},
     "network.conv_kernels has 1 entries, network.conv_channels 2: one per convolution"),
    ({"conv_channels": [16], "conv_kernels": [3], "conv_strides": [1]},
     "network.conv_padding has 0 entries, network.conv_channels 1: one per convolution"),
    ({"conv_channels": [16], "conv_kernels": [3], "conv_strides": [0], "conv_padding": ["SAME"]},
     r"network.conv_strides=\[0\] must be positive"),
    ({"conv_channels": [16], "conv_kernels": [3], "conv_strides": [1], "conv_padding": ["same"]},
     r"network.conv_padding=\['same'\]: each entry must be one of SAME, VALID"),
])
def test_per_layer_cnn_settings_are_checked(network, message):
    with pytest.raises(ConfigError, match=f"^{message}$"):
        validate(_cnn_config(**network))


IMAGE_SPEC = ActionSpec("categorical", (3,))


def test_convolutions_that_do_not_fit_the_observations_are_a_config_error():
    """The Nature CNN on MinAtar's 10x10: 10 -> (10-8)//4+1 = 1, then a 4x4 kernel on 1x1."""
    config = validate(_cnn_config(conv_channels=[32, 64, 64], conv_kernels=[8, 4, 3],
                                  conv_strides=[4, 2, 1], conv_padding=["VALID"] * 3))
    with pytest.raises(ConfigError, match=(
            r"^network.conv_kernels=\[8, 4, 3\], conv_strides=\[4, 2, 1\], conv_padding="
            r"\['VALID', 'VALID', 'VALID'\] do not fit 10x10 observations: convolution 2 "
            r"\(4x4, stride 2, VALID\) gets 1x1, smaller than its kernel$")):
        make_network(config.network, IMAGE_SPEC, (10, 10, 4))
    make_network(config.network, IMAGE_SPEC, (36, 36, 4))  # the smallest that fits
    same = validate(_cnn_config(conv_channels=[8], conv_kernels=[12], conv_strides=[1],
                                conv_padding=["SAME"]))
    make_network(same.network, IMAGE_SPEC, (10, 10))  # SAME pads a large kernel


@pytest.mark.parametrize("group, fits, flat", [("cnn", True, 10 * 10 * 16),
                                               ("minatar_cnn", True, 8 * 8 * 16),
                                               ("nature_cnn", False, None)])
def test_cnn_config_groups_load_and_build_for_minatar(group, fits, flat):
    with initialize_config_dir(str(config_dir()), version_base="1.3"):
        config = load_config(compose("config", overrides=["+env=breakout-minatar",
                                                          f"network={group}"]), 1)
    lines = (config_dir() / "network" / f"{group}.yaml").read_text().splitlines()
    assert all("#" in line for line in lines)  # every field commented
    layers = len(config.network.conv_channels)
    assert layers == {"cnn": 1, "minatar_cnn": 1, "nature_cnn": 3}[group]
    obs_space = spaces.Box(0, 1, (10, 10, 4))
    if not fits:
        with pytest.raises(ConfigError, match="do not fit 10x10 observations"):
            make_network(config.network, IMAGE_SPEC, obs_space.shape)
        return
    net = make_network(config.network, IMAGE_SPEC, obs_space.shape)
    params = jax.eval_shape(net.init, jax.random.key(0), jnp.zeros((1, 10, 10, 4)))["params"]
    assert params["policy_torso"]["MLP_0"]["Dense_0"]["kernel"].shape[0] == flat


def test_shared_trunk_has_one_torso():
    shared = ActorCritic(num_outputs=2, shared=True)
    towers = ActorCritic(num_outputs=2, shared=False)
    obs = jnp.zeros((1, 4))
    assert "value_torso" not in init_params(shared, jax.random.key(0), obs)["params"]
    params = init_params(towers, jax.random.key(0), obs)["params"]
    assert "policy_torso" not in params and params["towers"]["kernel_0"].shape == (2, 4, 64)


def test_tokenizer_quantizes_with_bounds_and_squashes_unbounded_dims():
    from purerl.nets.layers import Tokenizer

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
    from purerl.nets.layers import MLP

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
    np.testing.assert_allclose(orthogonal_from_normal(jax.random.normal(key, shape), 0.5),
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


SMALL_CNN = {"conv_channels": (4, 6), "conv_kernels": (3, 2), "conv_strides": (1, 2),
             "conv_padding": ("SAME", "VALID"), "hidden_sizes": (8,), "activation": "relu"}
INIT_CASES = [({"hidden_sizes": (16, 8)}, (5,)), ({"hidden_sizes": (8,), "shared": True}, (5,)),
              ({"gaussian": True, "hidden_sizes": (8, 8)}, (3,)), (SMALL_CNN, (7, 7, 2)),
              ({**SMALL_CNN, "shared": True}, (6, 6)),
              ({"vocab_size": 4, "embed_dim": 2, "obs_low": (-1.0,) * 3,
                "obs_high": (1.0,) * 3}, (3,))]


def _kernel_gains(path: str, kernel, num_outputs: int):
    """`(gain, drawn columns)` of each `[in, out]` matrix of the kernel at `path`: the heads
    0.01 (policy) and 1 (value), every hidden layer and convolution sqrt 2."""
    if "kernel_head" in path:  # the batched towers' heads: policy, value
        return [(0.01, num_outputs), (1.0, 1)]
    gain = 0.01 if "policy_head" in path else 1.0 if "value_head" in path else np.sqrt(2.0)
    matrices = kernel.reshape(-1, *kernel.shape[-2:])
    return [(gain, kernel.shape[-1])] * len(matrices)


def _assert_ppo_init(params, num_outputs: int):
    """Every kernel orthogonal with its gain (W^T W = gain^2 I, or W W^T when it is wider
    than tall), its undrawn columns zero, the towers' kernels different; biases and log-std
    zero; the serialized representation's embedding table not zero."""
    kernels = 0
    for path, leaf in jax.tree_util.tree_leaves_with_path(params):
        path, leaf = jax.tree_util.keystr(path), np.asarray(leaf)
        if "kernel" in path:
            kernels += 1
            matrices = leaf.reshape(-1, *leaf.shape[-2:])
            for matrix, (gain, columns) in zip(matrices, _kernel_gains(path, leaf, num_outputs),
                                               strict=True):
                drawn = matrix[:, :columns]
                gram = drawn.T @ drawn if drawn.shape[0] >= columns else drawn @ drawn.T
                np.testing.assert_allclose(gram, gain ** 2 * np.eye(len(gram)),
                                           atol=1e-5 * max(gain ** 2, 1e-2), err_msg=path)
                np.testing.assert_array_equal(matrix[:, columns:], 0, err_msg=path)
            if len(matrices) == 2 and "head" not in path:
                assert not np.allclose(matrices[0], matrices[1]), path
        elif "bias" in path or "log_std" in path:
            np.testing.assert_array_equal(leaf, 0, err_msg=path)
        else:
            assert "embedding" in path and np.abs(leaf).sum() > 0, path
    assert kernels >= 2


@pytest.mark.parametrize("kwargs, obs_shape", INIT_CASES)
def test_flax_init_gives_the_ppo_init_in_the_trainers_tree(kwargs, obs_shape):
    """`ActorCritic(...).init(key, obs)`, flax's own init as a user calls it: orthogonal
    kernels of PPO's gains drawn by flax's initializers; the tree and shapes of the trainer's
    one-draw init, which has the same properties."""
    net = ActorCritic(num_outputs=3, **kwargs)
    obs = jnp.zeros((1, *obs_shape))
    variables = net.init(jax.random.key(0), obs)
    _assert_ppo_init(variables["params"], net.num_outputs)
    one_draw = init_params(net, jax.random.key(0), obs, one_draw=True)
    _assert_ppo_init(one_draw["params"], net.num_outputs)
    assert jax.tree.structure(variables) == jax.tree.structure(one_draw)
    assert jax.tree.map(jnp.shape, variables) == jax.tree.map(jnp.shape, one_draw)
    other = net.init(jax.random.key(1), obs)["params"]
    flat, flat_other = (jax.tree_util.tree_leaves_with_path(p)
                        for p in (variables["params"], other))
    for (path, a), (_, b) in zip(flat, flat_other):
        if "kernel" in jax.tree_util.keystr(path):
            assert not np.allclose(a, b), path


def test_init_params_runs_flax_init_on_the_plain_path_and_one_draw_on_cpu():
    """The plain path (the default, other backends' plan) is `module.init` itself and draws no
    normal sample; the one-draw path (the CPU's plan) fills the same tree from one sample."""
    net = ActorCritic(num_outputs=3, **SMALL_CNN)
    obs = jnp.zeros((1, 7, 7, 2))
    key = jax.random.key(4)
    plain = init_params(net, key, obs, one_draw=False)
    for a, b in zip(jax.tree.leaves(plain), jax.tree.leaves(net.init(key, obs)), strict=True):
        np.testing.assert_array_equal(a, b)
    assert kernel_normal_size(net, obs, one_draw=False) == 0
    with pytest.raises(ValueError, match="plain path draws no normal sample"):
        init_params(net, key, obs, normal=jnp.zeros(3), one_draw=False)
    assert kernel_normal_size(net, obs) == 0
    size = kernel_normal_size(net, obs, one_draw=True)
    # Two towers: convolutions [3*3*2, 4] (7x7 SAME -> 7x7), [2*2*4, 6] (VALID stride 2 ->
    # 3x3), dense [3*3*6, 8]; heads [8, 3], [8, 1]
    assert size == 2 * (18 * 4 + 16 * 6 + 54 * 8) + 8 * 3 + 8 * 1
    normal = jax.random.normal(jax.random.key(5), (size,))
    one_draw = init_params(net, key, obs, normal=normal, one_draw=True)
    for a, c in zip(jax.tree.leaves(one_draw), jax.tree.leaves(plain)):
        assert a.shape == c.shape and (not np.any(c) or not np.array_equal(a, c))


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
    ({"conv_channels": (4, 4), "conv_kernels": (3, 2), "conv_strides": (1, 2),
      "conv_padding": ("VALID", "SAME"), "hidden_sizes": (8,)}, (6, 6, 2)),
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
    sliced = net.step_variables(params)
    if "towers" not in params["params"]:  # no batched towers: nothing to slice
        assert sliced is params
        return
    for a, b in zip(jax.tree.leaves(net.apply(sliced, obs, 2, method=ActorCritic.policy)),
                    jax.tree.leaves(alone)):
        np.testing.assert_array_equal(a, b)
    # The policy tower reads the kernels sliced ahead (a loop's) rather than slicing its own.
    zeroed = {**sliced, TOWER_KERNELS: jax.tree.map(jnp.zeros_like, sliced[TOWER_KERNELS])}
    logits = net.apply(zeroed, obs, 2, method=ActorCritic.policy)
    np.testing.assert_array_equal(logits, 0.0)
