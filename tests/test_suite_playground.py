"""The MuJoCo Playground adapter (`env.name=playground/<name>`): spaces, gymnax 1.0's six-value
step, termination kept apart from the time limit, fresh resets, errors (the menagerie robots'
download among them), a user's own Playground env, and the CLI."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import leaf_types, run_cli

pytestmark = pytest.mark.extras  # CI installs the suite and runs these: -m extras
pytest.importorskip("mujoco_playground")

from gymnax.environments import spaces  # noqa: E402

from purerl.config import ConfigError, EnvConfig  # noqa: E402
from purerl.envs import make_env  # noqa: E402

NAME = "playground/CartpoleBalance"


def wrapped_cartpole():
    """A user's Playground env, as Playground wraps it for Brax's PPO."""
    from mujoco_playground import registry, wrapper

    env = registry.load("CartpoleBalance", config_overrides={"impl": "jax"})
    return wrapper.wrap_for_brax_training(env, episode_length=12, action_repeat=3)


@pytest.fixture(scope="module")
def cartpole():
    return make_env(EnvConfig(name=NAME))


def test_spaces_params_and_impl(cartpole):
    env, params = cartpole
    space = env.action_space(params)
    assert isinstance(space, spaces.Box) and space.shape == (1,)
    assert np.all(space.low == -1.0) and np.all(space.high == 1.0)
    assert env.observation_space(params).shape == (5,)
    assert params.max_steps_in_episode == 1000 and env.name == NAME
    assert env.playground_env.mjx_model.impl.value == "jax"  # the CPU default, not warp


def test_six_value_step_time_limit_and_fresh_resets(cartpole):
    env, params = cartpole
    params = params.replace(max_steps_in_episode=3)
    obs0, state0 = env.reset(jax.random.key(0), params)
    other, _ = env.reset(jax.random.key(1), params)
    assert not np.allclose(obs0, other)  # different keys, different initial states
    still = jnp.zeros((1,), jnp.float32)
    state, flags = state0, []
    for t in range(3):
        out = env.step(jax.random.key(10 + t), state, still, params)
        assert len(out) == 6
        obs, next_state, reward, terminated, truncated, info = out
        assert reward.dtype == jnp.float32 and reward.shape == () and float(reward) > 0
        assert terminated.dtype == jnp.bool_ and truncated.dtype == jnp.bool_
        assert {"final_observation", "terminated", "truncated"} <= set(info)
        assert leaf_types(next_state) == leaf_types(state)  # no weak-type drift: no recompiles
        flags.append((bool(terminated), bool(truncated)))
        state = next_state
    assert flags == [(False, False), (False, False), (False, True)]
    assert int(state.time) == 0 and not np.allclose(obs, info["final_observation"])
    # Another step key: another freshly drawn first state, not the first episode's (which
    # Playground's BraxAutoResetWrapper would restore).
    state = state0
    for t in range(3):
        obs2, state, *_ = env.step(jax.random.key(20 + t), state, still, params)
    assert not np.allclose(obs, obs2) and not np.allclose(obs, obs0)


def test_termination_is_the_envs_done(cartpole):
    """CartpoleBalance terminates only on a NaN in the simulation: a NaN force makes one."""
    env, params = cartpole
    _, state = env.reset(jax.random.key(0), params)
    _, state, _, terminated, truncated, info = env.step(
        jax.random.key(1), state, jnp.full((1,), jnp.nan, jnp.float32), params)
    assert bool(terminated) and not bool(truncated)
    assert np.isnan(info["final_observation"]).any() and int(state.time) == 0


@pytest.mark.parametrize("name, backend, message", [
    ("playground/CartpoleBalanse", "", r"env.name='playground/CartpoleBalanse' is not a MuJoCo "
     r"Playground environment; did you mean playground/CartpoleBalance"),
    ("playground/cartpole", "", r"did you mean playground/Cartpole"),
    ("playground/CartpoleBalance", "generalized", r"env.backend='generalized' is not an MJX"),
])
def test_errors_are_one_line(name, backend, message):
    with pytest.raises(ConfigError, match=message) as error:
        make_env(EnvConfig(name=name, backend=backend))
    assert "\n" not in str(error.value)


def test_menagerie_envs_say_they_need_a_download():
    from purerl.envs.suites.playground import menagerie_path

    if menagerie_path().exists():
        pytest.skip("MuJoCo Menagerie is in place here")
    deps_existed = menagerie_path().parent.exists()
    with pytest.raises(ConfigError, match=r"Go1JoystickFlatTerrain' needs MuJoCo Menagerie's "
                       r"robot models, which Playground downloads from GitHub") as error:
        make_env(EnvConfig(name="playground/Go1JoystickFlatTerrain"))
    assert "\n" not in str(error.value)
    assert menagerie_path().parent.exists() == deps_existed  # no download was started


def test_a_users_playground_env_is_unwrapped():
    """`env.name=module:attr` giving a Playground env wrapped for Brax training: the wrappers
    come off, the EpisodeWrapper's 12 steps at action_repeat 3 become a limit of 4 steps."""
    env, params = make_env(EnvConfig(name="test_suite_playground:wrapped_cartpole"))
    assert env.name == "playground/Balance" and params.max_steps_in_episode == 4
    assert env.action_repeat == 3 and env.action_space(params).shape == (1,)
    assert env.observation_space(params).shape == (5,)


def test_cli_trains_a_playground_env(tmp_path):
    """A few updates of CartpoleBalance through the CLI (about a minute, nearly all of it
    compiling), with episodes ended by a time limit from the command line; the final
    checkpoint holds the MJX state (its zero-size arrays left out)."""
    result = run_cli("+env=gymnax", f"env.name={NAME}", "env.num_envs=2",
                     "env.params.max_steps_in_episode=4", "ppo.num_steps=8",
                     "ppo.num_minibatches=2", "ppo.num_epochs=1", "total_timesteps=32",
                     "network.hidden_sizes=[16]", "eval.num_episodes=2", "eval.max_steps=8",
                     "eval.temperatures=[0.0]", "log.progress=false", "log.tensorboard=false",
                     f"hydra.run.dir={tmp_path}")
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["env"] == NAME and summary["env_steps"] == 32
    assert summary["final_return"] > 0
    assert any((tmp_path / "checkpoints").iterdir())
    assert "Using JAX default device" not in result.stderr + result.stdout
