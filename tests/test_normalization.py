"""Running statistics for observation / reward normalization, against numpy and by hand."""

import jax
import jax.numpy as jnp
import numpy as np

from purerl.envs.normalization import (
    discounted_returns,
    init_normalizer,
    init_running_stats,
    normalize,
    scale_rewards,
    update_running_stats,
)


def _assert_stats(stats, data):
    np.testing.assert_allclose(stats.count, len(data), atol=1e-3)  # + the prior's 1e-4
    np.testing.assert_allclose(stats.mean, data.mean(axis=0), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(stats.var, data.var(axis=0), rtol=1e-4, atol=1e-5)


def test_running_stats_over_batches_equal_the_statistics_of_all_data():
    rng = np.random.default_rng(0)
    batches = [rng.normal([1.0, -4.0, 0.0], [2.0, 0.1, 7.0], size=(n, 3)).astype(np.float32)
               for n in (5, 300, 1, 64)]
    stats = init_running_stats((3,))
    for batch in batches:
        stats = update_running_stats(stats, jnp.asarray(batch))
    _assert_stats(stats, np.concatenate(batches))


def test_running_stats_are_combined_across_devices():
    """Under a named axis (here vmap's, as shard_map's would be), every shard ends with the
    statistics of all shards' data."""
    rng = np.random.default_rng(1)
    shards = rng.normal(5.0, 3.0, size=(3, 50, 2)).astype(np.float32)  # [devices, N, 2]
    first = np.asarray(rng.normal(size=(10, 2)), np.float32)
    stats = init_running_stats((2,))
    stats = update_running_stats(stats, jnp.asarray(first))
    combined = jax.vmap(lambda shard: update_running_stats(stats, shard, "devices"),
                        axis_name="devices")(jnp.asarray(shards))
    everything = np.concatenate([first, shards.reshape(-1, 2)])
    for device in range(3):
        _assert_stats(jax.tree.map(lambda x, d=device: x[d], combined), everything)


def test_normalize_standardizes_and_clips():
    stats = init_running_stats((2,))._replace(mean=jnp.array([1.0, 0.0]),
                                              var=jnp.array([4.0, 1e-6]))
    z = normalize(stats, jnp.array([[5.0, 1.0]]), clip=10.0)
    np.testing.assert_allclose(z, [[2.0, 10.0]], rtol=1e-5)  # 1 / 1e-3 = 1000 -> clipped


def test_discounted_returns_restart_after_episode_ends():
    rewards = jnp.array([[1.0], [2.0], [3.0], [4.0]])
    dones = jnp.array([[False], [True], [False], [False]])
    per_step, carried = discounted_returns(jnp.array([1.0]), rewards, dones, jnp.float32(0.5))
    # 0.5 * 1 + 1 = 1.5; 0.5 * 1.5 + 2 = 2.75 (episode ends); 3; 0.5 * 3 + 4 = 5.5
    np.testing.assert_allclose(per_step[:, 0], [1.5, 2.75, 3.0, 5.5])
    np.testing.assert_allclose(carried, [5.5])


def test_scale_rewards_divides_by_the_std_of_the_discounted_return():
    rng = np.random.default_rng(2)
    rewards = jnp.asarray(rng.normal(size=(20, 3)), jnp.float32)
    dones = jnp.asarray(rng.random((20, 3)) < 0.2)
    normalizer = init_normalizer((1,), 3)
    normalizer, scaled = scale_rewards(normalizer, rewards, dones, jnp.float32(0.9), clip=10.0)
    per_step, _ = discounted_returns(jnp.zeros(3), rewards, dones, jnp.float32(0.9))
    _assert_stats(normalizer.ret, np.asarray(per_step).reshape(-1))
    np.testing.assert_allclose(scaled, rewards / np.asarray(per_step).std(), rtol=1e-4)
    _, clipped = scale_rewards(init_normalizer((1,), 3), rewards, dones, jnp.float32(0.9),
                               clip=1.0)
    np.testing.assert_allclose(clipped, np.clip(scaled, -1.0, 1.0), rtol=1e-6)
    assert float(jnp.abs(scaled).max()) > 1.0


def test_trainer_keeps_statistics_of_what_it_saw(make_config):
    """NoisyObs draws observations from a known Gaussian and pays 1 per step in episodes of
    exactly 10 steps, so the trainer's return statistics are known exactly."""
    from custom_envs import NoisyObs

    from purerl.parallel.program import make_train

    config = make_config(**{"env.name": "custom_envs:NoisyObs", "env.normalize_obs": True,
                            "env.normalize_reward": True, "total_timesteps": 4096})
    state, _ = jax.jit(make_train(config))(jax.random.key(0))
    stats = jax.tree.map(lambda x: np.asarray(x[0]), state.normalizer)
    num_obs = config.num_updates * config.batch_size
    np.testing.assert_allclose(stats.obs.count, num_obs, atol=1e-3)
    std_error = np.asarray(NoisyObs.OBS_STD) / np.sqrt(num_obs)
    np.testing.assert_array_less(np.abs(stats.obs.mean - NoisyObs.OBS_MEAN), 5 * std_error)
    np.testing.assert_allclose(np.sqrt(stats.obs.var), NoisyObs.OBS_STD, rtol=0.06)

    gamma, steps_per_env = config.ppo.gamma, num_obs // config.env.num_envs
    episode = np.cumsum(gamma ** np.arange(10))  # the discounted return after each step
    returns = np.resize(episode, steps_per_env)  # the same sequence in every env
    _assert_stats(stats.ret, np.tile(returns, config.env.num_envs))
    np.testing.assert_allclose(stats.returns, returns[-1], rtol=1e-5)
