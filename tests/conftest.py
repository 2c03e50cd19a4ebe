"""Shared fixtures: tiny configs that compile fast, and a CLI runner."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from purerl.config import Config, EnvConfig, NetworkConfig, PPOConfig

REPO = Path(__file__).resolve().parent.parent


def tiny_config(**overrides) -> Config:
    """CartPole with 4 envs x 16 steps, 2 epochs x 2 minibatches, 8 updates."""
    config = Config(
        total_timesteps=512,
        env=EnvConfig(name="CartPole-v1", num_envs=4),
        ppo=PPOConfig(num_steps=16, num_epochs=2, num_minibatches=2),
        network=NetworkConfig(hidden_sizes=[16, 16]),
    )
    for key, value in overrides.items():
        node = config
        *path, leaf = key.split(".")
        for part in path:
            node = getattr(node, part)
        setattr(node, leaf, value)
    return config


@pytest.fixture(scope="session", autouse=True)
def shared_compilation_cache(tmp_path_factory):
    """One JAX persistent compilation cache for every subprocess the suite starts: the CLI
    runs that build the same programs (most of `test_run.py`'s) compile them once."""
    cache = {"JAX_COMPILATION_CACHE_DIR": str(tmp_path_factory.mktemp("xla_cache")),
             "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0"}
    with pytest.MonkeyPatch.context() as patch:
        for name, value in cache.items():
            patch.setenv(name, value)
        yield


@pytest.fixture
def make_config():
    return tiny_config


def cli_env(env: dict | None = None) -> dict:
    """This process's environment, with the repository and tests/ importable, and `env`."""
    return {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{REPO / 'tests'}", **(env or {})}


def run_cli(*args: str, env: dict | None = None,
            timeout: float = 600) -> subprocess.CompletedProcess:
    """Runs `python -m purerl.train ARGS` from the repository root."""
    return subprocess.run([sys.executable, "-m", "purerl.train", *args], cwd=REPO,
                          env=cli_env(env), capture_output=True, text=True, timeout=timeout)


def run_cli_ok(*args: str) -> subprocess.CompletedProcess:
    """`run_cli(*args)`, which must exit 0 (else the test fails with its stderr's end)."""
    result = run_cli(*args)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


@pytest.fixture
def cli():
    return run_cli


def play(env, params, actions, key: int = 0):
    """Resets `env` (a gymnax one) with `key` and takes `actions` one step each (step keys
    100, 101, ...): -> ([(reward, terminated, truncated)] per step, the last state, the last
    step's info)."""
    import jax

    obs, state = env.reset(jax.random.key(key), params)
    out, info = [], None
    for i, action in enumerate(actions):
        obs, state, reward, terminated, truncated, info = env.step(
            jax.random.key(100 + i), state, action, params)
        out.append((float(reward), bool(terminated), bool(truncated)))
    return out, state, info


def leaf_types(tree):
    """Each leaf's abstract type (dtype, shape, weak type) as a string: equal trees of these
    mean a jitted function sees the same types (no recompiles)."""
    import jax

    return jax.tree.map(lambda leaf: str(jax.typeof(leaf)), tree)


def resume_from_checkpoint(run_dir: Path, copy: Path, keep_until: int, *args: str):
    """Copies a finished run to `copy` as a kill after its checkpoint of update `keep_until`
    would leave it (the later checkpoints and the summary gone), and resumes it there with
    `python -m purerl.train ARGS resume=true`; returns the finished process."""
    import shutil

    shutil.copytree(run_dir, copy)
    for checkpoint in (copy / "checkpoints").iterdir():
        if checkpoint.name.isdigit() and int(checkpoint.name) > keep_until:
            shutil.rmtree(checkpoint)
    (copy / "summary.json").unlink()
    return run_cli_ok(*args, "resume=true", f"hydra.run.dir={copy}")
