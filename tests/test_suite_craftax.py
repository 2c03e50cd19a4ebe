"""The Craftax adapter (purerl/envs/suites/craftax.py): spaces, gymnax 1.0's six-value step,
Craftax's `done` split into death (terminated) and its time limit (truncated), fresh resets,
errors, a user's env, the CLI.

Craftax compiles slowly (world generation and the game step: about 10 s for one env's step on
2 cores); the unit tests share one compiled step, compiled with XLA's cheaper CPU passes (about
half the compile time), and the CLI run is the smallest there is."""

import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from gymnax.environments import spaces

pytest.importorskip("craftax")

from conftest import run_cli  # noqa: E402

from purerl.config import ConfigError, EnvConfig  # noqa: E402
from purerl.envs import make_env  # noqa: E402
from purerl.envs.suites import craftax as adapter  # noqa: E402

FAST_COMPILE = {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True}
NOOP = 0  # Classic's action 0


def user_env():
    """A user's Craftax env (its AutoReset form) for env.name=test_suite_craftax:user_env."""
    from craftax.craftax_env import make_craftax_env_from_name

    return make_craftax_env_from_name("Craftax-Classic-Symbolic-v1", auto_reset=True)


@pytest.fixture(scope="module")
def classic():
    """Craftax-Classic-Symbolic-v1 with its own time limit at 3 steps, and its reset and step
    compiled once (the params, purerl's limit among them, are arguments)."""
    env, _ = make_env(EnvConfig(name="craftax/Craftax-Classic-Symbolic-v1"))
    env = adapter.wrap(env.env, EnvConfig(), params=env.params.replace(max_timesteps=3))
    params = env.default_params
    key = jax.random.key(0)
    reset = jax.jit(env.reset).lower(key, params).compile(FAST_COMPILE)
    _, state = reset(key, params)
    step = jax.jit(env.step).lower(key, state, jnp.int32(0), params).compile(FAST_COMPILE)
    return env, params, reset, step


def play(classic, params, steps, state=None):
    env, _, reset, step = classic
    if state is None:
        _, state = reset(jax.random.key(0), params)
    out = []
    for i in range(steps):
        obs, state, reward, terminated, truncated, info = step(
            jax.random.key(100 + i), state, jnp.int32(NOOP), params)
        out.append((bool(terminated), bool(truncated)))
    return out, state, obs, info


def test_spaces():
    env, params = make_env(EnvConfig(name="craftax/Craftax-Classic-Symbolic-v1"))
    assert env.name == "craftax/Craftax-Classic-Symbolic-v1"
    assert params.max_steps_in_episode == 10_000  # Craftax-Classic's max_timesteps
    action_space = env.action_space(params)
    assert isinstance(action_space, spaces.Discrete) and action_space.n == 17
    space = env.observation_space(params)
    assert space.shape == (1345,) and space.dtype == jnp.float32


def test_six_value_step_and_time_limits(classic):
    env, params, _, _ = classic
    assert params.max_steps_in_episode == 3
    out, state, obs, info = play(classic, params.replace(max_steps_in_episode=2), 1)
    assert obs.shape == (1345,) and obs.dtype == jnp.float32
    assert info["final_observation"].shape == (1345,)
    # purerl's limit (2) before Craftax's (3)
    out, _, _, _ = play(classic, params.replace(max_steps_in_episode=2), 3)
    assert out == [(False, False), (False, True), (False, False)]
    # Craftax's own limit (in its `done`), purerl's far above it
    out, _, _, _ = play(classic, params.replace(max_steps_in_episode=1000), 4)
    assert out == [(False, False), (False, False), (False, True), (False, False)]


def test_death_terminates_even_at_the_time_limit(classic):
    env, params, reset, _ = classic
    params = params.replace(max_steps_in_episode=1000)
    _, state = reset(jax.random.key(0), params)
    dying = state.replace(inner=state.inner.replace(player_health=jnp.zeros_like(
        state.inner.player_health)))
    out, _, _, _ = play(classic, params, 1, dying)
    assert out == [(True, False)]
    at_limit = dying.replace(inner=dying.inner.replace(timestep=dying.inner.timestep + 2),
                             time=dying.time + 2)
    out, _, _, _ = play(classic, params, 1, at_limit)
    assert out == [(True, False)]


def test_resets_are_fresh(classic):
    env, params, reset, step = classic
    maps = {np.asarray(reset(jax.random.key(k), params)[1].inner.map).tobytes() for k in range(3)}
    assert len(maps) == 3
    # the auto-reset after a time limit draws a new world each time
    _, state = reset(jax.random.key(0), params)
    at_limit = state.replace(time=jnp.int32(999))
    params = params.replace(max_steps_in_episode=1000)
    maps = set()
    for k in range(3):
        _, new, _, _, truncated, _ = step(jax.random.key(k), at_limit, jnp.int32(NOOP), params)
        assert bool(truncated)
        maps.add(np.asarray(new.inner.map).tobytes())
    assert len(maps) == 3


def test_bad_id_is_one_line():
    with pytest.raises(ConfigError) as error:
        make_env(EnvConfig(name="craftax/Craftax-Classic-Symbolic-AutoReset-v1"))
    message = str(error.value)
    assert "\n" not in message and "Craftax-Classic-Symbolic-v1" in message
    assert "env.name='craftax/Craftax-Classic-Symbolic-AutoReset-v1'" in message


def test_a_users_craftax_env():
    env, params = make_env(EnvConfig(name="test_suite_craftax:user_env"))
    assert isinstance(env, adapter.CraftaxEnv) and adapter.accepts(env.env)
    assert params.max_steps_in_episode == 10_000 and env.observation_space(params).shape == (
        1345,)


def test_cli_trains_an_update(tmp_path):
    result = run_cli("+env=gymnax", "env.name=craftax/Craftax-Classic-Symbolic-v1",
                     "network.hidden_sizes=[16]", "env.num_envs=2", "ppo.num_steps=8",
                     "ppo.num_epochs=1", "ppo.num_minibatches=1", "total_timesteps=16",
                     "eval.num_episodes=1", "eval.temperatures=[0.0]", "eval.max_steps=4",
                     "log.tensorboard=false", f"hydra.run.dir={tmp_path}",
                     env={"XLA_FLAGS": os.environ.get("XLA_FLAGS", "")
                          + " --xla_backend_optimization_level=0"
                          " --xla_llvm_disable_expensive_passes=true"})
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["env"] == "craftax/Craftax-Classic-Symbolic-v1" and summary["env_steps"] == 16
