"""The typed configuration schema, its validation, and the sizes derived from it.

The dataclasses are plain (not frozen) so that Hydra can merge them as structured configs;
after `validate` nothing mutates a `Config`. Derived sizes are properties, never written back.
"""

from __future__ import annotations

import importlib.util
import itertools
import math
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, NamedTuple, Optional

SCHEDULED_HYPERPARAMS = ("lr", "ent_coef", "clip_eps", "vf_coef", "gamma", "gae_lambda")
SCHEDULE_KINDS = ("constant", "linear", "cosine", "exponential", "piecewise")
PRNG_IMPLS = ("threefry2x32", "rbg", "unsafe_rbg")
ACTIVATIONS = ("tanh", "relu", "gelu", "swish", "silu", "elu", "leaky_relu", "sigmoid", "softplus")
CONV_PADDINGS = ("SAME", "VALID")
RNN_CELLS = ("gru", "lstm")
# The hyperparameters a sweep may vary inside one program (arrays in it, not shapes).
SWEEPABLE = ("lr", "gamma", "gae_lambda", "clip_eps", "ent_coef", "vf_coef", "max_grad_norm",
             "target_kl")


class Suite(NamedTuple):
    """An env suite beyond gymnax: `env.name=<prefix>/<id>` (`purerl.envs.suites`)."""

    module: str  # the adapter module under purerl.envs.suites
    package: str  # the suite's importable package
    extra: str  # pyproject's optional extra that installs it


SUITES = {
    "brax": Suite("brax", "brax", "brax"),
    "playground": Suite("playground", "mujoco_playground", "playground"),
    "jumanji": Suite("jumanji", "jumanji", "jumanji"),
    "xminigrid": Suite("xminigrid", "xminigrid", "xminigrid"),
    "craftax": Suite("craftax", "craftax", "craftax"),
    "navix": Suite("navix", "navix", "navix"),
    "pgx": Suite("pgx", "pgx", "pgx"),
}


class ConfigError(ValueError):
    """A setting is invalid; the message is one line naming the setting and the numbers."""


@dataclass
class ScheduleConfig:
    """How one hyperparameter moves over the run, as a multiple of its base value.

    `progress` is update / num_updates in [0, 1); `fraction` stretches or shortens the move.
    """

    kind: str = "constant"  # constant | linear | cosine | exponential | piecewise
    end: float = 0.0  # linear, cosine, exponential: multiplier reached at the end
    fraction: float = 1.0  # share of the run over which linear/cosine/exponential move, then hold
    boundaries: List[float] = field(default_factory=list)  # piecewise: increasing run fractions
    values: List[float] = field(default_factory=list)  # piecewise: multipliers, one more than boundaries


@dataclass
class SchedulesConfig:
    """The controller: one schedule per scheduled hyperparameter."""

    lr: ScheduleConfig = field(default_factory=ScheduleConfig)
    ent_coef: ScheduleConfig = field(default_factory=ScheduleConfig)
    clip_eps: ScheduleConfig = field(default_factory=ScheduleConfig)
    vf_coef: ScheduleConfig = field(default_factory=ScheduleConfig)
    gamma: ScheduleConfig = field(default_factory=ScheduleConfig)
    gae_lambda: ScheduleConfig = field(default_factory=ScheduleConfig)


@dataclass
class EnvConfig:
    # a gymnax id, "<suite>/<id>" of another suite (purerl.envs.suites), or "module:attr" (an
    # Environment subclass or a factory, or an env of one of those suites)
    name: str = ""
    backend: str = ""  # a suite's simulation backend (brax: its pipeline); "": the suite's default
    num_envs: int = 4  # parallel environments per seed, split across devices
    params: Dict[str, Any] = field(default_factory=dict)  # overrides of the env params' fields
    frame_stack: int = 1  # the policy sees the last this many observations
    normalize_obs: bool = False  # standardize observations by their running mean and variance
    clip_obs: float = 10.0  # normalized observations are clipped to [-clip_obs, clip_obs]
    normalize_reward: bool = False  # divide rewards by the running std of the discounted return
    clip_reward: float = 10.0  # normalized rewards are clipped to [-clip_reward, clip_reward]
    # > 0: each rollout step makes this many fresh resets, and every env whose episode ends
    # starts from one of them at random ("optimistic" resets: for envs whose reset costs much,
    # such as Craftax's world generation); 0: each env draws its own reset
    reset_pool: int = 0


@dataclass
class PPOConfig:
    num_steps: int = 128  # rollout length T per env per update
    num_epochs: int = 4
    num_minibatches: int = 4
    lr: float = 2.5e-4
    anneal_lr: bool = True  # shorthand for schedule.lr = linear to 0
    gamma: float = 0.99
    gae_lambda: float = 0.95
    clip_eps: float = 0.2
    clip_value: bool = True
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    target_kl: Optional[float] = None  # stop an update's epochs once approx KL > 1.5 x target_kl
    schedule: SchedulesConfig = field(default_factory=SchedulesConfig)


@dataclass
class NetworkConfig:
    hidden_sizes: List[int] = field(default_factory=lambda: [64, 64])
    activation: str = "tanh"
    shared: bool = False  # true: one trunk with policy and value heads; false: two towers
    # A CNN torso (images) when non-empty: one entry per convolution in each of the four lists
    conv_channels: List[int] = field(default_factory=list)  # output channels
    conv_kernels: List[int] = field(default_factory=list)  # square kernel sizes
    conv_strides: List[int] = field(default_factory=list)  # strides
    conv_padding: List[str] = field(default_factory=list)  # SAME or VALID (CONV_PADDINGS)
    vocab_size: int = 0  # > 0: quantize each observation dimension into this many tokens
    embed_dim: int = 16  # width of each token's embedding
    rnn: Optional[str] = None  # a memory after the torso: gru | lstm (RNN_CELLS); null: none
    rnn_size: int = 128  # units of the recurrent cell


@dataclass
class EvalConfig:
    every: int = 0  # updates between evaluations; 0 = only at the end of the run
    num_episodes: int = 16  # episodes per temperature, played in parallel
    temperatures: List[float] = field(default_factory=lambda: [1.0, 0.0])  # 0.0: the mode
    max_steps: Optional[int] = None  # steps per episode at most; null: the env's episode limit


@dataclass
class CheckpointConfig:
    every: int = 0  # updates between checkpoints; 0 = only the final one (always written)
    keep: int = 3  # newest checkpoints kept
    best: bool = False  # also keep the checkpoint with the best eval return (first temperature)


@dataclass
class LogConfig:
    tensorboard: bool = True  # TensorBoard event files in the run directory
    wandb: bool = False  # Weights & Biases (needs `pip install wandb`)
    wandb_project: str = "purerl"
    progress: bool = True  # a console progress bar


@dataclass
class DistributedConfig:
    """Joining the processes of a run on several hosts (JAX's multi-controller runtime)."""

    enabled: bool = False  # call jax.distributed.initialize before touching any device
    coordinator: Optional[str] = None  # host:port of process 0; null: detected (TPU, SLURM, MPI)
    num_processes: Optional[int] = None  # null: detected
    process_id: Optional[int] = None  # this process's index; null: detected
    local_device_ids: Optional[List[int]] = None  # this process's devices; null: all
    heartbeat_timeout_s: int = 100  # a peer silent this long ends the run (JAX's heartbeat)


@dataclass
class SweepConfig:
    """Values of the PPO hyperparameters to train at once: the product of the given lists is
    the grid, and each grid point runs `num_seeds` seeds, all vmapped in one program."""

    lr: Optional[List[float]] = None
    gamma: Optional[List[float]] = None
    gae_lambda: Optional[List[float]] = None
    clip_eps: Optional[List[float]] = None
    ent_coef: Optional[List[float]] = None
    vf_coef: Optional[List[float]] = None
    max_grad_norm: Optional[List[float]] = None
    target_kl: Optional[List[float]] = None

    def swept(self) -> Dict[str, List[float]]:
        """The given lists, in SWEEPABLE order."""
        return {name: list(getattr(self, name)) for name in SWEEPABLE
                if getattr(self, name) is not None}

    def grid(self) -> List[Dict[str, float]]:
        """The grid points: one {name: value} per combination, the last name varying fastest;
        [{}] without a sweep."""
        swept = self.swept()
        return [dict(zip(swept, values)) for values in itertools.product(*swept.values())]


@dataclass
class PBTConfig:
    """Population-based training of the members inside the program: every `every` updates the
    worst `fraction` of them copy the params, optimizer state and hyperparameters of the best,
    each copied hyperparameter in `hparams` multiplied by one of `perturb` at random."""

    every: int = 0  # updates between generations; 0 = off
    fraction: float = 0.25  # share of the members replaced each generation
    perturb: List[float] = field(default_factory=lambda: [0.8, 1.25])
    hparams: Optional[List[str]] = None  # which evolve; null: those swept, else lr and ent_coef

    def evolving(self, sweep: SweepConfig) -> List[str]:
        """The hyperparameters that evolve."""
        if self.hparams is not None:
            return list(self.hparams)
        return list(sweep.swept()) or ["lr", "ent_coef"]


@dataclass
class Config:
    seed: int = 0
    num_seeds: int = 1  # independent seeds vmapped inside one compiled program
    total_timesteps: int = 500_000  # env steps per seed
    log_every: int = 1  # write metrics.jsonl every this many updates
    # The PRNG inside the run (the seed key is converted once): "threefry2x32" (JAX's default),
    # "rbg" or "unsafe_rbg". On CPU, threefry compiles to a small loop per random op, which
    # costs compile time and a few % of the run; unsafe_rbg is fastest, with weaker split().
    prng_impl: str = "unsafe_rbg"
    env: EnvConfig = field(default_factory=EnvConfig)
    ppo: PPOConfig = field(default_factory=PPOConfig)
    network: NetworkConfig = field(default_factory=NetworkConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    log: LogConfig = field(default_factory=LogConfig)
    distributed: DistributedConfig = field(default_factory=DistributedConfig)
    sweep: SweepConfig = field(default_factory=SweepConfig)
    pbt: PBTConfig = field(default_factory=PBTConfig)
    resume: bool = False  # continue the run in this run directory from its newest checkpoint
    init_from: Optional[str] = None  # a run directory whose final network params start this run
    init_member: Optional[int] = None  # which member of init_from; null: each seed its own, or
    # the best member of a sweep
    # JAX's persistent compilation cache: "auto" is $JAX_COMPILATION_CACHE_DIR if set, else
    # $XDG_CACHE_HOME/purerl/xla (~/.cache/purerl/xla); a directory; None turns it off.
    compile_cache: Optional[str] = "auto"
    # On a CPU, the devices (one per core, XLA's forced host devices) that the members (seeds,
    # sweep points) are split over by the command line: 0 is the most cores that divide the
    # members evenly; 1 keeps one device. Ignored when XLA_FLAGS forces a device count.
    cpu_devices: int = 0

    @property
    def num_members(self) -> int:
        """Runs trained at once in the program: sweep grid points x seeds (member m is grid
        point m // num_seeds with seed m % num_seeds)."""
        return len(self.sweep.grid()) * self.num_seeds

    @property
    def batch_size(self) -> int:
        """Transitions per seed per update, over all devices: num_envs * num_steps."""
        return self.env.num_envs * self.ppo.num_steps

    @property
    def minibatch_size(self) -> int:
        return self.batch_size // self.ppo.num_minibatches

    @property
    def num_updates(self) -> int:
        return self.total_timesteps // self.batch_size

    def schedule(self, name: str) -> ScheduleConfig:
        """The effective schedule of `name`, with `anneal_lr` resolved (nothing is written back)."""
        schedule = getattr(self.ppo.schedule, name)
        if name == "lr" and self.ppo.anneal_lr:
            return ScheduleConfig(kind="linear", end=0.0)
        return schedule


def env_devices(num_members: int, num_devices: int) -> int:
    """How many devices a run's envs are split over: none (1) when its members (seeds) split
    evenly over the `num_devices` devices (each device then trains members of its own, with no
    communication), else all of them (each member's envs split, gradients averaged)."""
    return 1 if num_members % num_devices == 0 else num_devices


def auto_cpu_devices(members: List[int], cores: Optional[int] = None) -> int:
    """The most devices, at most `cores` (default: the cores this process may run on), that
    every count in `members` divides over evenly: `cpu_devices=0`'s count."""
    if cores is None:
        cores = (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                 else os.cpu_count() or 1)
    return max(n for n in range(1, max(cores, 1) + 1) if all(m % n == 0 for m in members))


def validate(config: Config, num_devices: Optional[int] = 1) -> Config:
    """Checks every setting and derived size on `num_devices` devices; raises ConfigError with a
    one-line message. `num_devices=None` leaves out the checks that need the device count
    (`check_devices`), so that the command line checks everything else before it imports JAX.
    """
    env, ppo = config.env, config.ppo
    if not env.name:
        raise ConfigError(
            "env.name is empty: pass +env=<preset>, or +env=gymnax env.name=<gymnax id or module:attr>"
        )
    if env.name.partition("/")[0] in SUITES:
        check_suite(env.name)
    _positive("num_seeds", config.num_seeds)
    if config.cpu_devices < 0:
        raise ConfigError(f"cpu_devices={config.cpu_devices} must be >= 0 (0: one per core, as "
                          "many as divide the members evenly)")
    if config.prng_impl not in PRNG_IMPLS:
        raise ConfigError(f"prng_impl={config.prng_impl!r} is not one of {', '.join(PRNG_IMPLS)}")
    _positive("log_every", config.log_every)
    _positive("env.num_envs", env.num_envs)
    _positive("env.frame_stack", env.frame_stack)
    if not 0 <= env.reset_pool < env.num_envs:
        raise ConfigError(f"env.reset_pool={env.reset_pool} must be >= 0 and smaller than "
                          f"env.num_envs={env.num_envs} (0: every env draws its own reset)")
    for key in ("clip_obs", "clip_reward"):
        if not getattr(env, key) > 0:
            raise ConfigError(f"env.{key}={getattr(env, key)} must be > 0")
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
    if ppo.anneal_lr and ppo.schedule.lr.kind != "constant":
        raise ConfigError(
            f"ppo.anneal_lr=true and ppo.schedule.lr.kind={ppo.schedule.lr.kind} both set the lr "
            "schedule: use one"
        )
    for name in SCHEDULED_HYPERPARAMS:
        _validate_schedule(f"ppo.schedule.{name}", config.schedule(name))
    _validate_eval_and_checkpoint(config)
    _validate_distributed(config.distributed)
    if config.compile_cache is not None and not config.compile_cache.strip():
        raise ConfigError(f"compile_cache={config.compile_cache!r} is empty: give a directory, "
                          "auto (the default) or null (no cache)")
    net = config.network
    if not net.hidden_sizes or any(size <= 0 for size in net.hidden_sizes):
        raise ConfigError(f"network.hidden_sizes={list(net.hidden_sizes)} must be positive sizes")
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
    if net.activation not in ACTIVATIONS:
        raise ConfigError(
            f"network.activation={net.activation!r} is not one of {', '.join(ACTIVATIONS)}"
        )
    if num_devices is not None:
        check_devices(config, num_devices)
    return config


def check_devices(config: Config, num_devices: int) -> None:
    """The checks of `validate` that need the device count: the envs, and each device's share
    of the batch, must divide evenly over the devices the envs are split over; raises
    ConfigError."""
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
    _positive("checkpoint.keep", checkpoint.keep)
    if config.resume and config.init_from:
        raise ConfigError("resume=true and init_from are exclusive: a resumed run already has "
                          "its params")


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
    return math.isfinite(value) and HYPERPARAM_RANGES[name][1](value)


def _validate_sweep(sweep: SweepConfig) -> None:
    for name, values in sweep.swept().items():
        if not values:
            raise ConfigError(f"sweep.{name}=[] is empty: give at least one value, or leave it "
                              "out")
        bad = [v for v in values if not _in_range(name, v)]
        if bad:
            raise ConfigError(f"sweep.{name}={values}: {bad[0]} is out of range, each value "
                              f"must be {HYPERPARAM_RANGES[name][0]}")
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
    unknown = [name for name in pbt.evolving(config.sweep) if name not in SWEEPABLE]
    if unknown:
        raise ConfigError(f"pbt.hparams: {unknown[0]} is not one of {', '.join(SWEEPABLE)}")
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
    that is not installed (checked without importing it, before JAX starts)."""
    prefix, _, env_id = name.partition("/")
    suite = SUITES[prefix]
    if not env_id:
        raise ConfigError(f"env.name={name!r} names no env of {prefix}: write {prefix}/<id>")
    if importlib.util.find_spec(suite.package) is None:
        raise ConfigError(
            f"env.name={name!r} needs {prefix}, which is not installed: "
            f"pip install -e \".[{suite.extra}]\"")
    return suite, env_id


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
