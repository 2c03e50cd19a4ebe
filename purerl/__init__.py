"""purerl: PPO where environments, rollout, GAE and optimizer steps run in one jitted program.

The names below are imported when first used (PEP 562), so that `import purerl.config` and the
command line's checks of its settings do not import JAX.
"""

from __future__ import annotations

import importlib

from purerl.config import Config, ConfigError, hyperparameter
from purerl.gymnax_import import defer_gymnax_plotting
from purerl.validation import validate
from purerl.version import __version__

defer_gymnax_plotting()

_LAZY = {  # name -> the module that defines it
    "compute_gae": "purerl.gae",
    "ppo_loss": "purerl.losses",
    "ppo_term": "purerl.losses",
    "Algorithm": "purerl.algorithm",
    "MakeAlgorithm": "purerl.algorithm",
    "LossTerm": "purerl.losses",
    "NetworkFactory": "purerl.networks",
    "ActorCriticNetwork": "purerl.networks",
    "RecurrentActorCriticNetwork": "purerl.networks",
    "purerl_network": "purerl.networks",
    "Optimizer": "purerl.learner",
    "StopRule": "purerl.learner",
    "Batch": "purerl.learner",
    "Learner": "purerl.learner",
    "Learned": "purerl.learner",
    "MakeLearner": "purerl.learner",
    "make_learner": "purerl.learner",
    "target_kl_stop": "purerl.learner",
    "Metrics": "purerl.algorithm",
    "RunnerState": "purerl.algorithm",
    "HyperParams": "purerl.schedules",
    "make_ppo": "purerl.ppo",
    "make_program": "purerl.program",
    "make_train": "purerl.program",
    "run": "purerl.runner",
    "Event": "purerl.events",
    "load": "purerl.trained",
    "TrainedPolicy": "purerl.trained",
    "export_policy": "purerl.exporting",
}

__all__ = ["Config", "ConfigError", "hyperparameter", "validate", "__version__", *_LAZY]


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module 'purerl' has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
