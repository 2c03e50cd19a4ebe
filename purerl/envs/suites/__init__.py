"""Environment suites beyond gymnax, one adapter module per suite: `env.name=<suite>/<id>`.

Each adapter (`purerl/envs/suites/<suite>.py`) builds a `SuiteEnv` (`base.py`): gymnax 1.0's
contract with the suite's terminations and time limits kept apart. A suite is an optional
extra; without it, naming one of its envs is a one-line error with the install command.
"""

from __future__ import annotations

import importlib
import sys

from purerl.config import SUITES, EnvConfig
from purerl.validation import check_suite


def is_suite_name(name: str) -> bool:
    """Whether `env.name` names a suite's env (`<suite>/<id>`) rather than a gymnax id.

    Args:
        name: the `env.name` setting.

    Returns:
        True when its part before the first "/" is a suite of `SUITES`.
    """
    return name.partition("/")[0] in SUITES and "/" in name


def make_suite_env(name: str, config: EnvConfig):
    """(env, env_params) for `<suite>/<id>`; raises ConfigError.

    Args:
        name: `<suite>/<id>`.
        config: the `env` settings, for the adapter.

    Returns:
        `(env, env_params)`: the adapter's `SuiteEnv` and its `default_params`.

    Raises:
        ConfigError: an unknown suite or id, the suite not installed, or the env not made.
    """
    suite, env_id = check_suite(name)
    adapter = importlib.import_module(f"purerl.envs.suites.{suite.module}")
    env = adapter.make(env_id, config)
    return env, env.default_params


def adapt_user_env(env, config: EnvConfig, params=None):
    """A user's env object (from `module:attr`, with the suite's `params` when the factory
    returned `(env, params)`) wrapped by the adapter of the suite it is an env of (a suite
    counts once the user's module has imported it); None for none of them. Each adapter has
    `make(env_id, config)`, `accepts(obj)` and `wrap(obj, config, params=None)`.

    Args:
        env: the user's env object.
        config: the `env` settings.
        params: the suite's params the factory returned with `env`, or None.

    Returns:
        The adapter's `SuiteEnv`, or None.
    """
    for suite in SUITES.values():
        if suite.package not in sys.modules:
            continue
        adapter = importlib.import_module(f"purerl.envs.suites.{suite.module}")
        if adapter.accepts(env):
            return adapter.wrap(env, config, params=params)
    return None
