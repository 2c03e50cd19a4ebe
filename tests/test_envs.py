import json
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import run_cli_ok

from purerl.config import ConfigError, EnvConfig
from purerl.envs import EpisodeStats, folds_time_limit, make_env


def test_episode_stats_counts_only_completed_episodes():
    env, params = make_env(EnvConfig(name="custom_envs:make_short_chain"))
    env = EpisodeStats(env)
    obs, state = env.reset(jax.random.key(0), params)
    actions = [1, 0, 1, 1, 1]  # episode 1: three steps, return 1; episode 2: two steps
    dones, returns, lengths = [], [], []
    for a in actions:
        obs, state, reward, terminated, truncated, info = env.step(
            jax.random.key(1), state, jnp.int32(a), params)
        dones.append(bool(info["episode_done"]))
        returns.append(float(info["episode_return"]))
        lengths.append(int(info["episode_length"]))
    assert dones == [False, False, True, False, True]
    assert returns == [0.0, 0.0, 1.0, 0.0, 1.0]
    assert lengths == [0, 0, 3, 0, 2]


def test_episode_stats_truncation_counts_as_episode_end():
    env, params = make_env(EnvConfig(name="custom_envs:Chain"))
    env = EpisodeStats(env)
    _, state = env.reset(jax.random.key(0), params)
    for t in range(10):  # always left: truncated at max_steps_in_episode = 10
        _, state, _, terminated, truncated, info = env.step(jax.random.key(t), state, 0, params)
    assert bool(truncated) and not bool(terminated)
    assert bool(info["episode_done"]) and int(info["episode_length"]) == 10


@pytest.mark.parametrize("name, message", [
    ("CartPole-v9", "did you mean CartPole-v1"),
    ("nosuchmodule:Env", "cannot import module 'nosuchmodule'"),
    ("custom_envs:Missing", "has no attribute 'Missing'"),
    ("custom_envs:not_an_env", "not a gymnax Environment"),
])
def test_make_env_errors(name, message):
    with pytest.raises(ConfigError, match=message):
        make_env(EnvConfig(name=name))


def test_env_params_override_and_truncation():
    env, params = make_env(EnvConfig(name="custom_envs:Chain", params={"max_steps_in_episode": 3}))
    assert params.max_steps_in_episode == 3 and params.length == 4
    env = EpisodeStats(env)
    _, state = env.reset(jax.random.key(0), params)
    truncated = []
    for t in range(3):
        _, state, _, _, trunc, _ = env.step(jax.random.key(t), state, 0, params)
        truncated.append(bool(trunc))
    assert truncated == [False, False, True]


def test_unknown_env_param_lists_the_fields():
    with pytest.raises(ConfigError, match=r"env.params.max_step: .*\(fields: max_steps_in_episode"):
        make_env(EnvConfig(name="CartPole-v1", params={"max_step": 10}))


def test_data_downloading_env_fails_clearly(monkeypatch):
    from urllib.error import URLError

    import gymnax.utils.load_mnist as load_mnist

    def no_network(url, filename):
        raise URLError("no network")

    monkeypatch.setattr(load_mnist, "urlretrieve", no_network)
    monkeypatch.setattr(load_mnist.path, "isfile", lambda _: False)
    message = "downloads its data when it is made, and the download failed"
    with pytest.raises(ConfigError, match=message):
        make_env(EnvConfig(name="MNISTBandit-bsuite"))


def test_frame_stack_resets_at_episode_boundaries():
    from purerl.envs import FrameStack

    env, params = make_env(EnvConfig(name="custom_envs:make_short_chain"))  # ends at position 2
    env = FrameStack(env, 3)
    assert env.observation_space(params).shape == (15,)
    position = lambda stacked: [int(np.argmax(stacked[5 * i:5 * i + 5])) for i in range(3)]  # noqa: E731
    obs, state = env.reset(jax.random.key(0), params)
    assert position(obs) == [0, 0, 0]
    seen, finals = [], []
    for a in [1, 1, 1, 0]:
        obs, state, _, terminated, _, info = env.step(jax.random.key(1), state, jnp.int32(a),
                                                      params)
        seen.append(position(obs))
        finals.append(position(info["final_observation"]))
    assert seen == [[0, 0, 1], [0, 0, 0], [0, 0, 1], [0, 1, 1]]  # step 2 ended the episode
    assert finals[1] == [0, 1, 2]  # the true last stack, for bootstrapping
    assert finals[0] == seen[0] and finals[2] == seen[2]


def test_frame_stack_of_scalar_observations():
    from purerl.envs import FrameStack

    env, params = make_env(EnvConfig(name="FrozenLake-misc"))
    env = FrameStack(env, 4)
    obs, _ = env.reset(jax.random.key(0), params)
    assert obs.shape == (4,) and env.observation_space(params).shape == (4,)


def test_discrete_observations_become_one_hot():
    from purerl.envs import wrap_env

    env, params = make_env(EnvConfig(name="FrozenLake-misc"))
    env = wrap_env(env, EnvConfig(name="FrozenLake-misc", frame_stack=2), params)
    obs, state = env.reset(jax.random.key(0), params)
    assert env.observation_space(params).shape == (32,)
    np.testing.assert_array_equal(obs, np.tile(np.eye(16)[0], 2))  # the start cell, twice
    obs, _, _, _, _, info = env.step(jax.random.key(1), state, jnp.int32(1), params)
    assert obs.sum() == 2.0 and info["final_observation"].sum() == 2.0


def test_dict_observations_are_a_clear_error():
    from gymnax.environments import spaces as gspaces

    from purerl.envs import check_env

    class DictObs:
        def observation_space(self, params):
            return gspaces.Dict({"x": gspaces.Box(0.0, 1.0, (2,))})

    with pytest.raises(ConfigError, match="observation space Dict.* is not supported"):
        check_env(DictObs(), None, "custom:DictObs")


@pytest.mark.parametrize("name", ["CartPole-v1", "Acrobot-v1", "SpaceInvaders-MinAtar"])
def test_auto_reset_with_a_drawn_reset_is_gymnax_step(name):
    """gymnax's step splits its key into (step key, reset key); given the reset drawn with the
    reset key, `AutoReset` must reproduce it, also on the steps where episodes end (up to float
    rounding: gymnax's step is jitted, this one runs op by op)."""
    from purerl.envs import AutoReset, takes_drawn_resets

    env, params = make_env(EnvConfig(name=name))
    params = params.replace(max_steps_in_episode=7)  # truncations among the steps
    assert takes_drawn_resets(env)
    auto = AutoReset(env)
    _, state = env.reset(jax.random.key(0), params)
    ends = 0
    for t in range(20):
        key = jax.random.key(t + 1)
        action = env.action_space(params).sample(jax.random.fold_in(key, 7))
        expected = env.step(key, state, action, params)
        step_key, reset_key = jax.random.split(key)
        got = auto.step(step_key, state, action, params, reset=env.reset_env(reset_key, params))
        jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6),
                     got, expected)
        ends += bool(expected[3] | expected[4])
        state = expected[1]
    assert ends >= 2


def test_an_env_that_overrides_step_keeps_its_own_auto_reset():
    from gymnax.environments import environment

    from purerl.envs import takes_drawn_resets

    class OwnStep(environment.Environment):
        def step(self, key, state, action, params=None):
            raise NotImplementedError

    env, _ = make_env(EnvConfig(name="CartPole-v1"))
    assert takes_drawn_resets(env) and not takes_drawn_resets(OwnStep())
    assert not takes_drawn_resets(object())


def test_gymnax_imports_without_its_plotting_libraries():
    """gymnax's Pong and Rooms import seaborn and pyplot at their top (scipy.stats, pandas);
    purerl leaves them unloaded until something uses them, as rendering does."""
    code = ("import sys, purerl.envs, gymnax\n"
            "assert 'scipy.stats' not in sys.modules and 'pandas' not in sys.modules\n"
            "env, params = gymnax.make('Pong-misc')\n"
            "import seaborn\n"
            "assert len(seaborn.color_palette('cubehelix', 3)) == 3\n"
            "assert 'scipy.stats' in sys.modules\n")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_example_envs_train_and_a_folded_time_limit_is_one_warning(tmp_path):
    """examples/my_env.py's Discrete env and its Box env with the time limit folded into
    `terminated`, one job each of a sweep: the Corridor's walker learns to walk straight to
    the goal (a random walk takes about 14 steps and reaches it about half the time; the
    shortest way is 4), the Slider reaches its target (its first episodes return about -8);
    the folded time limit is one warning line after the first chunk, the Corridor none."""
    result = run_cli_ok("-m", "+env=gymnax",
                        "env.name=examples.my_env:Corridor,custom_envs:FoldedSlider",
                        "total_timesteps=8192", "env.num_envs=8", "ppo.num_steps=32",
                        "ppo.num_minibatches=2", "ppo.lr=3e-3", "network.hidden_sizes=[16,16]",
                        "log.progress=false", "log.tensorboard=false", "eval.num_episodes=4",
                        f"hydra.sweep.dir={tmp_path}")
    warnings = [line for line in result.stdout.splitlines() if "time-outs" in line]
    assert [line.split(" - ", 1)[1] for line in warnings] == [
        "env.name=custom_envs:FoldedSlider: step_env returns terminated=true once state.time "
        "reaches max_steps_in_episode=30, so time-outs are treated as terminal (their values "
        "not bootstrapped); return terminated=false there and let gymnax's is_truncated end "
        "the episode (docs/environments.md)"]
    log = result.stdout[result.stdout.index("custom_envs:FoldedSlider: 1 seed"):]
    assert log.index("time-outs") < log.index("update  4/32")  # after the first chunk
    corridor, slider = ([json.loads(line) for line in (tmp_path / job / "metrics.jsonl")
                         .read_text().splitlines()][-8:] for job in ("0", "1"))
    assert [row["episode_return"] for row in corridor] == [1] * 8
    assert np.mean([row["episode_length"] for row in corridor]) < 5
    assert corridor[0]["update"] == 25 and np.mean([row["episode_return"] for row in slider]) > 0


def test_a_time_limit_folded_into_terminated_is_found():
    """A step at the time limit terminates only the env that folds the limit in."""
    for name, folded in (("examples.my_env:Corridor", False), ("examples.my_env:Slider", False),
                         ("custom_envs:FoldedSlider", True), ("custom_envs:Chain", False)):
        assert folds_time_limit(*make_env(EnvConfig(name=name))) == folded, name
