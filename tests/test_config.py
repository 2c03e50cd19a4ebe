import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from purerl.config import Config, ConfigError, EnvConfig, validate
from purerl.train import config_dir, load_config


@pytest.mark.parametrize("overrides, message", [
    ({"env.name": ""}, "env.name is empty"),
    ({"ppo.num_minibatches": 3}, r"4 \* 16 = 64 is not divisible by ppo.num_minibatches=3"),
    ({"total_timesteps": 63}, r"total_timesteps=63 is smaller than one update: .* = 64"),
    ({"ppo.lr": 0.0}, "ppo.lr=0.0 must be > 0"),
    ({"ppo.lr": -1e-3}, "ppo.lr=-0.001 must be > 0"),
    ({"ppo.gamma": 1.01}, r"ppo.gamma=1.01 must be in \[0, 1\]"),
    ({"ppo.gae_lambda": -0.1}, r"ppo.gae_lambda=-0.1 must be in \[0, 1\]"),
    ({"ppo.clip_eps": 0.0}, "ppo.clip_eps=0.0 must be > 0"),
    ({"env.num_envs": 0}, "env.num_envs=0 must be > 0"),
    ({"ppo.target_kl": 0.0}, "ppo.target_kl=0.0 must be > 0"),
    ({"network.activation": "sin"}, "network.activation='sin' is not one of"),
])
def test_validation_messages(make_config, overrides, message):
    with pytest.raises(ConfigError, match=message):
        validate(make_config(**overrides))


def test_num_envs_must_divide_over_devices(make_config):
    with pytest.raises(ConfigError, match=r"env.num_envs=4 is not divisible by the number of devices \(3\)"):
        validate(make_config(), num_devices=3)
    validate(make_config(), num_devices=2)


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
