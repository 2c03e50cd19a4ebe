"""conf/env/: one preset per gymnax id that can be made offline, and the presets of the
suites beyond gymnax, each valid and documented."""

import importlib.util

import gymnax
import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from purerl.cli.preflight import load_config, presets
from purerl.config import SUITES, config_dir
from purerl.envs import check_env, make_env

OFFLINE_IDS = [name for name in gymnax.registered_envs if name != "MNISTBandit-bsuite"]


def suite_presets() -> dict:
    """preset -> env.name, of the presets whose env is another suite's (`<suite>/<id>`)."""
    names = {p: str(OmegaConf.load(config_dir() / "env" / f"{p}.yaml").env.name)
             for p in presets() if p != "gymnax"}
    return {p: name for p, name in names.items() if name.partition("/")[0] in SUITES}


def preset_name(env_id: str) -> str:
    """CartPole-v1 -> cartpole, MountainCarContinuous-v0 -> mountaincar-continuous."""
    base = env_id.rsplit("-v", 1)[0] if env_id.endswith(("-v0", "-v1")) else env_id
    return base.replace("Continuous", "-continuous").lower()


def _compose(preset, *overrides):
    with initialize_config_dir(str(config_dir()), version_base="1.3"):
        return load_config(compose("config", overrides=[f"+env={preset}", *overrides]), 1)


def test_every_offline_gymnax_id_has_its_preset():
    gymnax_presets = set(presets()) - {"gymnax", "jaxmarl"} - set(suite_presets())
    assert sorted(gymnax_presets) == sorted(preset_name(i) for i in OFFLINE_IDS)


@pytest.mark.parametrize("preset", sorted(suite_presets()))
def test_suite_preset_is_valid_and_commented(preset):
    name = suite_presets()[preset]
    suite = SUITES[name.partition("/")[0]]
    if importlib.util.find_spec(suite.package) is None:
        pytest.skip(f"{suite.package} is not installed")
    config = _compose(preset)
    check_env(*make_env(config.env), config.env.name)
    lines = (config_dir() / "env" / f"{preset}.yaml").read_text().splitlines()
    assert lines[0] == "# @package _global_" and lines[1].startswith(f"# {name}: ")


@pytest.mark.parametrize("env_id", OFFLINE_IDS)
def test_preset_is_valid_and_commented(env_id):
    preset = preset_name(env_id)
    config = _compose(preset)
    assert config.env.name == env_id
    check_env(*make_env(config.env), config.env.name)
    lines = (config_dir() / "env" / f"{preset}.yaml").read_text().splitlines()
    assert lines[0] == "# @package _global_" and lines[1].startswith(f"# {env_id}: ")
    assert bool(config.network.conv_channels) == (env_id.endswith("-MinAtar")
                                                  or env_id == "Pong-misc")


def test_pendulum_preset_learns_a_box_policy_with_a_short_budget():
    """The Gaussian policy with normalized observations: 2e5 steps take the return from about
    -1300 (random) to about -430..-590 (seeds 0-2); the full 5e5-step preset reaches about -160."""
    import jax
    import numpy as np

    from purerl.logging.history import final_returns
    from purerl.parallel.program import make_train

    config = _compose("pendulum", "total_timesteps=200_000")
    _, metrics = jax.jit(make_train(config))(jax.random.key(config.seed))
    final = final_returns(np.asarray(metrics.episode_return_sum), np.asarray(metrics.episode_count))
    assert final[0] >= -700, final
