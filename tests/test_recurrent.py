"""Recurrent policies (network=gru|lstm): resets, the learner's replay, learning what a
feed-forward policy cannot, and the run around them (CLI, resume, devices, purerl.load)."""

import json
import shutil
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import REPO, run_cli, run_cli_ok

import purerl
from purerl.config import ConfigError
from purerl.nets.layers import init_params
from purerl.nets.recurrent import RecurrentActorCritic
from purerl.parallel.program import make_program, make_train
from purerl.storage.checkpoint import CHECKPOINTS
from purerl.storage.restoring import restore_run
from purerl.validation import validate

# Recall: 8 envs x 12 steps (4 episodes of 3 steps each per rollout), one minibatch per epoch.
RECALL = {"env.name": "custom_envs:Recall", "env.num_envs": 8, "ppo.num_steps": 12,
          "ppo.num_minibatches": 2, "ppo.num_epochs": 4, "ppo.lr": 3e-3, "ppo.ent_coef": 0.0,
          "network.rnn": "gru", "network.rnn_size": 16, "network.hidden_sizes": [16],
          "network.shared": True}
# 4 envs x 16 steps through the CLI, GRUs of 8 units (policy and value: a carry of 16).
TINY_GRU = ["+env=cartpole", "network=gru", "network.rnn_size=8", "network.hidden_sizes=[8]",
            "ppo.num_steps=16", "ppo.num_epochs=2", "ppo.num_minibatches=2", "log.progress=false",
            "eval.num_episodes=2", "eval.max_steps=20"]


@pytest.mark.parametrize("cell", ["gru", "lstm"])
@pytest.mark.parametrize("shared", [True, False])
def test_an_episode_start_gives_exactly_the_fresh_start_output(cell, shared):
    """A carry made non-zero, then an episode start: exactly the output (and next carry) of a
    fresh start; without the start, the old carry changes the output. The unrolled sequence is
    the steps one by one, resets included."""
    net = RecurrentActorCritic(num_outputs=3, hidden_sizes=(8,), cell=cell, rnn_size=6,
                               shared=shared)
    obs = jax.random.normal(jax.random.key(0), (5, 4, 2))  # [T, B, D]
    params = init_params(net, jax.random.key(1), net.initial_carry((4,)), obs[0],
                         jnp.zeros(4, bool))
    assert net.carry_size == (2 if cell == "lstm" else 1) * 6 * (1 if shared else 2)
    old = jax.random.normal(jax.random.key(2), (4, net.carry_size))
    fresh = net.apply(params, net.initial_carry((4,)), obs[0], jnp.zeros(4, bool))
    started = net.apply(params, old, obs[0], jnp.ones(4, bool))
    jax.tree.map(np.testing.assert_array_equal, started, fresh)
    continued = net.apply(params, old, obs[0], jnp.zeros(4, bool))
    assert not np.allclose(continued[1], fresh[1])

    first = jnp.zeros((5, 4), bool).at[2, 1].set(True).at[3, 3].set(True)
    carry, outputs = old, []
    for t in range(5):
        carry, logits, value = net.apply(params, carry, obs[t], first[t])
        outputs.append((logits, value))
    unrolled = net.apply(params, old, obs, first, method="unroll")
    np.testing.assert_allclose(unrolled[0], carry, rtol=1e-5, atol=1e-6)
    for t, (logits, value) in enumerate(outputs):
        np.testing.assert_allclose(unrolled[1][t], logits, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(unrolled[2][t], value, rtol=1e-5, atol=1e-6)
    value_alone = net.apply(params, old, obs[0], jnp.zeros(4, bool), method="value")
    np.testing.assert_allclose(value_alone, continued[2], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("cell, env_name", [("gru", "custom_envs:Recall"),
                                             ("lstm", "custom_envs:Recall"),
                                             ("gru", "custom_envs:Reach")])
def test_first_minibatch_replays_the_rollouts_log_probs(make_config, cell, env_name):
    """One minibatch of whole sequences, replayed from the carry stored at the rollout's start
    with the rollout's resets (episodes end inside every rollout; Reach's Box actions take a
    Gaussian policy): before its step, the ratio is exactly 1 (approx KL 0.0, nothing
    clipped)."""
    config = make_config(**{**RECALL, "network.rnn": cell, "env.name": env_name,
                            "ppo.num_minibatches": 1, "ppo.num_epochs": 1,
                            "total_timesteps": 3 * 96})
    _, metrics = jax.jit(make_train(config))(jax.random.key(0))
    assert np.all(np.asarray(metrics.episode_count) > 0)
    assert np.all(np.isfinite(np.asarray(metrics.scalars["loss/policy_loss"])))
    np.testing.assert_array_equal(np.asarray(metrics.scalars["loss/approx_kl"]), 0.0)
    np.testing.assert_array_equal(np.asarray(metrics.scalars["loss/clip_frac"]), 0.0)


def test_a_gru_learns_what_a_feed_forward_policy_cannot(make_config):
    """Recall needs the first observation at the third step: a GRU is always right within 50
    updates, a feed-forward policy right half the time (expected return 0.5)."""
    returns = {}
    for rnn in ("gru", None):
        config = make_config(**{**RECALL, "network.rnn": rnn, "total_timesteps": 50 * 96})
        _, metrics = jax.jit(make_train(config))(jax.random.key(0))
        returns[rnn] = float(np.mean(np.asarray(metrics.episode_return)[0, -10:]))
    assert returns["gru"] >= 0.95, returns
    assert returns[None] <= 0.75, returns


def test_a_users_network_with_memory_learns_what_a_feed_forward_policy_cannot(
        make_config, tmp_path):
    """examples/networks.py's `gru_memory` (a flax GRUCell of the user's, `carry_size` 16):
    the sequence learner trains it on Recall to the bar a built-in GRU meets; through the
    command line it evaluates, and `purerl.load` acts with its carry."""
    factory = "examples.networks:gru_memory"
    config = make_config(**{**RECALL, "network.rnn": None, "network.factory": factory,
                            "total_timesteps": 50 * 96})
    _, metrics = jax.jit(make_train(config))(jax.random.key(0))
    assert float(np.mean(np.asarray(metrics.episode_return)[0, -10:])) >= 0.95

    run_cli_ok("+env=cartpole", f"network.factory={factory}", "network.rnn_size=8",
               *TINY_GRU[2:], "total_timesteps=256", f"hydra.run.dir={tmp_path}")
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["eval_return"] is not None
    policy = purerl.load(tmp_path)
    carry = policy.initial_carry(3)
    assert policy.recurrent and carry.shape == (3, 8)
    obs, _ = jax.vmap(policy.env.reset, in_axes=(0, None))(jax.random.split(jax.random.key(0), 3),
                                                           policy.env_params)
    action, carry = policy.act(obs, carry)
    assert action.shape == (3,) and carry.shape == (3, 8)
    assert np.abs(np.asarray(carry)).sum() > 0


def test_recurrent_chunked_run_is_bit_identical_to_one_shot_train(make_config):
    config = make_config(**{**RECALL, "total_timesteps": 5 * 96, "num_seeds": 2})
    program = make_program(config, chunk=2)
    key = jax.random.key(3)
    whole_state, whole = jax.jit(program.train)(key)
    run = jax.jit(program.run)
    state, chunks = jax.jit(program.init)(key), []
    for num in (2, 2, 1):
        state, metrics = run(state, jnp.int32(num))
        chunks.append(jax.tree.map(lambda x, n=num: np.asarray(x)[:, :n], metrics))
    chunked = jax.tree.map(lambda *xs: np.concatenate(xs, axis=1), *chunks)
    jax.tree.map(np.testing.assert_array_equal, whole, chunked)
    counts = np.asarray(whole.episode_count)  # the means users read: sums over counts
    assert counts.min() > 0
    np.testing.assert_allclose(whole.episode_return, np.asarray(whole.episode_return_sum) / counts)
    np.testing.assert_allclose(whole.episode_length, np.asarray(whole.episode_length_sum) / counts)
    jax.tree.map(np.testing.assert_array_equal, (whole_state.params, whole_state.memory),
                 (state.params, state.memory))
    assert whole_state.memory.carry.shape == (2, 8, 16)


def test_recurrent_settings_are_checked(make_config):
    with pytest.raises(ConfigError, match=r"env.num_envs=6 is not divisible by "
                                          r"ppo.num_minibatches=4: a recurrent policy's"):
        validate(make_config(**{"network.rnn": "gru", "env.num_envs": 6,
                                "ppo.num_minibatches": 4}))
    with pytest.raises(ConfigError, match=r"network.rnn='rnn' is not one of gru, lstm"):
        validate(make_config(**{"network.rnn": "rnn"}))
    with pytest.raises(ConfigError, match=r"network.rnn_size=0 must be > 0"):
        validate(make_config(**{"network.rnn": "gru", "network.rnn_size": 0}))
    with pytest.raises(ConfigError, match=r"\(4 per device\) is not divisible by "
                                          r"ppo.num_minibatches=8"):
        validate(make_config(**{"network.rnn": "gru", "env.num_envs": 8,
                                "ppo.num_minibatches": 8}), 2)


@pytest.fixture(scope="module")
def gru_run(tmp_path_factory):
    """A GRU run through the CLI: 2 seeds, normalized observations, checkpoints every 4 of
    its 12 updates, each kept."""
    run_dir = tmp_path_factory.mktemp("gru")
    run_cli_ok(*TINY_GRU, "num_seeds=2", "env.normalize_obs=true", "total_timesteps=768",
            "checkpoint.every=4", "checkpoint.keep=5", "eval.every=4",
            f"hydra.run.dir={run_dir}")
    return run_dir


def test_a_resumed_recurrent_run_ends_bit_identical(gru_run, tmp_path):
    """The carry is in the checkpoint: resumed from update 4, the run ends with the same
    metrics and state (params, carry) as the run never stopped."""
    resumed = tmp_path / "resumed"
    shutil.copytree(gru_run, resumed)
    for later in (8, 12):
        shutil.rmtree(resumed / CHECKPOINTS / str(later))
    (resumed / "summary.json").unlink()
    run_cli_ok(*TINY_GRU, "num_seeds=2", "env.normalize_obs=true", "total_timesteps=768",
            "checkpoint.every=4", "checkpoint.keep=5", "eval.every=4", "resume=true",
            f"hydra.run.dir={resumed}")
    assert ((resumed / "metrics.jsonl").read_text()
            == (gru_run / "metrics.jsonl").read_text())
    whole, again = restore_run(gru_run).state, restore_run(resumed).state
    assert np.abs(np.asarray(whole.memory.carry)).sum() > 0
    for a, b in zip(jax.tree.leaves((whole.params, whole.memory)),
                    jax.tree.leaves((again.params, again.memory))):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_load_acts_and_evaluates_a_recurrent_and_a_feed_forward_run(gru_run, tmp_path):
    """`purerl.load(...).act` on single and batched observations, carrying the GRU's state;
    `evaluate`; the same for a feed-forward run (no carry)."""
    policy = purerl.load(gru_run, member=1)
    assert policy.recurrent and policy.member == 1 and policy.update == 12
    assert policy.obs_shape == (4,)
    obs, state = policy.env.reset(jax.random.key(0), policy.env_params)
    action, carry = policy.act(obs)
    assert action.shape == () and carry.shape == (16,)
    again, carry_again = policy.act(obs, policy.initial_carry())
    assert int(again) == int(action)
    np.testing.assert_array_equal(carry, carry_again)
    _, later = policy.act(obs, carry)
    assert not np.array_equal(later, carry)  # the carry moves on
    batch = jnp.stack([obs, obs, obs])
    actions, carries = policy.act(batch, key=jax.random.key(1), temperature=1.0)
    assert actions.shape == (3,) and carries.shape == (3, 16)
    np.testing.assert_allclose(carries[0], carry, rtol=1e-6)
    with pytest.raises(ValueError, match="temperature=1.0 samples the action: pass key="):
        policy.act(obs, temperature=1.0)
    with pytest.raises(ValueError, match=r"obs of shape \(3,\)"):
        policy.act(obs[:3])
    result = policy.evaluate(episodes=3, temperatures=[0.0], max_steps=20)
    assert list(result) == ["0.0"] and 0 < result["0.0"]["length"] <= 20
    assert result["0.0"]["return"] == result["0.0"]["length"]  # CartPole: 1 per step
    with pytest.raises(ConfigError, match="member=2: .* has 2 member"):
        purerl.load(gru_run, member=2)

    feed_forward = tmp_path / "mlp"
    run_cli_ok("+env=cartpole", "ppo.num_steps=16", "network.hidden_sizes=[8]",
            "total_timesteps=128", "log.progress=false", f"hydra.run.dir={feed_forward}")
    policy = purerl.load(feed_forward)
    assert not policy.recurrent and policy.member == 0
    action, carry = policy.act(obs)
    assert carry is None and int(action) in (0, 1)
    actions, _ = policy.act(batch)
    assert actions.tolist() == [int(action)] * 3


def test_gru_and_lstm_through_the_cli_with_evaluation(gru_run, tmp_path):
    """GRU (the fixture) and LSTM runs write their evaluations; the evaluate CLI plays a
    recurrent run; MultiDiscrete actions with a frame stack and an LSTM train."""
    summary = json.loads((gru_run / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["eval_return"]["0.0"] > 0
    result = subprocess.run([sys.executable, "-m", "purerl.evaluate", f"run={gru_run}",
                             "episodes=2", "max_steps=10", "render=true"], cwd=REPO,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0 and "| " in result.stdout, result.stderr[-3000:]
    assert (gru_run / "episode_T1.0.gif").read_bytes()[:6] == b"GIF89a"
    run_cli_ok("+env=gymnax", "env.name=custom_envs:ComboLock", *TINY_GRU[1:], "network=lstm",
            "network.rnn_size=8", "network.hidden_sizes=[8]", "env.frame_stack=2",
            "total_timesteps=128", f"hydra.run.dir={tmp_path}")
    config = restore_run(tmp_path).config
    assert config.network.rnn == "lstm" and config.env.frame_stack == 2


def test_init_from_a_recurrent_run(gru_run, tmp_path):
    """A recurrent run started from another's params (a learning rate of ~0 keeps them)."""
    run_cli_ok(*TINY_GRU, "num_seeds=2", "total_timesteps=64", "ppo.lr=1e-12",
            "ppo.anneal_lr=false", f"init_from={gru_run}", f"hydra.run.dir={tmp_path}")
    source, state = restore_run(gru_run).state, restore_run(tmp_path).state
    for a, b in zip(jax.tree.leaves(source.params), jax.tree.leaves(state.params)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-6)


def test_evaluate_cli_help():
    result = subprocess.run([sys.executable, "-m", "purerl.evaluate", "--help"], cwd=REPO,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and "run=<dir>" in result.stdout
    assert "checkpoint=final" in result.stdout and not result.stderr


def test_a_recurrent_run_on_two_devices(tmp_path):
    """A GRU run on 2 forced CPU devices, each seed's envs split over them (their carries
    too): it trains, the carry comes back whole, and this one-device process loads it."""
    env = {"XLA_FLAGS": "--xla_force_host_platform_device_count=2"}
    result = run_cli(*TINY_GRU, "total_timesteps=256", f"hydra.run.dir={tmp_path}", env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["devices"] == 2 and summary["final_return"] > 0
    assert restore_run(tmp_path).state.memory.carry.shape == (1, 4, 16)
    action, carry = purerl.load(tmp_path).act(np.zeros(4, np.float32))
    assert int(action) in (0, 1) and carry.shape == (16,)
