import dataclasses
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from purerl.cli.preflight import load_config, preflight
from purerl.config import Config, ConfigError, EnvConfig, auto_cpu_devices, config_dir
from purerl.parallel.runtime import compile_cache_dir
from purerl.storage.restoring import config_differences
from purerl.validation import check_devices, validate


@pytest.mark.parametrize("overrides, message", [
    ({"env.name": ""}, "env.name is empty"),
    ({"env.reset_pool": 4}, r"env.reset_pool=4 must be >= 0 and smaller than env.num_envs=4"),
    ({"ppo.num_minibatches": 3}, r"4 \* 16 = 64 is not divisible by ppo.num_minibatches=3"),
    ({"total_timesteps": 63}, r"total_timesteps=63 is smaller than one update: .* = 64"),
    ({"ppo.lr": 0.0}, "ppo.lr=0.0 must be > 0"),
    ({"ppo.lr": -1e-3}, "ppo.lr=-0.001 must be > 0"),
    ({"ppo.gamma": 1.01}, r"ppo.gamma=1.01 must be in \[0, 1\]"),
    ({"ppo.gae_lambda": -0.1}, r"ppo.gae_lambda=-0.1 must be in \[0, 1\]"),
    ({"ppo.clip_eps": 0.0}, "ppo.clip_eps=0.0 must be > 0"),
    ({"env.num_envs": 0}, "env.num_envs=0 must be > 0"),
    ({"ppo.target_kl": 0.0}, "ppo.target_kl=0.0 must be > 0"),
    ({"ppo.lr_schedule": "kl"}, r"ppo.lr_schedule='kl' is not one of adaptive_kl \(or null"),
    ({"ppo.lr_schedule": "adaptive_kl", "ppo.schedule.lr.kind": "cosine"},
     "ppo.lr_schedule=adaptive_kl and ppo.schedule.lr.kind=cosine both set the lr: use one"),
    ({"ppo.lr_schedule": "adaptive_kl", "ppo.desired_kl": 0.0}, "ppo.desired_kl=0.0 must be > 0"),
    ({"ppo.lr_schedule": "adaptive_kl", "ppo.lr_min": 0.1},
     r"ppo.lr_min=0.1 and ppo.lr_max=0.01 must be 0 < lr_min <= lr_max"),
    ({"network.activation": "sin"}, "network.activation='sin' is not one of"),
    ({"compile_cache": " "}, "compile_cache=' ' is empty: give a directory, auto"),
])
def test_validation_messages(make_config, overrides, message):
    with pytest.raises(ConfigError, match=message):
        validate(make_config(**overrides))


def test_num_envs_must_divide_over_devices(make_config):
    message = r"env.num_envs=4 is not divisible by the number of devices \(3\)"
    with pytest.raises(ConfigError, match=message):
        validate(make_config(), num_devices=3)
    validate(make_config(), num_devices=2)


def test_device_checks_wait_for_the_device_count(make_config):
    """`num_devices=None` checks everything but what the device count decides: here 2 envs x
    3 steps make minibatches of 3 on one device, but 1 x 3 steps per device do not divide."""
    config = make_config(**{"env.num_envs": 2, "ppo.num_steps": 3, "total_timesteps": 60})
    validate(config, num_devices=None)
    with pytest.raises(ConfigError, match=r"2 \* 3 = 6 \(3 per device\) is not divisible by "
                                          r"ppo.num_minibatches=2"):
        check_devices(config, 2)
    with pytest.raises(ConfigError, match=r"\(3 per device\)"):
        validate(config, num_devices=2)


def test_schedule_validation(make_config):
    config = make_config(**{"ppo.anneal_lr": False})
    config.ppo.schedule.clip_eps.kind = "piecewise"
    config.ppo.schedule.clip_eps.boundaries = [0.5]
    config.ppo.schedule.clip_eps.values = [1.0]
    with pytest.raises(ConfigError, match="piecewise needs one more value than boundaries"):
        validate(config)
    config.ppo.schedule.clip_eps.values = [1.0, 0.5]
    validate(config)
    config.ppo.schedule.lr.kind = "exponential"
    with pytest.raises(ConfigError, match="ppo.schedule.lr.end=0.0 must be > 0"):
        validate(config)


def test_yaml_defaults_equal_schema_defaults():
    """conf/config.yaml documents the schema's defaults; they must not drift apart."""
    with initialize_config_dir(str(config_dir()), version_base="1.3"):
        cfg = compose("config", overrides=["+env=gymnax", "env.name=CartPole-v1"])
    assert OmegaConf.to_object(cfg) == Config(env=EnvConfig(name="CartPole-v1"))


def test_cartpole_preset_is_purejaxrl_setting():
    with initialize_config_dir(str(config_dir()), version_base="1.3"):
        config = load_config(compose("config", overrides=["+env=cartpole"]), num_devices=1)
    assert (config.env.num_envs, config.ppo.num_steps) == (4, 128)
    assert (config.ppo.num_epochs, config.ppo.num_minibatches) == (4, 4)
    assert config.ppo.lr == 2.5e-4 and config.ppo.anneal_lr
    assert config.total_timesteps == 500_000 and config.network.hidden_sizes == [64, 64]
    assert config.network.activation == "tanh" and not config.network.shared


def test_derived_sizes(make_config):
    config = make_config()
    assert (config.batch_size, config.minibatch_size, config.num_updates) == (64, 32, 8)


def test_compile_cache_dir(tmp_path):
    """auto: $JAX_COMPILATION_CACHE_DIR, else $XDG_CACHE_HOME/purerl/xla, else ~/.cache/...;
    a path is itself (user-expanded, absolute); None is off."""
    env_dir, xdg = str(tmp_path / "env"), str(tmp_path / "xdg")
    assert compile_cache_dir("auto", {"JAX_COMPILATION_CACHE_DIR": env_dir,
                                      "XDG_CACHE_HOME": xdg}) == tmp_path / "env"
    assert compile_cache_dir("auto", {"XDG_CACHE_HOME": xdg}) == tmp_path / "xdg/purerl/xla"
    assert compile_cache_dir("auto", {}) == Path.home() / ".cache/purerl/xla"
    assert compile_cache_dir("~/xla", {"JAX_COMPILATION_CACHE_DIR": env_dir}) == Path.home() / "xla"
    assert compile_cache_dir("xla", {}) == Path.cwd() / "xla"
    assert compile_cache_dir(None, {"JAX_COMPILATION_CACHE_DIR": env_dir}) is None


def test_compile_cache_must_be_one_directory(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(ConfigError, match=r"compile_cache=.*/file: .* is a file, not a directory"):
        preflight(["+env=cartpole", f"compile_cache={tmp_path / 'file'}"])
    with pytest.raises(ConfigError, match=r"compile_cache=a,b: the jobs of a sweep run in one "
                                          r"process and share one compile cache"):
        preflight(["-m", "+env=cartpole", "compile_cache=a,b"])


def test_compile_cache_and_cpu_devices_do_not_count_as_changes_on_resume(make_config):
    saved = dataclasses.asdict(make_config(compile_cache="auto"))
    assert config_differences(saved, make_config(compile_cache=None, cpu_devices=2)) == []
    assert config_differences(saved, make_config(seed=1)) == ["seed=0 -> 1"]


def test_a_suite_not_installed_is_one_line_with_its_extra(monkeypatch, make_config):
    import purerl.config

    monkeypatch.setitem(purerl.config.SUITES, "brax",
                        purerl.config.Suite("brax", "no_such_package_here", "brax"))
    with pytest.raises(ConfigError, match=r"^env.name='brax/hopper' needs brax, which is not "
                       r"installed: pip install -e \"\.\[brax\]\"$"):
        validate(make_config(**{"env.name": "brax/hopper"}))
    with pytest.raises(ConfigError, match="names no env of pgx: write pgx/<id>"):
        validate(make_config(**{"env.name": "pgx/"}))


@pytest.mark.parametrize("members, cores, devices", [
    ([8], 2, 2), ([3], 2, 1), ([1], 16, 1), ([6], 4, 3), ([8, 4], 16, 4), ([12], 8, 6),
    ([4], 1, 1)])
def test_auto_cpu_devices_is_the_most_cores_that_divide_every_jobs_members(members, cores, devices):
    assert auto_cpu_devices(members, cores) == devices
