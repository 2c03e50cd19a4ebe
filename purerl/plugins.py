"""A user's code named in a setting as `pkg.module:name` (`network.factory`,
`ppo.loss_terms`, `algorithm`, `events`): imported when the run is built, a one-line
ConfigError when it cannot be."""

from __future__ import annotations

import importlib
from typing import Callable

from purerl.config import ConfigError


def load_callable(setting: str, name: str) -> Callable:
    """The callable that `name` (`pkg.module:attr`) names.

    Args:
        setting: the setting that names it (`network.factory`), for the error.
        name: `pkg.module:attr`.

    Returns:
        The attribute. Raises ConfigError when the module does not import or has no such
            callable.
    """
    module_name, _, attr = name.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as error:
        raise ConfigError(f"{setting}={name}: cannot import {module_name!r}: "
                          f"{' '.join(str(error).split())}") from None
    if not callable(getattr(module, attr, None)):
        raise ConfigError(f"{setting}={name}: {module_name!r} has no callable {attr!r}")
    return getattr(module, attr)
