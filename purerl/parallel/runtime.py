"""The process's platform set-up: JAX's persistent compile cache, the CPU's cores as devices
(`XLA_FLAGS`), and joining the processes of a multi-host run. Each runs before JAX compiles
(or, for the cores, imports) anything."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import List, Mapping, Optional

from purerl.config import Config, ConfigError, auto_cpu_devices

log = logging.getLogger("purerl")
FORCED_DEVICES = "--xla_force_host_platform_device_count"


def compile_cache_dir(setting: Optional[str],
                      environ: Mapping[str, str] = os.environ) -> Optional[Path]:
    """The directory of JAX's persistent compilation cache for `compile_cache=setting`.

    Args:
        setting: None turns the cache off; "auto" is $JAX_COMPILATION_CACHE_DIR if set, else
            $XDG_CACHE_HOME/purerl/xla, else ~/.cache/purerl/xla; anything else is the
            directory itself.
        environ: the environment variables to read.

    Returns:
        The absolute directory, or None.
    """
    if setting is None:
        return None
    if setting == "auto":
        if environ.get("JAX_COMPILATION_CACHE_DIR"):
            return Path(environ["JAX_COMPILATION_CACHE_DIR"]).expanduser().absolute()
        base = Path(environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        return base.expanduser().absolute() / "purerl" / "xla"
    return Path(setting).expanduser().absolute()


def use_compile_cache(setting: Optional[str]) -> None:
    """Points JAX's persistent compilation cache at `compile_cache_dir(setting)` (or turns it
    off), caching every program however small or quick to compile. Call it before JAX compiles
    anything: JAX opens the cache at its first compile and keeps it.

    Args:
        setting: the `compile_cache` setting, as `compile_cache_dir` takes it.
    """
    # JAX (0.5 s): preflight imports this module before it checks the settings
    import jax

    directory = compile_cache_dir(setting)
    jax.config.update("jax_compilation_cache_dir", None if directory is None else str(directory))
    if directory is not None:
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)  # no size limit


def split_members_over_cores(configs: List[Config]) -> None:
    """Makes the CPU's cores devices, so that the members (seeds, sweep points) train split over
    them (`cpu_devices`): XLA_FLAGS's forced host device count, which JAX reads when it makes its
    CPU client (other backends are not touched). Nothing when XLA_FLAGS forces a count already,
    in a multi-host run (each process has its own devices), or once JAX is imported; raises
    ConfigError when the jobs of a sweep ask for different counts.

    Args:
        configs: the jobs' configs (`cpu_devices`, `num_members`, `distributed`).

    Raises:
        ConfigError: the jobs' `cpu_devices` differ.
    """
    settings = sorted({c.cpu_devices for c in configs})
    if len(settings) > 1:
        raise ConfigError(f"cpu_devices={','.join(map(str, settings))}: the jobs of a sweep run "
                          "in one process, on one set of devices; sweep other settings")
    flags = os.environ.get("XLA_FLAGS", "")
    if FORCED_DEVICES in flags or configs[0].distributed.enabled or "jax" in sys.modules:
        return
    count = settings[0] or auto_cpu_devices([c.num_members for c in configs])
    if count > 1:
        os.environ["XLA_FLAGS"] = f"{flags} {FORCED_DEVICES}={count}".strip()


def join_processes(config: Config) -> None:
    """Joins the run's other processes (`distributed.enabled`) before any device is touched;
    all but process 0 log errors only.

    Args:
        config: the run's config (`distributed`).
    """
    # JAX (0.5 s): preflight imports this module before it checks the settings
    import jax

    from purerl.parallel.distributed import initialize

    initialize(config.distributed)
    if jax.process_index() > 0:  # process 0 speaks for the run; the others only fail
        log.setLevel(logging.ERROR)


def check_same_run_dir(run_dir: Path) -> None:
    """The processes of a run write one run directory: raises ConfigError in every process
    when one process's differs from process 0's (a collective).

    Args:
        run_dir: this process's run directory.

    Raises:
        ConfigError: another process's differs.
    """
    # distributed imports JAX (0.5 s): preflight imports this module before any check
    from purerl.parallel.distributed import each_process

    dirs = each_process(str(run_dir.resolve()))
    other = next((i for i, d in enumerate(dirs) if d != dirs[0]), None)
    if other is not None:
        raise ConfigError(f"hydra.run.dir differs between the processes of the run ({dirs[0]} "
                          f"in process 0, {dirs[other]} in process {other}): give every "
                          "process the same one, on a file system they all mount")
