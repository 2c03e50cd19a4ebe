"""purerl: PPO where environments, rollout, GAE and optimizer steps run in one jitted program."""

from purerl.config import Config, ConfigError, validate
from purerl.gae import compute_gae
from purerl.losses import ppo_loss
from purerl.ppo import PPO, Metrics, RunnerState, make_ppo
from purerl.program import make_program, make_train

__all__ = [
    "Config", "ConfigError", "validate", "compute_gae", "ppo_loss", "PPO", "Metrics",
    "RunnerState", "make_ppo", "make_program", "make_train",
]
