"""Validation of a `Config`: every setting and derived size, checked before JAX is imported
(`validate`), and the checks that need the device count (`check_devices`). Each failure is a
ConfigError with one line naming the setting and its value."""

from __future__ import annotations

import dataclasses
import importlib.util
import math
from typing import Any, Dict, NamedTuple, Optional

from purerl.config import (
    ACTIVATIONS,
    ALGORITHM_KEYS,
    ALGORITHM_PREFIX,
    CONV_PADDINGS,
    HYPERPARAMETER,
    LR_SCHEDULES,
    MARL_CRITICS,
    PRNG_IMPLS,
    RNN_CELLS,
    SCHEDULE_KINDS,
    SCHEDULED_HYPERPARAMS,
    SUITES,
    SWEEPABLE,
    Config,
    ConfigError,
    DistributedConfig,
    EnvConfig,
    NetworkConfig,
    ScheduleConfig,
    SweepConfig,
    env_devices,
    number_problem,
)
from purerl.plan import PLAN_SETTINGS


def validate(config: Config, num_devices: Optional[int] = 1) -> Config:
    """Checks every setting of `config` and the sizes derived from it, without importing JAX.

    Args:
        config: the settings to check.
        num_devices: the devices the run is mapped over: the envs, and each device's share of
            the batch, must divide over those its members' envs are split over. None leaves
            out the checks that need the device count (`check_devices`), so that the command
            line checks everything else before it imports JAX.

    Returns:
        `config` itself, unchanged.

    Raises:
        ConfigError: the first setting that does not fit, in one line naming it and its value.
    """
    _validate_run(config)
    _validate_env(config.env)
    _validate_ppo(config)
    _validate_outputs(config)
    _validate_network(config.network)
    _validate_marl(config)
    _validate_import_paths(config)
    if num_devices is not None:
        check_devices(config, num_devices)
    return config


def _validate_run(config: Config) -> None:
    """The env's name, the seeds, devices, plan, chunk length, PRNG and log interval."""
    env = config.env
    if not env.name:
        raise ConfigError("env.name is empty: pass +env=<preset>, or +env=gymnax "
                          "env.name=<gymnax id or module:attr>")
    if env.name.partition("/")[0] in SUITES:
        check_suite(env.name)
    _positive("num_seeds", config.num_seeds)
    if config.cpu_devices < 0:
        raise ConfigError(f"cpu_devices={config.cpu_devices} must be >= 0 (0: one per core, as "
                          "many as divide the members evenly)")
    if config.plan not in PLAN_SETTINGS:
        raise ConfigError(f"plan={config.plan!r} is not one of {', '.join(PLAN_SETTINGS)}")
    if not (math.isfinite(config.chunk_s) and config.chunk_s > 0):
        raise ConfigError(f"chunk_s={config.chunk_s} must be > 0 seconds")
    if config.prng_impl not in PRNG_IMPLS:
        raise ConfigError(f"prng_impl={config.prng_impl!r} is not one of {', '.join(PRNG_IMPLS)}")
    _positive("log_every", config.log_every)


def _validate_env(env: EnvConfig) -> None:
    """The `env` settings' sizes and clips."""
    _positive("env.num_envs", env.num_envs)
    _positive("env.frame_stack", env.frame_stack)
    if not 0 <= env.reset_pool < env.num_envs:
        raise ConfigError(f"env.reset_pool={env.reset_pool} must be >= 0 and smaller than "
                          f"env.num_envs={env.num_envs} (0: every env draws its own reset)")
    for key in ("clip_obs", "clip_reward"):
        if not getattr(env, key) > 0:
            raise ConfigError(f"env.{key}={getattr(env, key)} must be > 0")
    if not env.reward_shaping_horizon >= 0:
        raise ConfigError(f"env.reward_shaping_horizon={env.reward_shaping_horizon} must be >= 0 "
                          "env steps (0: no shaped reward)")


def _validate_ppo(config: Config) -> None:
    """The `ppo` settings: the batch's sizes, the hyperparameters' ranges, sweep, PBT and
    schedules."""
    env, ppo = config.env, config.ppo
    for key in ("num_steps", "num_epochs", "num_minibatches"):
        _positive(f"ppo.{key}", getattr(ppo, key))
    _check_minibatches(config, env.num_envs, num_devices=1)
    if config.total_timesteps < config.batch_size:
        raise ConfigError(
            f"total_timesteps={config.total_timesteps} is smaller than one update: "
            f"env.num_envs * ppo.num_steps = {env.num_envs} * {ppo.num_steps} = {config.batch_size}"
        )
    for name in SWEEPABLE:
        value = getattr(ppo, name)
        if value is not None and not _in_range(name, value):
            raise ConfigError(f"ppo.{name}={value} must be {HYPERPARAM_RANGES[name][0]}"
                              + (", or null to turn it off" if name == "target_kl" else ""))
    _validate_sweep(config.sweep)
    _validate_pbt(config)
    if ppo.anneal_lr and ppo.schedule.lr.kind != "constant" and ppo.lr_schedule is None:
        raise ConfigError(
            f"ppo.anneal_lr=true and ppo.schedule.lr.kind={ppo.schedule.lr.kind} both set the lr "
            "schedule: use one"
        )
    _validate_lr_schedule(ppo)
    for name in SCHEDULED_HYPERPARAMS:
        _validate_schedule(f"ppo.schedule.{name}", config.schedule(name))
    _validate_algorithm_schedules(config.algorithm.get("schedule"))


def _validate_lr_schedule(ppo) -> None:
    """`ppo.lr_schedule` and the KL-adaptive rate's settings."""
    if ppo.lr_schedule is None:
        return
    if ppo.lr_schedule not in LR_SCHEDULES:
        raise ConfigError(f"ppo.lr_schedule={ppo.lr_schedule!r} is not one of "
                          f"{', '.join(LR_SCHEDULES)} (or null: ppo.schedule.lr)")
    if ppo.schedule.lr.kind != "constant":
        raise ConfigError(f"ppo.lr_schedule={ppo.lr_schedule} and ppo.schedule.lr.kind="
                          f"{ppo.schedule.lr.kind} both set the lr: use one")
    if not (math.isfinite(ppo.desired_kl) and ppo.desired_kl > 0):
        raise ConfigError(f"ppo.desired_kl={ppo.desired_kl} must be > 0")
    if not 0 < ppo.lr_min <= ppo.lr_max:
        raise ConfigError(f"ppo.lr_min={ppo.lr_min} and ppo.lr_max={ppo.lr_max} must be "
                          "0 < lr_min <= lr_max")


def _validate_algorithm_schedules(schedules: Any) -> None:
    """`algorithm.schedule.<name>.<field>`: each a schedule of `ScheduleConfig`'s fields."""
    if schedules is None:
        return
    fields = [f.name for f in dataclasses.fields(ScheduleConfig)]
    if not isinstance(schedules, dict) or not all(isinstance(s, dict)
                                                  for s in schedules.values()):
        raise ConfigError(f"algorithm.schedule={schedules!r} must give each hyperparameter's "
                          f"schedule by field: algorithm.schedule.<name>.kind=linear")
    for name, schedule in schedules.items():
        unknown = sorted(set(schedule) - set(fields))
        if unknown:
            raise ConfigError(f"algorithm.schedule.{name}.{unknown[0]}: a schedule has no field "
                              f"{unknown[0]!r} (fields: {', '.join(fields)})")
        try:
            checked = ScheduleConfig(**schedule)
            _validate_schedule(f"algorithm.schedule.{name}", checked)
        except TypeError:
            raise ConfigError(f"algorithm.schedule.{name}={schedule!r} has a value of the "
                              "wrong type") from None


def _validate_outputs(config: Config) -> None:
    """Evaluation, checkpoints, `stop_at_return`, `distributed` and the compile cache."""
    _validate_eval_and_checkpoint(config)
    if config.stop_at_return is not None and not math.isfinite(config.stop_at_return):
        raise ConfigError(f"stop_at_return={config.stop_at_return} must be a finite return, or "
                          "null to train all total_timesteps")
    _validate_distributed(config.distributed)
    if config.compile_cache is not None and not config.compile_cache.strip():
        raise ConfigError(f"compile_cache={config.compile_cache!r} is empty: give a directory, "
                          "auto (the default) or null (no cache)")


def _validate_marl(config: Config) -> None:
    """The `marl` settings: the critic, and what a central one needs of the network."""
    critic, net = config.marl.critic, config.network
    if critic not in MARL_CRITICS:
        raise ConfigError(f"marl.critic={critic!r} is not one of {', '.join(MARL_CRITICS)}")
    if critic == "central" and (net.shared or net.conv_channels or net.vocab_size):
        raise ConfigError("marl.critic=central gives the value tower the global state: it needs "
                          "two MLP towers (network.shared=false, no conv_channels or vocab_size)")
    if critic == "central" and config.env.frame_stack > 1:
        raise ConfigError(f"marl.critic=central and env.frame_stack={config.env.frame_stack}: "
                          "the global state is not stacked; use network=gru for memory")


def _validate_network(net: NetworkConfig) -> None:
    """The `network` settings: the MLP, convolutions, embedding, memory and factory."""
    if not net.hidden_sizes or any(size <= 0 for size in net.hidden_sizes):
        raise ConfigError(f"network.hidden_sizes={list(net.hidden_sizes)} must be positive sizes")
    if net.activation not in ACTIVATIONS:
        raise ConfigError(
            f"network.activation={net.activation!r} is not one of {', '.join(ACTIVATIONS)}"
        )
    for key in ("conv_kernels", "conv_strides", "conv_padding"):
        entries, layers = len(getattr(net, key)), len(net.conv_channels)
        if entries != layers:
            raise ConfigError(f"network.{key} has {entries} entries, network.conv_channels "
                              f"{layers}: one per convolution")
    for key in ("conv_channels", "conv_kernels", "conv_strides"):
        if any(value <= 0 for value in getattr(net, key)):
            raise ConfigError(f"network.{key}={list(getattr(net, key))} must be positive")
    if any(padding not in CONV_PADDINGS for padding in net.conv_padding):
        raise ConfigError(f"network.conv_padding={list(net.conv_padding)}: each entry must be "
                          f"one of {', '.join(CONV_PADDINGS)}")
    _positive("network.embed_dim", net.embed_dim)
    if net.vocab_size < 0 or net.vocab_size == 1:
        raise ConfigError(f"network.vocab_size={net.vocab_size} must be 0 (off) or >= 2")
    if net.vocab_size and net.conv_channels:
        raise ConfigError("network.vocab_size and network.conv_channels cannot both be set")
    if net.rnn is not None and net.rnn not in RNN_CELLS:
        raise ConfigError(f"network.rnn={net.rnn!r} is not one of {', '.join(RNN_CELLS)} "
                          "(or null: no memory)")
    _positive("network.rnn_size", net.rnn_size)
    if net.factory is not None and not is_import_path(net.factory):
        raise ConfigError(f"network.factory={net.factory!r} must name a function as "
                          "pkg.module:function")


def _validate_import_paths(config: Config) -> None:
    """The `pkg.module:name` settings: the algorithm, loss terms and events."""
    name = config.algorithm_name
    if name is not None and not is_import_path(name):
        raise ConfigError(f"algorithm={name!r} must name a function as pkg.module:function")
    for term in config.ppo.loss_terms:
        if not is_import_path(term):
            raise ConfigError(f"ppo.loss_terms: {term!r} must name a function as "
                              "pkg.module:function")
    for event in config.events:
        if not is_import_path(event):
            raise ConfigError(f"events: {event!r} must name an Event class as pkg.module:Class")


def check_devices(config: Config, num_devices: int) -> None:
    """The checks of `validate` that need the device count: the envs, and each device's share
    of the batch, must divide evenly over the devices the envs are split over; raises
    ConfigError.

    Args:
        config: the run's config.
        num_devices: the devices the run will see.

    Raises:
        ConfigError: `env.num_envs` or a device's minibatches do not divide evenly.
    """
    num_devices = env_devices(config.num_members, num_devices)
    num_envs = config.env.num_envs
    if num_envs % num_devices:
        raise ConfigError(
            f"env.num_envs={num_envs} is not divisible by the number of devices ({num_devices})")
    _check_minibatches(config, num_envs // num_devices, num_devices)


def _check_minibatches(config: Config, local_envs: int, num_devices: int) -> None:
    """Each device's batch, of `local_envs` envs, must divide into the minibatches: its
    transitions, or with a recurrent policy (whose minibatches are whole env sequences) its
    envs."""
    env, ppo = config.env, config.ppo
    per_device = f" ({local_envs} per device)" if num_devices > 1 else ""
    if config.network.rnn is not None:
        if local_envs % ppo.num_minibatches:
            raise ConfigError(
                f"env.num_envs={env.num_envs}{per_device} is not divisible by "
                f"ppo.num_minibatches={ppo.num_minibatches}: a recurrent policy's minibatches "
                "are groups of whole envs")
        return
    local_batch = local_envs * ppo.num_steps
    if local_batch % ppo.num_minibatches:
        raise ConfigError(
            f"env.num_envs * ppo.num_steps = {env.num_envs} * {ppo.num_steps} = {config.batch_size}"
            + (f" ({local_batch} per device)" if num_devices > 1 else "")
            + f" is not divisible by ppo.num_minibatches={ppo.num_minibatches}"
        )


def _validate_eval_and_checkpoint(config: Config) -> None:
    evaluation, checkpoint = config.eval, config.checkpoint
    for key, value in (("eval.every", evaluation.every), ("checkpoint.every", checkpoint.every)):
        if value < 0:
            raise ConfigError(f"{key}={value} must be >= 0 (0: only at the end)")
    _positive("eval.num_episodes", evaluation.num_episodes)
    if evaluation.max_steps is not None:
        _positive("eval.max_steps", evaluation.max_steps)
    if not evaluation.temperatures or any(not t >= 0 for t in evaluation.temperatures):
        raise ConfigError(
            f"eval.temperatures={list(evaluation.temperatures)} must be a non-empty list of "
            "values >= 0 (0.0: the greedy action)")
    if len(set(map(float, evaluation.temperatures))) < len(evaluation.temperatures):
        raise ConfigError(f"eval.temperatures={list(evaluation.temperatures)} has a repeated value")
    if not checkpoint.every_s >= 0:
        raise ConfigError(f"checkpoint.every_s={checkpoint.every_s} must be >= 0 (0: off)")
    _positive("checkpoint.keep", checkpoint.keep)
    if config.resume not in (False, True, "auto"):
        raise ConfigError(f"resume={config.resume!r} must be true, false or auto")
    if config.resume and config.init_from:
        raise ConfigError(f"resume={str(config.resume).lower()} and init_from are exclusive: a "
                          "resumed run already has its params")


def _validate_distributed(dist: DistributedConfig) -> None:
    _positive("distributed.heartbeat_timeout_s", dist.heartbeat_timeout_s)
    if dist.num_processes is not None:
        _positive("distributed.num_processes", dist.num_processes)
    if dist.process_id is not None and (
            dist.process_id < 0
            or (dist.num_processes is not None and dist.process_id >= dist.num_processes)):
        raise ConfigError(f"distributed.process_id={dist.process_id} must be in "
                          f"[0, distributed.num_processes={dist.num_processes})")
    if dist.coordinator is not None and (
            ":" not in dist.coordinator or not dist.coordinator.rsplit(":", 1)[1].isdigit()):
        raise ConfigError(f"distributed.coordinator={dist.coordinator!r} must be host:port")
    if not dist.enabled and (dist.coordinator, dist.num_processes, dist.process_id) != (
            None, None, None):
        raise ConfigError("distributed.coordinator, num_processes or process_id is set but "
                          "distributed.enabled=false: pass distributed.enabled=true")


# Each sweepable hyperparameter's valid values: (what they must be, the test).
HYPERPARAM_RANGES = {
    "lr": ("> 0", lambda v: v > 0),
    "gamma": ("in [0, 1]", lambda v: 0.0 <= v <= 1.0),
    "gae_lambda": ("in [0, 1]", lambda v: 0.0 <= v <= 1.0),
    "clip_eps": ("> 0", lambda v: v > 0),
    "ent_coef": (">= 0", lambda v: v >= 0),
    "vf_coef": (">= 0", lambda v: v >= 0),
    "max_grad_norm": ("> 0", lambda v: v > 0),
    "target_kl": ("> 0", lambda v: v > 0),
}


def _in_range(name: str, value: float) -> bool:
    """Whether `value` fits hyperparameter `name`: PPO's by `HYPERPARAM_RANGES`, an
    algorithm's own (`algorithm.<name>`) when finite (its settings check the rest)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        return False
    return name.startswith(ALGORITHM_PREFIX) or HYPERPARAM_RANGES[name][1](value)


def _range_of(name: str) -> str:
    return "a finite number" if name.startswith(ALGORITHM_PREFIX) else HYPERPARAM_RANGES[name][0]


def _validate_sweep(sweep: SweepConfig) -> None:
    for name, values in sweep.swept().items():
        if not values:
            raise ConfigError(f"sweep.{name}=[] is empty: give at least one value, or leave it "
                              "out")
        bad = [v for v in values if not _in_range(name, v)]
        if bad:
            raise ConfigError(f"sweep.{name}={values}: {bad[0]} is out of range, each value "
                              f"must be {_range_of(name)}")
        if len(set(values)) < len(values):
            raise ConfigError(f"sweep.{name}={values} has a repeated value")


def _validate_pbt(config: Config) -> None:
    pbt = config.pbt
    if pbt.every < 0:
        raise ConfigError(f"pbt.every={pbt.every} must be >= 0 (0: off)")
    if not 0.0 < pbt.fraction <= 0.5:
        raise ConfigError(f"pbt.fraction={pbt.fraction} must be in (0, 0.5]")
    if not pbt.perturb or any(not (math.isfinite(f) and f > 0) for f in pbt.perturb):
        raise ConfigError(f"pbt.perturb={list(pbt.perturb)} must be a non-empty list of "
                          "factors > 0")
    unknown = [name for name in pbt.evolving(config.sweep)
               if name not in SWEEPABLE and not name.startswith(ALGORITHM_PREFIX)]
    if unknown:
        raise ConfigError(f"pbt.hparams: {unknown[0]} is not one of {', '.join(SWEEPABLE)}, "
                          "or algorithm.<name>, an algorithm's own hyperparameter")
    if pbt.every == 0:
        return
    if "target_kl" in pbt.evolving(config.sweep) and (
            config.ppo.target_kl is None and config.sweep.target_kl is None):
        raise ConfigError("pbt.hparams has target_kl, but target-KL stopping is off: set "
                          "ppo.target_kl or sweep.target_kl")
    replaced = int(pbt.fraction * config.num_members)
    if replaced < 1:
        raise ConfigError(f"pbt.fraction={pbt.fraction} of {config.num_members} member(s) "
                          "replaces none: give more seeds or grid points, or a larger fraction")
    if pbt.every >= config.num_updates:
        raise ConfigError(f"pbt.every={pbt.every} is not below the run's {config.num_updates} "
                          "updates: no generation would happen")


def check_suite(name: str) -> tuple:
    """`<suite>/<id>` -> (its Suite, the id); raises ConfigError for an empty id or a suite
    that is not installed (checked without importing it, before JAX starts).

    Args:
        name: the `env.name` setting, its prefix a suite of `SUITES`.

    Returns:
        `(Suite, env_id)`.

    Raises:
        ConfigError: no id after the "/", or the suite's package is not installed.
    """
    prefix, _, env_id = name.partition("/")
    suite = SUITES[prefix]
    if not env_id:
        raise ConfigError(f"env.name={name!r} names no env of {prefix}: write {prefix}/<id>")
    if importlib.util.find_spec(suite.package) is None:
        raise ConfigError(
            f"env.name={name!r} needs {prefix}, which is not installed: "
            f"pip install -e \".[{suite.extra}]\"")
    return suite, env_id


def is_import_path(name: str) -> bool:
    """Whether `name` reads `pkg.module:attr`.

    Args:
        name: a setting's value.

    Returns:
        True when the module's dotted parts and the attribute are identifiers.
    """
    module, _, attr = name.partition(":")
    return all(part.isidentifier() for part in module.split(".")) and attr.isidentifier()


def _positive(key: str, value: int) -> None:
    if value <= 0:
        raise ConfigError(f"{key}={value} must be > 0")


def _validate_schedule(key: str, schedule: ScheduleConfig) -> None:
    if schedule.kind not in SCHEDULE_KINDS:
        raise ConfigError(f"{key}.kind={schedule.kind!r} is not one of {', '.join(SCHEDULE_KINDS)}")
    if not 0.0 < schedule.fraction <= 1.0:
        raise ConfigError(f"{key}.fraction={schedule.fraction} must be in (0, 1]")
    if schedule.kind == "exponential" and not schedule.end > 0:
        raise ConfigError(f"{key}.end={schedule.end} must be > 0 for an exponential schedule")
    if schedule.kind == "piecewise":
        bounds, values = list(schedule.boundaries), list(schedule.values)
        if len(values) != len(bounds) + 1:
            raise ConfigError(
                f"{key}: piecewise needs one more value than boundaries, got "
                f"{len(values)} values and {len(bounds)} boundaries"
            )
        if any(not 0.0 < b < 1.0 for b in bounds) or bounds != sorted(bounds):
            raise ConfigError(f"{key}.boundaries={bounds} must increase within (0, 1)")
    if not all(math.isfinite(v) for v in [schedule.end, *schedule.values]):
        raise ConfigError(f"{key} has a non-finite multiplier")


class AlgorithmSettings(NamedTuple):
    """An algorithm's own settings, checked (`check_algorithm_settings`).

    Attributes:
        settings: an instance of the dataclass that `make_fn.settings` declares, from the
            `algorithm.<key>` settings and its defaults, its hyperparameters None (their
            values are arrays: `hparams.extra[name]`); None when it declares none.
        hyperparams: the base values of its hyperparameters (`purerl.hyperparameter`) by
            name, in the dataclass's order.
    """

    settings: Any
    hyperparams: Dict[str, float]


def check_algorithm_settings(config: Config, make_fn: Any) -> AlgorithmSettings:
    """Checks the `algorithm.<key>` settings against those that `make_fn.settings` declares
    (a dataclass type; each key one of its fields, the value fitting the field's default),
    and that every `sweep.algorithm.<name>` and `algorithm.<name>` of `pbt.hparams` is one of
    its hyperparameters.

    Args:
        config: the run's settings.
        make_fn: the algorithm's factory (`purerl.algos.algorithm.MakeAlgorithm`); None for PPO,
            which declares no settings of this section (its own are `ppo.*`).

    Returns:
        The checked `AlgorithmSettings`.

    Raises:
        ConfigError: a key the algorithm does not declare, a value that does not fit, or the
            settings' own check (their `__post_init__`) failed.
    """
    name = config.algorithm_name or "PPO"
    declared = getattr(make_fn, "settings", None)
    if declared is not None and not (isinstance(declared, type)
                                     and dataclasses.is_dataclass(declared)):
        raise ConfigError(f"algorithm={name}: its settings attribute must be a dataclass "
                          f"type, not {type(declared).__name__}")
    fields = {f.name: f for f in dataclasses.fields(declared)} if declared else {}
    reserved = [key for key in fields if key in ALGORITHM_KEYS]
    if reserved:
        raise ConfigError(f"algorithm={name}: its settings may not have a field {reserved[0]!r} "
                          f"(algorithm.{reserved[0]} is purerl's)")
    hyper = [key for key, f in fields.items() if f.metadata.get(HYPERPARAMETER)]
    given = {}
    for key, value in config.algorithm_settings.items():
        if key not in fields:
            raise ConfigError(f"algorithm.{key}: {name} has no setting {key!r} (its settings: "
                              f"{', '.join(fields) or 'none'})")
        given[key] = _checked_own_setting(key, value, fields[key].default, key in hyper)
    evolving = config.pbt.evolving(config.sweep) if config.pbt.every else []
    named = [(f"sweep.algorithm.{key}", key) for key in config.sweep.algorithm]
    named += [(f"pbt.hparams: {n}", n[len(ALGORITHM_PREFIX):]) for n in evolving
              if n.startswith(ALGORITHM_PREFIX)]
    named += [(f"algorithm.schedule.{key}", key) for key in config.algorithm.get("schedule") or {}]
    for setting, key in named:
        if key not in hyper:
            raise ConfigError(f"{setting}: {key!r} is not a hyperparameter of {name} (its "
                              f"hyperparameters: {', '.join(hyper) or 'none'})")
    if declared is None:
        return AlgorithmSettings(None, {})
    values = {key: f.default for key, f in fields.items()
              if f.default is not dataclasses.MISSING}
    values.update(given)
    try:
        settings = declared(**values)
    except Exception as error:
        raise ConfigError(f"algorithm={name}: its settings "
                          f"{' '.join(str(error).split())}") from None
    hyperparams = {key: float(getattr(settings, key)) for key in hyper}
    return AlgorithmSettings(dataclasses.replace(settings, **{key: None for key in hyper}),
                             hyperparams)


def _checked_own_setting(key: str, value: Any, default: Any, hyperparameter: bool) -> Any:
    """One `algorithm.<key>` value checked against its field: a hyperparameter's a finite
    number, a number field's one that fits its default (`number_problem`); a float field's
    as a float."""
    if hyperparameter:
        if not _in_range(ALGORITHM_PREFIX + key, value):
            raise ConfigError(f"algorithm.{key}={value!r} must be a finite number")
        return float(value)
    kind = {bool: "b", int: "i", float: "f"}.get(type(default))
    problem = number_problem(value, kind, default) if kind else ""
    if problem:
        raise ConfigError(f"algorithm.{key}={value!r} must be {problem} (default: {default})")
    return float(value) if kind == "f" else value
