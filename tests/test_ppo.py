"""The trainer: chunked == one-shot, determinism, target-KL stopping, seeds, one trace."""

import os
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from purerl.algos.learner import nonfinite_bits
from purerl.parallel.program import make_program, make_train


@pytest.fixture(scope="module")
def tiny_program():
    from conftest import tiny_config

    config = tiny_config()
    return config, make_program(config, chunk=3)


def _chunks(program, num_updates, key):
    """What the CLI does: init, then `run` in chunks until all updates are done."""
    run = jax.jit(program.run)
    state = jax.jit(program.init)(key)
    metrics, done = [], 0
    while done < num_updates:
        num = min(program.chunk, num_updates - done)
        state, m = run(state, jnp.int32(num))
        metrics.append(jax.tree.map(lambda x, n=num: np.asarray(x)[:, :n], m))
        done += num
    return state, jax.tree.map(lambda *xs: np.concatenate(xs, axis=1), *metrics), run


def test_chunked_run_is_bit_identical_to_one_shot_train(tiny_program):
    config, program = tiny_program
    key = jax.random.key(0)
    state, metrics = jax.jit(program.train)(key)
    chunked_state, chunked_metrics, run = _chunks(program, config.num_updates, key)
    for a, b in zip(jax.tree.leaves(metrics), jax.tree.leaves(chunked_metrics)):
        np.testing.assert_array_equal(np.asarray(a), b)
    for a, b in zip(jax.tree.leaves(state.params), jax.tree.leaves(chunked_state.params)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    # 8 updates in chunks of 3 (3, 3, 2): the update compiled once, for every chunk length
    assert run._cache_size() == 1


def test_same_seed_same_bits_other_seed_differs(tiny_program):
    config, program = tiny_program
    train = jax.jit(program.train)
    _, a = train(jax.random.key(0))
    _, b = train(jax.random.key(0))
    _, c = train(jax.random.key(1))
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    assert not np.array_equal(np.asarray(a.scalars["loss/policy_loss"]),
                              np.asarray(c.scalars["loss/policy_loss"]))


def test_metrics_are_per_update_scalars(tiny_program):
    config, program = tiny_program
    _, metrics = jax.jit(program.train)(jax.random.key(0))
    for leaf in jax.tree.leaves(metrics):
        assert leaf.shape == (1, config.num_updates)
    # 2 epochs x 2 minibatches, no target KL
    assert np.all(np.asarray(metrics.scalars["opt_steps"]) == 4)
    lr = np.asarray(metrics.scalars["learning_rate"])[0]
    np.testing.assert_allclose(lr, 2.5e-4 * (1 - np.arange(8) / 8), rtol=1e-6)  # annealed


def _adam_count(state):
    return int(np.asarray(state.opt_state[1].count).reshape(-1)[0])


@pytest.mark.parametrize("target_kl, expected_steps", [(1e-6, 1), (1e6, 4)])
def test_target_kl_skips_the_remaining_steps(make_config, target_kl, expected_steps):
    config = make_config(**{"ppo.target_kl": target_kl, "ppo.lr": 1e-2, "ppo.anneal_lr": False})
    state, metrics = jax.jit(make_train(config))(jax.random.key(0))
    steps = np.asarray(metrics.scalars["opt_steps"])
    # the first minibatch sees the rollout policy itself (KL 0) and always steps; with a tiny
    # target every later one is skipped.
    assert np.all(steps == expected_steps)
    # skipped steps leave the optimizer untouched: Adam counted exactly the steps taken
    assert _adam_count(state) == steps.sum()


def test_num_seeds_in_one_program(make_config):
    config = make_config(num_seeds=4)
    train = jax.jit(make_train(config))
    state, metrics = train(jax.random.key(0))
    assert np.asarray(metrics.scalars["loss/policy_loss"]).shape == (4, config.num_updates)
    assert jax.tree.leaves(state.env_state)[0].shape[:2] == (4, 4)
    losses = np.asarray(metrics.scalars["loss/policy_loss"])
    assert len({row.tobytes() for row in losses}) == 4  # four different seeds
    assert train._cache_size() == 1


def _mean_return_of_last_updates(metrics, num_updates: int) -> float:
    """Mean return of the episodes completed in the last `num_updates` updates, over seeds."""
    last = slice(-num_updates, None)
    return (np.asarray(metrics.episode_return_sum)[:, last].sum()
            / np.asarray(metrics.episode_count)[:, last].sum())


LEARNING = {"ppo.num_epochs": 4, "ppo.num_minibatches": 4, "network.hidden_sizes": [64, 64]}


@pytest.mark.parametrize("env_name", ["custom_envs:ComboLock", "custom_envs:combo_lock_tuple"])
def test_multidiscrete_with_unequal_choices_learns(make_config, env_name):
    """Controls of 2, 3 and 4 choices; a uniform policy scores about 0.36, the optimum is 1."""
    config = make_config(**{"env.name": env_name, "env.num_envs": 8, "ppo.num_steps": 32,
                            "total_timesteps": 30_720, **LEARNING})
    _, metrics = jax.jit(make_train(config))(jax.random.key(0))
    mean_return = _mean_return_of_last_updates(metrics, 10)
    assert mean_return >= 0.9


def test_box_gaussian_policy_learns(make_config):
    """Reach: a uniform-ish initial policy scores about -2.6, the optimum is 0."""
    config = make_config(**{"env.name": "custom_envs:Reach", "env.num_envs": 8,
                            "ppo.num_steps": 32, "total_timesteps": 30_720, "ppo.lr": 3e-3,
                            "ppo.ent_coef": 0.0, **LEARNING})
    _, metrics = jax.jit(make_train(config))(jax.random.key(0))
    mean_return = _mean_return_of_last_updates(metrics, 10)
    assert mean_return >= -0.3


def test_whole_run_program_on_two_devices_with_two_seeds(tmp_path):
    """`make_train` on 2 forced CPU devices: the envs' state is per device, the init runs seed
    by seed, and the run is the same for the same key. One seed's envs split over the devices
    split the leaves the algorithm declares (`Algorithm.envs_axis`) and no others."""
    script = tmp_path / "two_devices.py"
    script.write_text(
        "import jax, numpy as np\n"
        "from jax.sharding import PartitionSpec as P\n"
        "from conftest import tiny_config\n"
        "from purerl.algos.algorithm import RUNNER_STATE_ENVS_AXIS\n"
        "from purerl.parallel.devices import DEVICE_AXIS\n"
        "from purerl.parallel.program import make_program, make_train\n"
        "assert jax.local_device_count() == 2\n"
        "split = make_program(tiny_config()).state_sharding\n"
        "specs = jax.tree.map(lambda sharding: sharding.spec, split)\n"
        "expected = jax.tree.map(lambda envs: P(None, DEVICE_AXIS) if envs else P(),\n"
        "                        RUNNER_STATE_ENVS_AXIS)\n"
        "assert specs == expected, specs\n"
        "train = jax.jit(make_train(tiny_config(num_seeds=2)))\n"
        "a = train(jax.random.key(0))[1]\n"
        "b = train(jax.random.key(0))[1]\n"
        "assert np.asarray(a.episode_count).sum() > 0\n"
        "jax.tree.map(np.testing.assert_array_equal, a, b)\n"
        "print('ok')\n")
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=2",
           "PYTHONPATH": str(Path(__file__).parent)}
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                            env=env, timeout=300)
    assert result.returncode == 0 and "ok" in result.stdout, result.stderr[-2000:]


def testnonfinite_bits_name_each_tree_with_a_bad_float():
    params, opt = jnp.ones(5), {"mu": jnp.zeros(3), "count": jnp.int32(7)}
    stats = (jnp.ones((2, 2)), jnp.float32(1.0))
    assert int(nonfinite_bits((params, 4), (opt, 8), (stats, 16))) == 0
    assert int(nonfinite_bits((params.at[0].set(jnp.nan), 4), (opt, 8), (stats, 16))) == 4
    bad_opt = {"mu": jnp.array([0.0, 0.0, jnp.inf]), "count": jnp.int32(7)}
    bad_stats = (jnp.ones((2, 2)), jnp.float32(-jnp.inf))
    assert int(nonfinite_bits((params, 4), (bad_opt, 8), (bad_stats, 16))) == 8 | 16
    assert int(jax.jit(lambda p: nonfinite_bits((p, 4), (bad_opt, 8)))(params * jnp.nan)) == 12


def test_plain_paths_train(make_config):
    """With the plain execution plan (resets drawn inside each env step, shuffles by
    `jax.random.permutation`, minibatches gathered per step, flax's own init, Adam on the
    param tree), as other backends run, the trainer still trains, on other random streams; the
    CPU plan is what a program on the CPU takes."""
    from purerl.algos.ppo import make_ppo
    from purerl.core.schedules import hyperparams_from_config
    from purerl.envs import make_env
    from purerl.plan import CPU, PLAIN

    config = make_config()
    program = make_program(config)
    assert program.plan == CPU
    _, cpu = jax.jit(program.train)(jax.random.key(0))
    ppo = make_ppo(config, *make_env(config.env), plan=PLAIN)
    state = ppo.init(jax.random.key(0, impl=config.prng_impl), hyperparams_from_config(config))
    state, plain = jax.jit(lambda s: jax.lax.scan(lambda s, _: ppo.update(s), s, None,
                                                  config.num_updates))(state)
    assert jax.tree.structure(state.opt_state[1].mu) == jax.tree.structure(state.params)
    assert np.all(np.asarray(plain.scalars["opt_steps"]) == 4)
    assert np.asarray(plain.episode_count).sum() > 0
    assert all(np.isfinite(np.asarray(x)).all() for x in jax.tree.leaves(plain))
    assert not np.array_equal(np.asarray(cpu.scalars["loss/policy_loss"])[0],
                              np.asarray(plain.scalars["loss/policy_loss"]))


def test_the_adaptive_rate_is_each_members_and_resumes_with_the_state(tmp_path):
    """ppo.lr_schedule=adaptive_kl, 2 seeds: each seed's rate moves with its own KLs (the
    final states' rates differ), the last row logs their mean, and a run resumed
    from update 4's checkpoint logs the same rows and ends with the same rates."""
    import json
    import shutil

    from conftest import tiny_config

    import purerl
    from purerl.runs.program_cache import ProgramCache
    from purerl.storage.restoring import restore_run

    config = tiny_config(**{"num_seeds": 2, "ppo.lr_schedule": "adaptive_kl", "ppo.lr": 1e-3,
                            "ppo.desired_kl": 2e-4, "checkpoint.every": 4,
                            "log.tensorboard": False, "log.progress": False})
    cache, whole, resumed = ProgramCache(), tmp_path / "whole", tmp_path / "resumed"
    purerl.run(config, whole, cache=cache, console=False)
    rows = [json.loads(line) for line in (whole / "metrics.jsonl").read_text().splitlines()]
    rates = np.asarray(restore_run(whole, "final").state.hparams.lr)
    assert rates.shape == (2,) and rates[0] != rates[1]
    assert len({row["learning_rate"] for row in rows}) > 2  # it moved, both ways or more
    assert rows[-1]["learning_rate"] == pytest.approx(float(rates.mean()), rel=1e-6)
    shutil.copytree(whole, resumed)
    shutil.rmtree(resumed / "checkpoints" / "8")
    (resumed / "summary.json").unlink()
    config.resume = True
    purerl.run(config, resumed, cache=cache, console=False)
    assert (resumed / "metrics.jsonl").read_text() == (whole / "metrics.jsonl").read_text()
    np.testing.assert_array_equal(restore_run(resumed, "final").state.hparams.lr, rates)
