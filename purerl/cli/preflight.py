"""The command line's checks, before Hydra runs a job: every setting of every job a command
line asks for (a sweep's too), composed and validated before JAX is imported, then the checks
that need JAX (the device count, the environments). A bad setting raises ConfigError with one
line naming it."""

from __future__ import annotations

import difflib
import importlib.util
import tempfile
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import List, Optional

from hydra import compose, initialize_config_dir
from hydra.core.config_store import ConfigStore
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import (
    ConfigAttributeError,
    ConfigKeyError,
    OmegaConfBaseException,
    ValidationError,
)

from purerl.cli.settings_help import preset_descriptions
from purerl.config import Config, ConfigError, config_dir
from purerl.parallel.runtime import (
    compile_cache_dir,
    join_processes,
    split_members_over_cores,
    use_compile_cache,
)
from purerl.storage.write_errors import WriteError, writing
from purerl.validation import check_algorithm_settings, check_devices, validate

# The sections whose keys are an env's or an algorithm's, not the schema's
OPEN_SECTIONS = ("env.params.", "algorithm.", "sweep.algorithm.")


def presets() -> List[str]:
    """The names of the env presets (`conf/env/*.yaml`).

    Returns:
        The preset names, sorted.
    """
    return [name for name, _ in preset_descriptions("env")]


ConfigStore.instance().store(name="purerl_schema", node=Config)


def _schema_keys(node=None, prefix: str = "") -> List[str]:
    """Every dotted key of the schema, e.g. 'ppo.lr'."""
    node = Config() if node is None else node
    keys = []
    for f in fields(node):
        value = getattr(node, f.name)
        nested = is_dataclass(value)
        keys += _schema_keys(value, f"{prefix}{f.name}.") if nested else [prefix + f.name]
    return keys


def _check_env_override(overrides) -> None:
    env = [o for o in overrides if o.key_or_group == "env"]
    names = ", ".join(presets())
    if not env:
        raise ConfigError(f"no environment given: pass +env=<preset> (presets: {names})")
    for o in env:
        values = list(o.sweep_string_iterator()) if o.is_sweep_override() else [o.value()]
        if o.get_key_element() != "+env":
            raise ConfigError(f"pass the preset with a plus: +env={values[0]}")
        for value in values:
            if value not in presets():
                close = difflib.get_close_matches(str(value), presets(), n=1)
                hint = f"did you mean {close[0]}? " if close else ""
                raise ConfigError(f"unknown preset +env={value}: {hint}(presets: {names})")


# Hydra plugins that purerl's extras install: (config group, option prefix) -> (module, the
# PyPI name, the extra).
HYDRA_PLUGINS = {
    ("hydra/sweeper", "optuna"): ("hydra_plugins.hydra_optuna_sweeper", "hydra-optuna-sweeper",
                                  "sweep"),
    ("hydra/sweeper", "purerl_optuna"): ("hydra_plugins.hydra_optuna_sweeper",
                                         "hydra-optuna-sweeper", "sweep"),
    ("hydra/launcher", "submitit"): ("hydra_plugins.hydra_submitit_launcher",
                                     "hydra-submitit-launcher", "cluster"),
    ("hydra/launcher", "ray"): ("hydra_plugins.hydra_ray_launcher", "hydra-ray-launcher",
                                "cluster"),
}


def _check_hydra_plugins(overrides) -> None:
    """A sweeper or launcher of purerl's extras that is not installed: raises ConfigError."""
    for o in overrides:
        for (group, prefix), (module, name, extra) in HYDRA_PLUGINS.items():
            if (o.key_or_group == group and str(o.value()).startswith(prefix)
                    and not installed(module)):
                raise ConfigError(f"{group}={o.value()} needs {name}, not installed: "
                                  f"pip install -e '.[{extra}]'")


def installed(module: str) -> bool:
    """Whether `module` can be imported, without importing it.

    Args:
        module: a dotted module name.

    Returns:
        True when it is found (False when its parent package is missing too).
    """
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # its parent package is missing
        return False


def _override_variants(overrides, sampling_sweeper: bool) -> List[List[str]]:
    """Command lines to check: every value of every sweep, the other sweeps at their first
    (an `interval()`: its bounds, which only a sampling sweeper, e.g. Optuna's, can take)."""
    choices = []
    for o in overrides:
        key = o.get_key_element()
        if o.is_interval_sweep():
            if not sampling_sweeper:
                raise ConfigError(
                    f"{key}={o.input_line.split('=', 1)[1]}: Hydra's basic sweeper takes lists, "
                    "choice() and range(); interval() needs a sampling sweeper, such as "
                    "Optuna's (pip install -e '.[sweep]', hydra/sweeper=purerl_optuna)")
            values = [str(o.value().start), str(o.value().end)]
        elif o.is_sweep_override():
            values = list(o.sweep_string_iterator())
        else:
            values = [o.get_value_element_as_str()]
        choices.append([f"{key}={v}" for v in values])
    variants = [[c[0] for c in choices]]
    for i, c in enumerate(choices):
        variants += [[*variants[0][:i], v, *variants[0][i + 1:]] for v in c[1:]]
    return variants


def _explain(error: Exception) -> str:
    """One line for a Hydra / OmegaConf composition error."""
    chain = [error]
    while (chain[-1].__cause__ or chain[-1].__context__) is not None and len(chain) < 10:
        chain.append(chain[-1].__cause__ or chain[-1].__context__)
    for e in chain:
        if isinstance(e, (ConfigKeyError, ConfigAttributeError)) and getattr(e, "full_key", None):
            return _unknown_setting(e.full_key)
        if isinstance(e, ValidationError) and getattr(e, "full_key", None):
            reason = str(e.msg).splitlines()[0] if getattr(e, "msg", None) else str(e)
            hint = " (write integers like 10_000_000)" if "Integer" in reason else ""
            return f"{e.full_key}={e.value!r}: {reason}{hint}"
    return " ".join(str(error).split())


def _unknown_setting(key: str) -> str:
    close = difflib.get_close_matches(key, _schema_keys(), n=1, cutoff=0.6)
    return f"unknown setting {key}" + (f" (did you mean {close[0]}?)" if close else "")


def _dotted_keys(node, prefix: str = "") -> List[str]:
    if not isinstance(node, DictConfig):
        return [prefix[:-1]]
    return [k for key in node for k in _dotted_keys(node[key], f"{prefix}{key}.")]


def load_config(cfg: DictConfig, num_devices: Optional[int] = None) -> Config:
    """The validated `Config` of a composed Hydra config; `num_devices=None` leaves out the
    checks that need the device count (see `validate`).

    Args:
        cfg: the composed config.
        num_devices: the devices the run will see, or None.

    Returns:
        The `Config`.

    Raises:
        ConfigError: an unknown key (other than `hydra.*` and those of `OPEN_SECTIONS`), a
            value of the wrong type, or a setting `validate` refuses.
    """
    known = set(_schema_keys())
    for key in _dotted_keys(cfg):
        if key not in known and not key.startswith(("hydra.", *OPEN_SECTIONS)):
            raise ConfigError(_unknown_setting(key))
    try:
        config = OmegaConf.to_object(cfg)
    except OmegaConfBaseException as error:
        raise ConfigError(_explain(error)) from None
    return validate(config, num_devices)


def normalize_argv(argv: List[str]) -> List[str]:
    """The overrides of settings whose keys are not in the schema, made so for Hydra: an env's
    params (`env.params.<field>=v`) and an algorithm's own settings (`algorithm.<key>=v`,
    `sweep.algorithm.<name>=[...]`) become `++<key>=v`, which adds or overrides them; and
    `algorithm=pkg.module:make_fn`, the short spelling, becomes `++algorithm.name=...`.

    Args:
        argv: the command line's overrides.

    Returns:
        The overrides, those rewritten.
    """
    def normalized(arg: str) -> str:
        if arg.startswith("algorithm="):
            return "++algorithm.name=" + arg[len("algorithm="):]
        if arg.startswith(OPEN_SECTIONS):
            return "++" + arg
        return arg

    return [normalized(a) for a in argv]


def _check_compile_cache(configs: List[Config]) -> None:
    """One process runs all the jobs of a sweep, and JAX sets its cache up once: they must
    share it, and it must be a directory; raises ConfigError."""
    settings = sorted({str(c.compile_cache) for c in configs})
    if len(settings) > 1:
        raise ConfigError(f"compile_cache={','.join(settings)}: the jobs of a sweep run in one "
                          "process and share one compile cache; sweep other settings")
    directory = compile_cache_dir(configs[0].compile_cache)
    if directory is not None and directory.exists() and not directory.is_dir():
        raise ConfigError(f"compile_cache={configs[0].compile_cache}: {directory} is a file, "
                          "not a directory")


def _check_output_dir(overrides, multirun: bool) -> None:
    """Raises `WriteError` when the run directory (`hydra.run.dir`, or a sweep's
    `hydra.sweep.dir`; default: under the working directory) cannot be written: a file made
    and removed in it, or in its nearest existing parent, before Hydra writes its own files
    there (Hydra's failure would be a traceback)."""
    key = "hydra.sweep.dir" if multirun else "hydra.run.dir"
    given = [str(o.value()) for o in overrides if o.key_or_group == key]
    target = Path(given[-1].split("${")[0]) if given else Path.cwd()
    existing = next(p for p in [target, *target.absolute().parents] if p.exists())
    if not existing.is_dir():
        raise WriteError(target, f"{existing} is a file, not a directory")
    with writing(target):
        with tempfile.TemporaryFile(dir=existing):
            pass


def compose_jobs(argv: List[str]) -> List[Config]:
    """The validated `Config` of every job that the command line `argv` asks for (a sweep's
    each), without importing JAX or touching any file; raises ConfigError.

    Args:
        argv: `python -m purerl.train`'s arguments, without Hydra's `-`-flags but `-m`.

    Returns:
        One `Config` per job, in the order Hydra runs them (a sampling sweeper's: one).
    """
    return _compose(_parse_overrides(argv))


def _parse_overrides(argv: List[str]) -> list:
    """The Hydra overrides of `argv` (its `-`-flags left out); raises ConfigError."""
    args = [a for a in normalize_argv(argv) if not a.startswith("-")]
    try:
        return OverridesParser.create().parse_overrides(args)
    except HydraException as error:
        raise ConfigError(_explain(error)) from None


def _compose(overrides) -> List[Config]:
    """`compose_jobs` of the parsed `overrides`."""
    _check_env_override(overrides)
    _check_hydra_plugins(overrides)
    job_overrides = [o for o in overrides if not o.key_or_group.startswith("hydra")]
    sampling_sweeper = any(o.key_or_group == "hydra/sweeper" and o.value() != "basic"
                           for o in overrides)

    configs = []
    with initialize_config_dir(str(config_dir()), version_base="1.3"):
        for variant in _override_variants(job_overrides, sampling_sweeper):
            try:
                cfg = compose("config", overrides=variant)
            except (HydraException, OmegaConfBaseException) as error:
                raise ConfigError(_explain(error)) from None
            configs.append(load_config(cfg))
            if configs[-1].log.wandb and importlib.util.find_spec("wandb") is None:
                raise ConfigError("log.wandb=true but wandb is not installed: pip install wandb, "
                                  "or leave log.wandb=false")
    _check_compile_cache(configs)
    _check_distributed(configs)
    return configs


def preflight(argv: List[str]) -> None:
    """Composes and validates every job the command line asks for (`compose_jobs`); raises
    ConfigError, or WriteError when the run directory cannot be written.

    Every setting is checked before JAX is imported; then JAX's compile cache is set up and the
    checks that need JAX follow: the device count, the environments (gymnax) and the
    `pkg.module:name` settings (networks, loss terms, an algorithm, events).

    Arguments starting with "-" other than `-m` / `--multirun` (`--help`, `--cfg`, ...) leave
    everything to Hydra: nothing is checked.

    Args:
        argv: the command line's arguments after `python -m purerl.train`.
    """
    if any(a.startswith("-") and a not in ("-m", "--multirun") for a in argv):
        return  # --help, --cfg, --info ...: Hydra's own business
    overrides = _parse_overrides(argv)
    configs = _compose(overrides)
    _check_output_dir(overrides, multirun=any(a in ("-m", "--multirun") for a in argv))
    split_members_over_cores(configs)

    # JAX (0.5 s) only once every setting is checked; the processes join before gymnax
    import jax

    use_compile_cache(configs[0].compile_cache)
    join_processes(configs[0])
    for config in configs:
        check_devices(config, jax.device_count())
    # gymnax, flax and the agent (0.5 s more): after the device count is checked
    from purerl.algos.ppo import make_ppo
    from purerl.envs import make_env
    from purerl.nets.agent import make_agent
    from purerl.plugins import load_callable
    from purerl.runs.runner import load_events

    for config in configs:  # the env's spaces, the network against its observations
        make_agent(config.env, config.network, *make_env(config.env), marl=config.marl)
        for name in config.ppo.loss_terms:
            load_callable("ppo.loss_terms", name)
        check_algorithm_settings(config, make_ppo if config.algorithm_name is None
                                 else load_callable("algorithm", config.algorithm_name))
        load_events(config.events)


def _check_distributed(configs: List[Config]) -> None:
    """The jobs of a sweep run in one process, which joins a multi-host run once: they must
    share the `distributed` settings; raises ConfigError."""
    settings = {repr(c.distributed) for c in configs}
    if len(settings) > 1:
        raise ConfigError("distributed.* differs between the jobs of a sweep, which run in one "
                          "process and join the other processes once; sweep other settings")
