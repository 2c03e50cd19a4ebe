"""The XLand-MiniGrid adapter (purerl/envs/suites/xminigrid.py): spaces, gymnax 1.0's six-value
step, dm_env's LAST step kept apart by its discount (0: terminated, 1: xminigrid's time limit),
fresh resets, benchmarks (a download is a one-line error), errors, a user's env, the CLI."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from gymnax.environments import spaces

xminigrid = pytest.importorskip("xminigrid")

from conftest import play, run_cli  # noqa: E402

from purerl.config import ConfigError, EnvConfig  # noqa: E402
from purerl.envs import make_env  # noqa: E402
from purerl.envs.suites import xminigrid as adapter  # noqa: E402

# MiniGrid-Empty-5x5 starts at (1, 1) facing east, the goal at (3, 3); actions 0 forward,
# 1 turn right, 2 turn left.
TO_GOAL = (0, 0, 1, 0, 0)
TURN = 1


def user_env():
    """A user's xminigrid env for env.name=test_suite_xminigrid:user_env."""
    from xminigrid.envs.minigrid.empty import Empty

    return Empty()


@pytest.fixture(scope="module")
def empty():
    return make_env(EnvConfig(name="xminigrid/MiniGrid-Empty-5x5"))


def one_line_error(name: str) -> str:
    with pytest.raises(ConfigError) as error:
        make_env(EnvConfig(name=name))
    message = str(error.value)
    assert "\n" not in message and f"env.name={name!r}" in message
    return message


def test_spaces_and_six_value_step(empty):
    env, params = empty
    assert env.name == "xminigrid/MiniGrid-Empty-5x5"
    assert params.max_steps_in_episode == 100  # xminigrid's own for Empty: 4 * 5 * 5
    action_space = env.action_space(params)
    assert isinstance(action_space, spaces.Discrete) and action_space.n == 6
    space = env.observation_space(params)
    assert space.shape == (7, 7, 2) and space.dtype == jnp.float32  # the agent's 7x7 view
    obs, state = env.reset(jax.random.key(0), params)
    assert obs.shape == (7, 7, 2) and obs.dtype == jnp.float32
    out = env.step(jax.random.key(1), state, jnp.int32(0), params)
    assert len(out) == 6
    obs, state, reward, terminated, truncated, info = out
    assert obs.shape == (7, 7, 2) and obs.dtype == jnp.float32
    assert reward.dtype == jnp.float32 and terminated.dtype == truncated.dtype == jnp.bool_
    assert info["final_observation"].shape == (7, 7, 2)


def test_reaching_the_goal_terminates(empty):
    env, params = empty
    out, state, _ = play(env, params, TO_GOAL)
    assert [o[1:] for o in out[:-1]] == [(False, False)] * (len(TO_GOAL) - 1)
    reward, terminated, truncated = out[-1]
    assert terminated and not truncated
    assert reward == pytest.approx(1 - 0.9 * 5 / 100)  # xminigrid's reward for 5 steps
    assert int(state.time) == 0  # auto-reset by purerl


def test_time_limits_are_truncations(empty):
    env, params = empty
    out, _, _ = play(env, params.replace(max_steps_in_episode=3), [TURN] * 4)
    assert [o[1:] for o in out] == [(False, False), (False, False), (False, True), (False, False)]
    # xminigrid's own limit (LAST with discount 1), purerl's set far above it
    inner, inner_params = xminigrid.make("MiniGrid-Empty-5x5")
    own = adapter.wrap(inner, EnvConfig(), params=inner_params.replace(max_steps=2))
    assert own.default_params.max_steps_in_episode == 2
    out, _, _ = play(own, own.default_params.replace(max_steps_in_episode=1000), [TURN] * 3)
    assert [o[1:] for o in out] == [(False, False), (False, True), (False, False)]
    # the goal on the last allowed step (LAST, discount 0): a termination
    out, _, _ = play(env, params.replace(max_steps_in_episode=len(TO_GOAL)), TO_GOAL)
    assert out[-1][1:] == (True, False)


def test_resets_are_fresh():
    env, params = make_env(EnvConfig(name="xminigrid/MiniGrid-DoorKey-5x5"))
    keys = jax.random.split(jax.random.key(0), 8)
    _, states = jax.vmap(env.reset, in_axes=(0, None))(keys, params)
    assert len({np.asarray(g).tobytes() for g in states.inner.state.grid}) > 1
    # the auto-reset draws a new layout each time
    _, state = env.reset(jax.random.key(0), params)
    step = jax.vmap(env.step, in_axes=(0, None, None, None))
    _, states, _, _, truncated, _ = step(keys, state, TURN, params.replace(max_steps_in_episode=1))
    assert bool(truncated.all())
    assert len({np.asarray(g).tobytes() for g in states.inner.state.grid}) > 1


def test_bad_ids_are_one_line():
    assert "MiniGrid-DoorKey-5x5" in one_line_error("xminigrid/MiniGrid-DoorKey-5x4")
    assert "benchmark" in one_line_error("xminigrid/XLand-MiniGrid-R1-9x9")
    assert "trivial-21k" in one_line_error("xminigrid/XLand-MiniGrid-R1-9x9/trivial-2k")
    assert "only XLand" in one_line_error("xminigrid/MiniGrid-Empty-5x5/trivial-21k")


def test_a_benchmark_that_cannot_be_downloaded_is_one_line(tmp_path, monkeypatch):
    import urllib.request

    def offline(*args, **kwargs):
        raise OSError("no network here")

    monkeypatch.setattr(xminigrid.benchmarks, "DATA_PATH", str(tmp_path))
    monkeypatch.setattr(urllib.request, "urlretrieve", offline)
    message = one_line_error("xminigrid/XLand-MiniGrid-R1-9x9/trivial-21k")
    assert "downloaded on first use" in message and "no network here" in message


def test_xland_with_a_local_benchmark(tmp_path, monkeypatch):
    """Two rulesets (a red or a blue ball to stand next to) in a benchmark file already on
    disk: every reset draws one, or `/<index>` keeps one."""
    from xminigrid.benchmarks import NAME2HFFILENAME, save_bz2_pickle
    from xminigrid.core.constants import TILES_REGISTRY, Colors, Tiles
    from xminigrid.core.goals import AgentNearGoal
    from xminigrid.core.rules import EmptyRule

    balls = [TILES_REGISTRY[Tiles.BALL, colour] for colour in (Colors.RED, Colors.BLUE)]
    save_bz2_pickle({
        "goals": np.stack([np.asarray(AgentNearGoal(tile=ball).encode()) for ball in balls]),
        "rules": np.stack([np.asarray(EmptyRule().encode())[None]] * 2),
        "init_tiles": np.stack([np.asarray(ball)[None] for ball in balls]),
        "num_rules": np.ones(2, np.int32),
    }, str(tmp_path / NAME2HFFILENAME["trivial-21k"]))
    monkeypatch.setattr(xminigrid.benchmarks, "DATA_PATH", str(tmp_path))

    env, params = make_env(EnvConfig(name="xminigrid/XLand-MiniGrid-R1-9x9/trivial-21k"))
    assert params.max_steps_in_episode == 3 * 9 * 9 and env.observation_space(params).shape == (
        5, 5, 2)
    keys = jax.random.split(jax.random.key(0), 16)
    _, states = jax.vmap(env.reset, in_axes=(0, None))(keys, params)
    goals = {tuple(np.asarray(g)) for g in states.inner.state.goal_encoding}
    assert len(goals) == 2
    env, params = make_env(EnvConfig(name="xminigrid/XLand-MiniGrid-R1-9x9/trivial-21k/1"))
    _, states = jax.vmap(env.reset, in_axes=(0, None))(keys, params)
    assert {tuple(np.asarray(g)) for g in states.inner.state.goal_encoding} == {
        tuple(np.asarray(AgentNearGoal(tile=balls[1]).encode()))}
    assert "2 rulesets" in one_line_error("xminigrid/XLand-MiniGrid-R1-9x9/trivial-21k/2")


def test_a_users_xminigrid_env():
    env, params = make_env(EnvConfig(name="test_suite_xminigrid:user_env"))
    assert isinstance(env, adapter.XMiniGridEnv) and adapter.accepts(env.env)
    assert params.max_steps_in_episode == 4 * 9 * 9  # Empty's default 9x9, 4 * H * W steps


def test_cli_trains_a_few_updates(tmp_path):
    result = run_cli("+env=gymnax", "env.name=xminigrid/MiniGrid-Empty-5x5", "network=cnn",
                     "network.conv_channels=[4]", "network.hidden_sizes=[16]", "env.num_envs=2",
                     "ppo.num_steps=8", "ppo.num_epochs=1", "ppo.num_minibatches=2",
                     "total_timesteps=48", "eval.num_episodes=2", "eval.temperatures=[0.0]",
                     "eval.max_steps=8", "log.tensorboard=false", f"hydra.run.dir={tmp_path}")
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["env"] == "xminigrid/MiniGrid-Empty-5x5" and summary["env_steps"] == 48
