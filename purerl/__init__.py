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
    "compute_gae": "purerl.core.gae",
    "ppo_loss": "purerl.core.losses",
    "ppo_term": "purerl.core.losses",
    "Algorithm": "purerl.algos.algorithm",
    "MakeAlgorithm": "purerl.algos.algorithm",
    "LossTerm": "purerl.core.losses",
    "NetworkFactory": "purerl.nets.networks",
    "ActorCriticNetwork": "purerl.nets.networks",
    "RecurrentActorCriticNetwork": "purerl.nets.networks",
    "purerl_network": "purerl.nets.networks",
    "Optimizer": "purerl.algos.learner",
    "StopRule": "purerl.algos.learner",
    "RateRule": "purerl.algos.learner",
    "Batch": "purerl.core.losses",
    "Learner": "purerl.algos.learner",
    "Learned": "purerl.algos.learner",
    "MakeLearner": "purerl.algos.learner",
    "make_learner": "purerl.algos.learner",
    "target_kl_stop": "purerl.algos.learner",
    "adaptive_kl_rate": "purerl.algos.learner",
    "Metrics": "purerl.algos.algorithm",
    "RunnerState": "purerl.algos.algorithm",
    "HyperParams": "purerl.core.schedules",
    "make_ppo": "purerl.algos.ppo",
    "make_program": "purerl.parallel.program",
    "make_train": "purerl.parallel.program",
    "run": "purerl.runs.runner",
    "Event": "purerl.runs.events",
    "load": "purerl.storage.trained",
    "TrainedPolicy": "purerl.storage.trained",
    "export_policy": "purerl.storage.exporting",
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
