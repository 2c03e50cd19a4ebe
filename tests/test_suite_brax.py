"""The Brax adapter (`env.name=brax/<name>`): spaces, gymnax 1.0's six-value step, termination
kept apart from the time limit, fresh resets, errors, a user's own Brax env, and the CLI."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import leaf_types, run_cli

pytestmark = pytest.mark.extras  # CI installs the suite and runs these: -m extras
pytest.importorskip("brax")

from gymnax.environments import spaces  # noqa: E402

from purerl.config import ConfigError, EnvConfig  # noqa: E402
from purerl.envs import make_env  # noqa: E402

# The inverted pendulum is Brax's cheapest physics env to compile; the pole tipping past 0.2 rad
# is its termination.
NAME = "brax/inverted_pendulum"


def wrapped_pendulum():
    """A user's Brax env, as `brax.envs.create` wraps it for Brax's own training."""
    from brax import envs

    return envs.create("inverted_pendulum", episode_length=10, action_repeat=2)


@pytest.fixture(scope="module")
def pendulum():
    return make_env(EnvConfig(name=NAME))


def test_spaces_and_params(pendulum):
    env, params = pendulum
    space = env.action_space(params)
    assert isinstance(space, spaces.Box) and space.shape == (1,)
    assert np.all(space.low == -1.0) and np.all(space.high == 1.0)
    assert env.observation_space(params).shape == (4,)  # cart position, pole angle, velocities
    assert params.max_steps_in_episode == 1000 and env.name == NAME


def test_six_value_step_termination_and_fresh_reset(pendulum):
    env, params = pendulum
    obs, state = env.reset(jax.random.key(0), params)
    push = jnp.ones((1,), jnp.float32)  # full force one way: the pole falls over
    for t in range(200):
        out = env.step(jax.random.key(t + 1), state, push, params)
        assert len(out) == 6
        next_obs, next_state, reward, terminated, truncated, info = out
        assert reward.dtype == jnp.float32 and reward.shape == ()
        assert terminated.dtype == jnp.bool_ and truncated.dtype == jnp.bool_
        assert {"final_observation", "terminated", "truncated"} <= set(info)
        assert leaf_types(next_state) == leaf_types(state)  # no weak-type drift: no recompiles
        if bool(terminated):
            break
        state = next_state
    assert bool(terminated) and not bool(truncated) and 0 < t < 199
    assert abs(float(info["final_observation"][1])) > 0.2  # the terminal pole angle
    assert abs(float(next_obs[1])) < 0.02  # the next episode's first observation
    assert int(next_state.time) == 0


def test_time_limit_is_truncation_with_fresh_resets(pendulum):
    env, params = pendulum
    params = params.replace(max_steps_in_episode=3)
    obs0, state0 = env.reset(jax.random.key(0), params)
    other, _ = env.reset(jax.random.key(1), params)
    assert not np.allclose(obs0, other)  # different keys, different initial states
    still = jnp.zeros((1,), jnp.float32)
    state, flags = state0, []
    for t in range(3):
        obs, state, _, terminated, truncated, info = env.step(jax.random.key(10 + t), state,
                                                              still, params)
        flags.append((bool(terminated), bool(truncated)))
    assert flags == [(False, False), (False, False), (False, True)]
    assert not np.allclose(obs, info["final_observation"])
    # The same truncation with another step key: another freshly drawn first state, neither the
    # first episode's (Brax's AutoResetWrapper would restore that) nor the other draw's.
    state = state0
    for t in range(3):
        obs2, state, *_ = env.step(jax.random.key(20 + t), state, still, params)
    assert not np.allclose(obs, obs2) and not np.allclose(obs, obs0)


@pytest.mark.parametrize("name, backend, message", [
    ("brax/hoper", "", r"env.name='brax/hoper' is not a Brax environment; did you mean "
     r"brax/hopper"),
    ("brax/nothing_like_it", "", r"valid ids: brax/ant, .*brax/walker2d"),
    ("brax/hopper", "warp", r"env.backend='warp' is not a Brax pipeline; choose one of "
     r"generalized"),
])
def test_errors_are_one_line(name, backend, message):
    with pytest.raises(ConfigError, match=message) as error:
        make_env(EnvConfig(name=name, backend=backend))
    assert "\n" not in str(error.value)


def test_a_users_brax_env_is_unwrapped():
    """`env.name=module:attr` giving a Brax env inside Brax's training wrappers: the auto-reset
    is taken off, the EpisodeWrapper's limit (10 physics steps at action_repeat 2) becomes 5
    steps, and the repeats are kept."""
    env, params = make_env(EnvConfig(name="test_suite_brax:wrapped_pendulum"))
    assert env.name == "brax/InvertedPendulum" and params.max_steps_in_episode == 5
    assert env.action_repeat == 2 and env.action_space(params).shape == (1,)
    obs, state = env.reset(jax.random.key(0), params)
    _, _, reward, terminated, truncated, _ = env.step(jax.random.key(1), state,
                                                      jnp.zeros((1,)), params)
    assert float(reward) == 2.0 and not bool(terminated) and not bool(truncated)
    with pytest.raises(ConfigError, match="built with the 'generalized' pipeline"):
        make_env(EnvConfig(name="test_suite_brax:wrapped_pendulum", backend="spring"))


def test_cli_trains_a_brax_env(tmp_path):
    """A few updates of Brax's `fast` env (no physics: quick to compile) through the CLI, with
    episodes ended by a time limit set from the command line; the final checkpoint holds the
    Brax state."""
    result = run_cli("+env=gymnax", "env.name=brax/fast", "env.num_envs=2",
                     "env.params.max_steps_in_episode=4", "ppo.num_steps=8",
                     "ppo.num_minibatches=2", "ppo.num_epochs=1", "total_timesteps=32",
                     "network.hidden_sizes=[16]", "eval.num_episodes=2", "eval.max_steps=8",
                     "eval.temperatures=[0.0]", "log.progress=false", "log.tensorboard=false",
                     f"hydra.run.dir={tmp_path}")
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["env"] == "brax/fast" and summary["env_steps"] == 32
    assert summary["final_return"] is not None
    assert any((tmp_path / "checkpoints").iterdir())
    assert "Brax System" not in result.stderr  # Brax's maintenance warning is hidden
