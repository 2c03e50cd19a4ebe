"""Jumanji's adapter (`purerl/envs/suites/jumanji.py`): spaces, gymnax's six-value step,
Jumanji's own time limit (a LAST step with discount 0) and purerl's reported as truncation and a
death as termination, fresh resets, the action mask appended last, one-line errors, and a few
updates through the CLI."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip("jumanji")

from conftest import run_cli  # noqa: E402
from gymnax.environments import spaces  # noqa: E402

from purerl.config import ConfigError, EnvConfig  # noqa: E402
from purerl.envs import make_env  # noqa: E402
from purerl.envs.action_spaces import MultiDiscrete  # noqa: E402
from purerl.envs.suites.base import action_mask_from_obs  # noqa: E402


def small_snake():
    """A user's own Jumanji env (`env.name=test_suite_jumanji:small_snake`): 6x6 Snake whose
    own time limit, 4 steps, Jumanji ends with discount 0."""
    from jumanji.environments import Snake
    return Snake(num_rows=6, num_cols=6, time_limit=4)


@pytest.fixture(scope="module")
def snake():
    env, params = make_env(EnvConfig(name="jumanji/Snake-v1"))
    return env, params, jax.jit(env.reset), jax.jit(env.step)


def _legal(mask):
    return jnp.argmax(mask).astype(jnp.int32)  # the first legal action


def test_spaces():
    env, params = make_env(EnvConfig(name="jumanji/Snake-v1"))
    assert env.name == "jumanji/Snake-v1"
    space = env.action_space(params)
    assert isinstance(space, spaces.Discrete) and space.n == 4
    # grid 12x12x5, step_count, then the mask of the 4 moves
    assert env.observation_space(params).shape == (12 * 12 * 5 + 1 + 4,)
    assert env.action_mask_size == 4 and params.max_steps_in_episode == 4000
    tetris, _ = make_env(EnvConfig(name="jumanji/Tetris-v0"))  # a joint mask [4, 10]
    assert isinstance(tetris.action_space(None), spaces.Discrete)
    assert tetris.num_actions == 40 and tetris.action_mask_size == 40
    assert tetris.suite_action(jnp.int32(13)).tolist() == [1, 3]  # rotation 1, column 3
    lbf, _ = make_env(EnvConfig(name="jumanji/LevelBasedForaging-v0"))  # a mask row per agent
    assert isinstance(lbf.action_space(None), MultiDiscrete)
    assert lbf.action_space(None).nvec == (6, 6) and lbf.action_mask_size == 12


def test_six_value_step_and_the_mask_of_the_current_observation(snake):
    env, params, reset, step = snake
    obs, state = reset(jax.random.key(0), params)
    assert obs.shape == env.observation_space(params).shape and obs.dtype == jnp.float32
    for t in range(3):
        mask = action_mask_from_obs(obs, env.action_mask_size)
        assert mask.tolist() == state.inner.state.action_mask.tolist()
        out = step(jax.random.key(t + 1), state, _legal(mask), params)
        assert len(out) == 6
        obs, state, reward, terminated, truncated, info = out
        assert reward.dtype == jnp.float32 and terminated.dtype == truncated.dtype == jnp.bool_
        assert not terminated and not truncated and "final_observation" in info
    assert action_mask_from_obs(obs, 4).tolist() == state.inner.state.action_mask.tolist()
    # some starts are against a wall: the mask there is not all legal, and matches the suite's
    obs, states = jax.vmap(reset, in_axes=(0, None))(jax.random.split(jax.random.key(1), 16),
                                                     params)
    masks = action_mask_from_obs(obs, 4)
    assert np.array_equal(masks, states.inner.state.action_mask) and not masks.all()
    # step_count comes scaled by the time limit, just before the mask
    assert float(obs[0, -5]) == 0.0


def test_purerl_time_limit_is_truncation(snake):
    env, params, reset, step = snake
    params = params.replace(max_steps_in_episode=3)
    obs, state = reset(jax.random.key(2), params)
    for t in range(3):
        obs, state, _, terminated, truncated, info = step(
            jax.random.key(t), state, _legal(action_mask_from_obs(obs, 4)), params)
        assert not terminated and bool(truncated) == (t == 2)
    assert int(state.time) == 0  # auto-reset after the truncation


def test_suites_own_time_limit_is_truncation_and_a_death_termination():
    env, params = make_env(EnvConfig(name="test_suite_jumanji:small_snake"))
    assert env.name == "jumanji/Snake" and params.max_steps_in_episode == 4
    reset, step = jax.jit(env.reset_env), jax.jit(env.step_env)
    params = params.replace(max_steps_in_episode=100)  # only Jumanji's own limit (4) is left
    obs, state = reset(jax.random.key(3), params)
    for t in range(4):
        obs, state, _, terminated, _ = step(jax.random.key(t), state,
                                            _legal(action_mask_from_obs(obs, 4)), params)
        assert not terminated and bool(state.truncated) == (t == 3)
    # into a wall: Jumanji's termination (LAST, discount 0) before its time limit
    for seed in range(32):
        obs, state = reset(jax.random.key(seed), params)
        mask = action_mask_from_obs(obs, 4)
        if not mask.all():
            break
    _, state, _, terminated, _ = step(jax.random.key(0), state, jnp.argmin(mask), params)
    assert terminated and not state.truncated


def test_fresh_resets(snake):
    env, params, reset, step = snake
    obs, _ = jax.vmap(reset, in_axes=(0, None))(jax.random.split(jax.random.key(4), 8), params)
    assert len({tuple(np.asarray(o).tolist()) for o in obs}) > 1
    # gymnax's auto-reset draws a new start after an episode ends
    params = params.replace(max_steps_in_episode=1)
    starts = set()
    for seed in range(4):
        obs, state = reset(jax.random.key(5), params)
        obs, *_ = step(jax.random.key(seed), state, _legal(action_mask_from_obs(obs, 4)), params)
        starts.add(tuple(np.asarray(obs).tolist()))
    assert len(starts) > 1


def test_errors_are_one_line(monkeypatch):
    for name, expected in [("jumanji/Snake-v9", "did you mean jumanji/Snake-v1"),
                           ("jumanji/Snake", "did you mean jumanji/Snake-v1")]:
        with pytest.raises(ConfigError) as error:
            make_env(EnvConfig(name=name))
        message = str(error.value)
        assert len(message.splitlines()) == 1 and f"env.name={name!r}" in message
        assert expected in message
    import huggingface_hub.constants
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)  # no retries
    with pytest.raises(ConfigError) as error:
        make_env(EnvConfig(name="jumanji/Sokoban-v0"))  # its levels come from huggingface.co
    assert len(str(error.value).splitlines()) == 1 and "downloads" in str(error.value)
    from jumanji.environments import Snake
    from jumanji.wrappers import AutoResetWrapper

    from purerl.envs.suites import jumanji as adapter
    assert adapter.accepts(Snake()) and not adapter.accepts(object())
    with pytest.raises(ConfigError, match="purerl auto-resets"):
        adapter.wrap(AutoResetWrapper(Snake()), EnvConfig(name="m:snake"))


def test_a_few_updates_through_the_cli(tmp_path):
    result = run_cli("+env=gymnax", "env.name=jumanji/Snake-v1", "env.num_envs=2",
                     "ppo.num_steps=8", "ppo.num_epochs=1", "ppo.num_minibatches=1",
                     "total_timesteps=32", "network.hidden_sizes=[16]", "eval.num_episodes=2",
                     "eval.temperatures=[1.0]", "eval.max_steps=16", "log.progress=false",
                     "log.tensorboard=false", f"hydra.run.dir={tmp_path}")
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["status"] == "completed"
