"""The Navix adapter (purerl/envs/suites/navix.py): spaces, gymnax 1.0's six-value step,
navix's TERMINATION and TRUNCATION kept apart, fresh resets, errors, a user's env, the CLI."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from gymnax.environments import spaces

pytestmark = pytest.mark.extras  # CI installs the suite and runs these: -m extras
nx = pytest.importorskip("navix")

from conftest import play, run_cli  # noqa: E402

from purerl.config import ConfigError, EnvConfig  # noqa: E402
from purerl.envs import make_env  # noqa: E402
from purerl.envs.suites import navix as adapter  # noqa: E402

# Navix-Empty-5x5-v0 starts at (1, 1) facing east, the goal at (3, 3); actions 0 rotate ccw,
# 1 rotate cw, 2 forward.
TO_GOAL = (2, 2, 1, 2, 2)
TURN = 1


def user_env():
    """A user's navix env for env.name=test_suite_navix:user_env."""
    return nx.make("Navix-Empty-6x6-v0", max_steps=7)


@pytest.fixture(scope="module")
def empty():
    return make_env(EnvConfig(name="navix/Navix-Empty-5x5-v0"))


def test_spaces_and_six_value_step(empty):
    env, params = empty
    assert env.name == "navix/Navix-Empty-5x5-v0"
    assert params.max_steps_in_episode == 100  # navix.make's max_steps
    action_space = env.action_space(params)
    assert isinstance(action_space, spaces.Discrete) and action_space.n == 7
    space = env.observation_space(params)
    assert space.shape == (5, 5, 3) and space.dtype == jnp.float32
    obs, state = env.reset(jax.random.key(0), params)
    assert obs.shape == (5, 5, 3) and obs.dtype == jnp.float32
    out = env.step(jax.random.key(1), state, jnp.int32(2), params)
    assert len(out) == 6
    obs, state, reward, terminated, truncated, info = out
    assert obs.shape == (5, 5, 3) and obs.dtype == jnp.float32
    assert reward.dtype == jnp.float32 and terminated.dtype == truncated.dtype == jnp.bool_
    assert info["final_observation"].shape == (5, 5, 3)


def test_reaching_the_goal_terminates(empty):
    env, params = empty
    out, state, info = play(env, params, TO_GOAL)
    assert out[:-1] == [(0.0, False, False)] * (len(TO_GOAL) - 1)
    assert out[-1] == (1.0, True, False)
    assert int(state.time) == 0  # auto-reset by purerl


def test_time_limits_are_truncations(empty):
    env, params = empty
    out, _, _ = play(env, params.replace(max_steps_in_episode=3), [TURN] * 4)
    assert [o[1:] for o in out] == [(False, False), (False, False), (False, True), (False, False)]
    # navix's own limit (TRUNCATION), purerl's set far above it
    own = adapter.wrap(nx.make("Navix-Empty-5x5-v0", max_steps=2), EnvConfig())
    out, _, _ = play(own, own.default_params.replace(max_steps_in_episode=1000), [TURN] * 3)
    assert [o[1:] for o in out] == [(False, False), (False, True), (False, False)]
    # the goal on the last allowed step: a termination
    out, _, _ = play(env, params.replace(max_steps_in_episode=len(TO_GOAL)), TO_GOAL)
    assert out[-1] == (1.0, True, False)


def test_resets_are_fresh():
    env, params = make_env(EnvConfig(name="navix/Navix-DoorKey-Random-5x5-v0"))
    keys = jax.random.split(jax.random.key(0), 8)
    obs, _ = jax.vmap(env.reset, in_axes=(0, None))(keys, params)
    assert len({np.asarray(o).tobytes() for o in obs}) > 1
    # the auto-reset draws a new start each time
    _, state = env.reset(jax.random.key(0), params)
    step = jax.vmap(env.step, in_axes=(0, None, None, None))
    obs, _, _, _, truncated, _ = step(keys, state, 1, params.replace(max_steps_in_episode=1))
    assert bool(truncated.all()) and len({np.asarray(o).tobytes() for o in obs}) > 1


def test_bad_id_is_one_line():
    with pytest.raises(ConfigError) as error:
        make_env(EnvConfig(name="navix/Navix-Empty-5x5"))
    message = str(error.value)
    assert "\n" not in message and "env.name='navix/Navix-Empty-5x5'" in message
    assert "Navix-Empty-5x5-v0" in message


def test_a_users_navix_env():
    env, params = make_env(EnvConfig(name="test_suite_navix:user_env"))
    assert isinstance(env, adapter.NavixEnv) and adapter.accepts(env.env)
    assert params.max_steps_in_episode == 7 and env.observation_space(params).shape == (6, 6, 3)


def test_cli_trains_a_few_updates(tmp_path):
    result = run_cli("+env=gymnax", "env.name=navix/Navix-Empty-5x5-v0", "network=cnn",
                     "network.conv_channels=[4]", "network.hidden_sizes=[16]", "env.num_envs=2",
                     "ppo.num_steps=8", "ppo.num_epochs=1", "ppo.num_minibatches=2",
                     "total_timesteps=48", "eval.num_episodes=2", "eval.temperatures=[0.0]",
                     "eval.max_steps=8", "log.tensorboard=false", f"hydra.run.dir={tmp_path}")
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["env"] == "navix/Navix-Empty-5x5-v0" and summary["env_steps"] == 48
