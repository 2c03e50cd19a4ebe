"""Every gymnax environment that can be made offline trains through the trainer."""

import gymnax
import jax
import numpy as np
import pytest

from purerl.parallel.program import make_train

OFFLINE_ENVS = [name for name in gymnax.registered_envs if name != "MNISTBandit-bsuite"]


@pytest.mark.parametrize("env_name", OFFLINE_ENVS)
def test_env_trains_two_updates(make_config, env_name):
    config = make_config(**{"env.name": env_name, "total_timesteps": 128, "ppo.num_epochs": 1,
                            "network.hidden_sizes": [16]})
    state, metrics = jax.jit(make_train(config))(jax.random.key(0))
    # 2 updates x 2 minibatches
    assert np.asarray(metrics.scalars["opt_steps"]).tolist() == [[2, 2]]
    for path, value in jax.tree_util.tree_leaves_with_path(metrics):
        assert np.isfinite(np.asarray(value)).all(), jax.tree_util.keystr(path)
    assert all(np.isfinite(np.asarray(leaf)).all() for leaf in jax.tree.leaves(state.params))


@pytest.mark.parametrize("env_name", ["Breakout-MinAtar", "Catch-bsuite"])
def test_cnn_torso_trains_on_images(make_config, env_name):
    config = make_config(**{"env.name": env_name, "total_timesteps": 128, "ppo.num_epochs": 1,
                            "network.hidden_sizes": [16], "network.conv_channels": [4],
                            "network.conv_kernels": [3], "network.conv_strides": [1],
                            "network.conv_padding": ["SAME"], "network.activation": "relu"})
    state, metrics = jax.jit(make_train(config))(jax.random.key(0))
    assert np.isfinite(np.asarray(metrics.scalars["loss/policy_loss"])).all()
    conv = state.params["params"]["policy_torso"]["Dense_0"]["kernel"]
    assert conv.shape[-2:] == (9 * {"Breakout-MinAtar": 4, "Catch-bsuite": 1}[env_name], 4)
