"""The typed configuration schema and the sizes derived from it (`purerl.validation` checks it).

The dataclasses are plain (not frozen) so that Hydra can merge them as structured configs;
after `validate` nothing mutates a `Config`. Derived sizes are properties, never written back.
"""

from __future__ import annotations

import itertools
import numbers
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, NamedTuple, Optional

SCHEDULED_HYPERPARAMS = ("lr", "ent_coef", "clip_eps", "vf_coef", "gamma", "gae_lambda")
SCHEDULE_KINDS = ("constant", "linear", "cosine", "exponential", "piecewise")
LR_SCHEDULES = ("adaptive_kl",)  # ppo.lr_schedule's rules besides null (the schedules)
PRNG_IMPLS = ("threefry2x32", "rbg", "unsafe_rbg")
ACTIVATIONS = ("tanh", "relu", "gelu", "swish", "silu", "elu", "leaky_relu", "sigmoid", "softplus")
CONV_PADDINGS = ("SAME", "VALID")
RNN_CELLS = ("gru", "lstm")
MARL_CRITICS = ("local", "central")  # marl.critic: IPPO's, MAPPO's
# Settings that a resumed run may change, beside `total_timesteps` (which may grow: training
# more): they do not change the run's result, or (the plan, the devices and processes) only the
# random numbers the rest of the run draws (docs/runs.md). summary.json's `config` leaves them
# out; it names the plan and devices that ran apart.
RESUMABLE_CHANGES = ("log_every", "log", "eval", "checkpoint", "resume", "init_from", "init_member",
                     "compile_cache", "cpu_devices", "distributed", "stop_at_return", "plan",
                     "chunk_s", "events")
# The hyperparameters a sweep may vary inside one program (arrays in it, not shapes).
SWEEPABLE = ("lr", "gamma", "gae_lambda", "clip_eps", "ent_coef", "vf_coef", "max_grad_norm",
             "target_kl")
# How a sweep, PBT and summary.json name an algorithm's own hyperparameter: `algorithm.<name>`
ALGORITHM_PREFIX = "algorithm."
# The metadata key that marks a field of an algorithm's settings as a hyperparameter
HYPERPARAMETER = "purerl.hyperparameter"
# The `algorithm.<key>` settings that are purerl's, not the algorithm's: its factory, and the
# schedules of its hyperparameters (`algorithm.schedule.<name>.kind`, as `ppo.schedule.*`)
ALGORITHM_KEYS = ("name", "schedule")


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
    "jaxmarl": Suite("jaxmarl", "jaxmarl", "jaxmarl"),
}


class ConfigError(ValueError):
    """A setting is invalid: a `ValueError` whose message is one line naming the setting and
    its value.

    `validate`, `make_program`, `run` and `load` raise it; the command line prints the line
    and exits with code 2.
    """


@dataclass
class ScheduleConfig:
    """How one hyperparameter moves over the run, as a multiple of its base value.

    `progress` is update / num_updates in [0, 1); `fraction` stretches or shortens the move.
    """

    kind: str = "constant"  # constant | linear | cosine | exponential | piecewise
    end: float = 0.0  # linear, cosine, exponential: multiplier reached at the end
    fraction: float = 1.0  # share of the run over which linear/cosine/exponential move, then hold
    boundaries: List[float] = field(default_factory=list)  # piecewise: increasing run fractions
    # piecewise: multipliers, one more than boundaries
    values: List[float] = field(default_factory=list)


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
    # > 0: the env's shaped reward (Overcooked's, its `shaped_reward_weight` param) is added to
    # its reward with a weight falling linearly from 1 to 0 over this many env steps of a seed
    # (JaxMARL's REW_SHAPING_HORIZON); episode returns and evaluation stay the env's own
    reward_shaping_horizon: float = 0.0


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
    # The learning rate's rule (LR_SCHEDULES): null, ppo.lr as anneal_lr / schedule.lr schedule
    # it; adaptive_kl, rsl_rl's and Brax's: ppo.lr at first, then before each minibatch's step
    # divided by 1.5 where its approx KL > 2 x desired_kl, times 1.5 where 0 < KL <
    # desired_kl / 2, kept within [lr_min, lr_max]; the rate is each member's, in its state
    lr_schedule: Optional[str] = None
    desired_kl: float = 0.01
    lr_min: float = 1e-5
    lr_max: float = 1e-2
    schedule: SchedulesConfig = field(default_factory=SchedulesConfig)
    # Loss terms of a user's, "pkg.module:fn" each: `fn(params, batch, outputs, hparams) ->
    # (loss, metrics)`, the loss added to PPO's, each metric logged as loss/<name>
    loss_terms: List[str] = field(default_factory=list)


@dataclass
class NetworkConfig:
    hidden_sizes: List[int] = field(default_factory=lambda: [64, 64])
    activation: str = "tanh"
    # true: one trunk with policy and value heads; false: two towers (an MLP pair runs as one
    # batched MLP)
    shared: bool = False
    # output channels; non-empty: a CNN torso (images), with one entry per convolution in each
    # conv_ list, e.g. conv_channels=[32,64] conv_kernels=[4,3] conv_strides=[2,1]
    # conv_padding=[VALID,VALID]; convolutions that do not fit the env's images are a config
    # error
    conv_channels: List[int] = field(default_factory=list)
    conv_kernels: List[int] = field(default_factory=list)  # square kernel sizes
    conv_strides: List[int] = field(default_factory=list)  # strides
    conv_padding: List[str] = field(default_factory=list)  # SAME or VALID (CONV_PADDINGS)
    vocab_size: int = 0  # > 0: quantize each observation dimension into this many tokens
    embed_dim: int = 16  # width of each token's embedding
    rnn: Optional[str] = None  # a memory after the torso: gru | lstm (RNN_CELLS); null: none
    rnn_size: int = 128  # units of the recurrent cell
    # "pkg.module:fn": a user's network, `fn(obs_shape, action_spec, network_config)` -> a flax
    # module mapping observations [B, *obs_shape] to (policy_out, value [B], ...); null: purerl's
    factory: Optional[str] = None


@dataclass
class EvalConfig:
    every: int = 0  # updates between evaluations; 0 = only at the end of the run
    num_episodes: int = 16  # episodes per temperature, played in parallel
    temperatures: List[float] = field(default_factory=lambda: [1.0, 0.0])  # 0.0: the mode
    max_steps: Optional[int] = None  # steps per episode at most; null: the env's episode limit


@dataclass
class CheckpointConfig:
    every: int = 0  # updates between checkpoints; 0 = only the final one (always written)
    # seconds between checkpoints (beside `every`; a chunk of updates ends when one is due); 0 = off
    every_s: float = 600.0
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
    # An algorithm's own hyperparameters (`purerl.hyperparameter`), `algorithm.<name>` in the
    # grid: `sweep.algorithm.kl_beta=[0.5,1.0]`
    algorithm: Dict[str, List[float]] = field(default_factory=dict)

    def swept(self) -> Dict[str, List[float]]:
        """The given lists: PPO's in SWEEPABLE order, then the algorithm's own in the order
        given.

        Returns:
            `{name: values}` of the swept hyperparameters (an algorithm's own named
                `algorithm.<name>`); empty without a sweep.
        """
        ppo = {name: list(getattr(self, name)) for name in SWEEPABLE
               if getattr(self, name) is not None}
        return {**ppo, **{ALGORITHM_PREFIX + name: list(values)
                          for name, values in self.algorithm.items()}}

    def grid(self) -> List[Dict[str, float]]:
        """The grid points: one {name: value} per combination, the last name varying fastest;
        [{}] without a sweep.

        Returns:
            `prod(len(values))` dicts; member m of a run trains point m // num_seeds.
        """
        swept = self.swept()
        return [dict(zip(swept, values)) for values in itertools.product(*swept.values())]


@dataclass
class MarlConfig:
    # many agents (env.name=jaxmarl/<id>): each agent's observation gains its one-hot agent id,
    # so that one shared policy can act differently per agent
    agent_id: bool = False
    # local: each agent's value from its own observation (IPPO); central: from the global state,
    # SMAX's world_state or else every agent's observation (MAPPO; two MLP towers)
    critic: str = "local"
    # true: one policy (and critic) for all agents; false: separate parameters per group of
    # the env's agent_classes (each agent its own where the env names none)
    share_params: bool = True


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
        """The hyperparameters that evolve.

        Args:
            sweep: the run's sweep: with `hparams` null, its swept names evolve (else lr and
                ent_coef).

        Returns:
            Their names, in order.
        """
        if self.hparams is not None:
            return list(self.hparams)
        return list(sweep.swept()) or ["lr", "ent_coef"]


@dataclass
class Config:
    """A run's settings: the typed schema that the command line and Python share.

    Every key, its type, default and meaning is in the
    [configuration reference](configuration-reference.md); `conf/config.yaml` holds the
    command line's defaults. Build one in Python with the groups as dataclasses of this
    module, e.g. `Config(env=EnvConfig(name="CartPole-v1"), ppo=PPOConfig(lr=1e-3))`;
    `validate` checks it, and nothing mutates it afterwards. The sizes derived from it are
    properties, never written back.

    Attributes:
        env: `EnvConfig`, the environment, its wrappers and the envs per seed.
        ppo: `PPOConfig`, PPO's hyperparameters, their schedules and loss terms.
        network: `NetworkConfig`, the network (purerl's, or `factory`).
        eval: `EvalConfig`, evaluation episodes.
        checkpoint: `CheckpointConfig`, when checkpoints are written and how many kept.
        log: `LogConfig`, TensorBoard, W&B, the progress bar.
        distributed: `DistributedConfig`, joining the processes of a multi-host run.
        sweep: `SweepConfig`, hyperparameter values trained at once.
        pbt: `PBTConfig`, population-based training of the members.
        marl: `MarlConfig`, how a multi-agent env's agents are trained.
        algorithm: the algorithm: `name` (`pkg.module:make_fn`, None for PPO) and the
            settings of its own that `make_fn.settings` declares (`purerl.algos.algorithm`).
    """

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
    marl: MarlConfig = field(default_factory=MarlConfig)
    # continue the run in this run directory from its newest checkpoint: false, true, or auto
    # (resume when it holds a checkpoint, else start)
    resume: Any = False
    init_from: Optional[str] = None  # a run directory whose final network params start this run
    init_member: Optional[int] = None  # which member of init_from; null: each seed its own, or
    # the best member of a sweep
    # End the run once the mean return over the members reaches this (after an evaluation when
    # eval.every > 0, else after a logged update); null: train all total_timesteps
    stop_at_return: Optional[float] = None
    # The algorithm: `name`, "pkg.module:make_fn", an algorithm of a user's in place of PPO
    # (`purerl.algos.algorithm`), `make_fn(config, env, env_params, **parts) -> Algorithm(init,
    # update)`, null: PPO; every other key one of the settings its `make_fn.settings` declares.
    # `Config(algorithm="pkg.module:make_fn")`, as the command line's `algorithm=...`, is
    # `{"name": "pkg.module:make_fn"}`.
    algorithm: Dict[str, Any] = field(default_factory=lambda: {"name": None})
    # Events of a user's, "pkg.module:Cls" each: `Cls()` (no arguments) is a `purerl.Event`,
    # run between chunks after the evaluation and before the log, before those given to
    # `purerl.run(events=...)`
    events: List[str] = field(default_factory=list)
    # JAX's persistent compilation cache: "auto" is $JAX_COMPILATION_CACHE_DIR if set, else
    # $XDG_CACHE_HOME/purerl/xla (~/.cache/purerl/xla); a directory; None turns it off.
    compile_cache: Optional[str] = "auto"
    # On a CPU, the devices (one per core, XLA's forced host devices) that the members (seeds,
    # sweep points) are split over by the command line: 0 is the most cores that divide the
    # members evenly; 1 keeps one device. Ignored when XLA_FLAGS forces a device count.
    cpu_devices: int = 0
    # The faster paths the programs take (`purerl.plan`): "auto" (by platform: "cpu" on a CPU,
    # "plain" on a GPU or TPU), "plain" (a GPU's or TPU's path, on any platform) or "cpu"
    plan: str = "auto"
    # A chunk of updates (the stretch between a run's events: signals, time-based checkpoints,
    # progress, metrics) lasts at most about this many seconds of training, and at most 1/50 of
    # the run
    chunk_s: float = 30.0

    def __post_init__(self):
        if self.algorithm is None or isinstance(self.algorithm, str):  # the short spelling
            self.algorithm = {"name": self.algorithm}

    @property
    def algorithm_name(self) -> Optional[str]:
        """`algorithm.name`: the `pkg.module:make_fn` of a user's algorithm, None for PPO."""
        return self.algorithm.get("name")

    @property
    def algorithm_settings(self) -> Dict[str, Any]:
        """The `algorithm.<key>` settings other than `name` and `schedule`: the algorithm's
        own, by key."""
        return {key: value for key, value in self.algorithm.items()
                if key not in ALGORITHM_KEYS}

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
        """Transitions per minibatch: batch_size // ppo.num_minibatches."""
        return self.batch_size // self.ppo.num_minibatches

    @property
    def num_updates(self) -> int:
        """Updates in the run: total_timesteps // batch_size."""
        return self.total_timesteps // self.batch_size

    def schedule(self, name: str) -> ScheduleConfig:
        """The effective schedule of one hyperparameter, with `anneal_lr` resolved.

        Args:
            name: one of lr, ent_coef, clip_eps, vf_coef, gamma, gae_lambda.

        Returns:
            `ppo.schedule.<name>`, or for lr with `ppo.anneal_lr` (and no `ppo.lr_schedule`,
                whose rule replaces it) a linear schedule to 0 (nothing is written back).
        """
        schedule = getattr(self.ppo.schedule, name)
        if name == "lr" and self.ppo.anneal_lr and self.ppo.lr_schedule is None:
            return ScheduleConfig(kind="linear", end=0.0)
        return schedule

    def schedules(self) -> Dict[str, ScheduleConfig]:
        """The effective schedule of every scheduled hyperparameter.

        Returns:
            `{name: ScheduleConfig}` for lr, ent_coef, clip_eps, vf_coef, gamma and
                gae_lambda, as `schedule` gives each, then `algorithm.<name>` for each of an
                algorithm's own hyperparameters that `algorithm.schedule.<name>` schedules.
        """
        own = {ALGORITHM_PREFIX + name: ScheduleConfig(**fields)
               for name, fields in (self.algorithm.get("schedule") or {}).items()}
        return {**{name: self.schedule(name) for name in SCHEDULED_HYPERPARAMS}, **own}


def hyperparameter(default: float) -> Any:
    """A field of an algorithm's settings (`MakeAlgorithm.settings`) that is a hyperparameter:
    a float32 `[]` array in `HyperParams.extra[name]` rather than a Python number, so that
    `sweep.algorithm.<name>` sweeps it inside one program and `pbt.hparams=[algorithm.<name>]`
    evolves it. Use it as a dataclass field's default: `kl_beta: float =
    purerl.hyperparameter(1.0)`.

    Args:
        default: its base value when `algorithm.<name>` is not given.

    Returns:
        A `dataclasses.field` marked with `HYPERPARAMETER`.
    """
    return field(default=float(default), metadata={HYPERPARAMETER: True})


def number_problem(value: Any, kind: str, default: Any) -> str:
    """What `value` must be to replace a number setting of kind `kind` whose default is
    `default`, or "" when it fits: a bool for a bool; an integer for an integer; a number for
    a float; not negative where the default is positive (sizes, limits, scales) or unsigned.

    Args:
        value: the value given.
        kind: the setting's kind, as numpy names them: "b" bool, "i" int, "u" unsigned, "f"
            float.
        default: the setting's default.

    Returns:
        "" when `value` fits, else what it must be ("an integer", ">= 0", ...).
    """
    if kind == "b":
        return "" if isinstance(value, bool) else "true or false"
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return "a number" if kind == "f" else "an integer"
    if kind != "f" and not isinstance(value, numbers.Integral):
        return "an integer"
    if value < 0 and (default > 0 or kind == "u"):
        return ">= 0"
    return ""


def config_dir() -> Path:
    """The `conf/` beside this package: inside it in a wheel (`purerl/conf`), at the
    repository's top level in a source checkout.

    Returns:
        The directory's `Path`.
    """
    package = Path(__file__).resolve().parent
    installed = package / "conf"
    return installed if (installed / "config.yaml").is_file() else package.parent / "conf"


def flat_settings(tree: Any, prefix: str = "") -> Dict[str, Any]:
    """A config record (nested dicts, as `dataclasses.asdict(config)` gives it) as dotted keys,
    the command line's spelling: `{"ppo": {"lr": 0.001}}` -> `{"ppo.lr": 0.001}`.

    Args:
        tree: a config record, or one group's or value's part of it.
        prefix: the dotted path of `tree`, ending in "." (default: the top).

    Returns:
        `{dotted key: value}`, the leaves in the record's order.
    """
    if not isinstance(tree, dict):
        return {prefix[:-1]: tree}
    return {k: v for key, value in tree.items()
            for k, v in flat_settings(value, f"{prefix}{key}.").items()}


def result_settings(record: Dict) -> Dict:
    """The settings that shape a run's result: a config record (`dataclasses.asdict(config)`)
    without the groups and keys of `RESUMABLE_CHANGES`, as summary.json's `config` holds
    them.

    Args:
        record: a config record.

    Returns:
        The record's other top-level groups and keys, unchanged.
    """
    return {key: value for key, value in record.items() if key not in RESUMABLE_CHANGES}


def env_devices(num_members: int, num_devices: int) -> int:
    """How many devices a run's envs are split over: none (1) when its members (seeds) split
    evenly over the `num_devices` devices (each device then trains members of its own, with no
    communication), else all of them (each member's envs split, gradients averaged).

    Args:
        num_members: the run's members (`Config.num_members`).
        num_devices: the devices it runs on.

    Returns:
        1 or `num_devices`.
    """
    return 1 if num_members % num_devices == 0 else num_devices


def auto_cpu_devices(members: List[int], cores: Optional[int] = None) -> int:
    """The most devices, at most `cores` (default: the cores this process may run on), that
    every count in `members` divides over evenly: `cpu_devices=0`'s count.

    Args:
        members: the member counts (`num_members`) of the runs to fit.
        cores: the most devices; None: the cores this process may run on.

    Returns:
        The device count, at least 1.
    """
    if cores is None:
        cores = (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                 else os.cpu_count() or 1)
    return max(n for n in range(1, max(cores, 1) + 1) if all(m % n == 0 for m in members))
