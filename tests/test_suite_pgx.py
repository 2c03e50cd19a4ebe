"""Pgx's adapter (`purerl/envs/suites/pgx.py`): spaces, gymnax's six-value step, the time limit
reported as truncation and the game's end as termination, fresh resets and 2048's tiles drawn
from the step's key, `legal_action_mask` appended last, two-player games refused in one line,
and a few updates through the CLI."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip("pgx")

from conftest import run_cli  # noqa: E402
from gymnax.environments import spaces  # noqa: E402

from purerl.config import ConfigError, EnvConfig  # noqa: E402
from purerl.envs import make_env  # noqa: E402
from purerl.envs.suites.base import action_mask_from_obs  # noqa: E402


@pytest.fixture(scope="module")
def game():
    env, params = make_env(EnvConfig(name="pgx/2048"))
    return env, params, jax.jit(env.reset), jax.jit(env.step)


def _legal(obs):
    return jnp.argmax(action_mask_from_obs(obs, 4)).astype(jnp.int32)  # the first legal move


def test_spaces(game):
    env, params, *_ = game
    assert env.name == "pgx/2048"
    space = env.action_space(params)
    assert isinstance(space, spaces.Discrete) and space.n == 4
    # the board one-hot [4, 4, 31] flattened, then the 4 moves' mask
    assert env.observation_space(params).shape == (4 * 4 * 31 + 4,)
    assert env.action_mask_size == 4 and params.max_steps_in_episode == 10_000
    breakout, params = make_env(EnvConfig(name="pgx/minatar-breakout"))
    # MinAtar's mask is always all legal: none, and its image stays an image
    assert breakout.action_mask_size == 0
    assert breakout.observation_space(params).shape == (10, 10, 4)
    assert breakout.action_space(params).n == 3 and params.max_steps_in_episode == 1000


def test_six_value_step_and_the_mask_of_the_current_observation(game):
    env, params, reset, step = game
    obs, state = reset(jax.random.key(0), params)
    for t in range(3):
        assert action_mask_from_obs(obs, 4).tolist() == state.inner.legal_action_mask.tolist()
        out = step(jax.random.key(t + 1), state, _legal(obs), params)
        assert len(out) == 6
        obs, state, reward, terminated, truncated, info = out
        assert reward.dtype == jnp.float32 and terminated.dtype == truncated.dtype == jnp.bool_
        assert not terminated and not truncated and "final_observation" in info
    assert action_mask_from_obs(obs, 4).tolist() == state.inner.legal_action_mask.tolist()
    # a start with two tiles in a corner cannot move every way: masks not all legal somewhere
    obs, states = jax.vmap(reset, in_axes=(0, None))(jax.random.split(jax.random.key(1), 32),
                                                     params)
    masks = action_mask_from_obs(obs, 4)
    assert np.array_equal(masks, states.inner.legal_action_mask) and not masks.all()


def test_time_limit_is_truncation_and_the_games_end_termination(game):
    env, params, reset, step = game
    short = params.replace(max_steps_in_episode=3)
    obs, state = reset(jax.random.key(2), short)
    for t in range(3):
        obs, state, _, terminated, truncated, _ = step(jax.random.key(t), state, _legal(obs),
                                                       short)
        assert not terminated and bool(truncated) == (t == 2)
    assert int(state.time) == 0  # auto-reset after the truncation
    # one cell left, and no merge whichever tile the move adds: Pgx's terminated, no truncation
    obs, state = reset(jax.random.key(3), params)
    board = jnp.int32([[3, 4, 3, 4], [4, 3, 4, 3], [3, 4, 3, 6], [0, 4, 3, 5]]).ravel()
    inner = state.inner.replace(_board=board, legal_action_mask=jnp.ones(4, bool))
    _, state, _, terminated, _ = jax.jit(env.step_env)(  # left: the last row is 4 3 5 _
        jax.random.key(4), state.replace(inner=inner), jnp.int32(0), params)
    assert terminated and not state.truncated


def test_fresh_resets_and_tiles_from_the_step_key(game):
    env, params, reset, step = game
    obs, _ = jax.vmap(reset, in_axes=(0, None))(jax.random.split(jax.random.key(5), 8), params)
    assert len({tuple(np.asarray(o).tolist()) for o in obs}) > 1
    obs, state = reset(jax.random.key(6), params)
    boards = {tuple(np.asarray(step(jax.random.key(seed), state, _legal(obs), params)[0]).tolist())
              for seed in range(8)}
    assert len(boards) > 1  # the new tile is placed by the key the step is given


def test_errors_are_one_line():
    for name, expected in [("pgx/2049", "did you mean pgx/2048"),
                           ("pgx/tic_tac_toe", "two-player")]:
        with pytest.raises(ConfigError) as error:
            make_env(EnvConfig(name=name))
        message = str(error.value)
        assert len(message.splitlines()) == 1 and f"env.name={name!r}" in message
        assert expected in message
    import pgx

    from purerl.envs.suites import pgx as adapter
    assert adapter.accepts(pgx.make("2048")) and not adapter.accepts(object())
    with pytest.raises(ConfigError, match="out of scope"):
        adapter.wrap(pgx.make("connect_four"), EnvConfig(name="m:four"))


def test_a_few_updates_through_the_cli(tmp_path):
    result = run_cli("+env=gymnax", "env.name=pgx/2048", "env.num_envs=2", "ppo.num_steps=8",
                     "ppo.num_epochs=1", "ppo.num_minibatches=1", "total_timesteps=32",
                     "network.hidden_sizes=[16]", "eval.num_episodes=2",
                     "eval.temperatures=[1.0]", "eval.max_steps=16", "log.progress=false",
                     "log.tensorboard=false", f"hydra.run.dir={tmp_path}")
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["status"] == "completed"
