"""Command line: `python -m purerl.train +env=cartpole [key=value ...]`.

Settings are checked before anything compiles: first every setting, before JAX is imported, then
the device count and the environments; a bad one prints a one-line error and exits 2. The run
directory (Hydra's output dir) receives `metrics.jsonl` and `summary.json`. JAX, gymnax and the
sinks' libraries are imported only where they are needed, so that the checks answer at once.
"""

from __future__ import annotations

import atexit
import difflib
import gc
import importlib.util
import json
import logging
import math
import os
import signal
import sys
import time
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

import hydra
from hydra.core.config_store import ConfigStore
from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import (
    ConfigAttributeError, ConfigKeyError, OmegaConfBaseException, ValidationError,
)

from purerl.config import Config, ConfigError, auto_cpu_devices, check_devices, validate

log = logging.getLogger("purerl")
logging.getLogger("absl").setLevel(logging.WARNING)  # orbax logs every file it writes
PROGRESS_LINES = 10  # about this many progress lines per run
CHUNKS = 50  # about this many chunks per run: the progress bar's refresh
PBT_LOG = "pbt.jsonl"  # a PBT run's generations: who copied whom, the new hyperparameters
EVAL_STREAM = 0x5EED  # evaluation draws its keys from this stream of the seed, apart from training


def config_dir() -> Path:
    """The `conf/` beside this package: inside it in a wheel (`purerl/conf`), at the
    repository's top level in a source checkout."""
    package = Path(__file__).resolve().parent
    installed = package / "conf"
    return installed if (installed / "config.yaml").is_file() else package.parent / "conf"


def presets() -> List[str]:
    return sorted(p.stem for p in (config_dir() / "env").glob("*.yaml"))


ConfigStore.instance().store(name="purerl_schema", node=Config)


# ---------------------------------------------------------------------------------------------
# Checking the command line before Hydra runs: one-line errors, exit code 2.


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
                    and not _installed(module)):
                raise ConfigError(f"{group}={o.value()} needs {name}, not installed: "
                                  f"pip install -e '.[{extra}]'")


def _installed(module: str) -> bool:
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
    checks that need the device count (see `validate`)."""
    known = set(_schema_keys())
    for key in _dotted_keys(cfg):
        if key not in known and not key.startswith(("hydra.", "env.params.")):
            raise ConfigError(_unknown_setting(key))
    try:
        config = OmegaConf.to_object(cfg)
    except OmegaConfBaseException as error:
        raise ConfigError(_explain(error)) from None
    return validate(config, num_devices)


def normalize_argv(argv: List[str]) -> List[str]:
    """`env.params.<field>=v` becomes `++env.params.<field>=v`: the fields are the env's, so
    they cannot be in the schema, and `++` adds or overrides them."""
    return [f"++{a}" if a.startswith("env.params.") else a for a in argv]


def compile_cache_dir(setting: Optional[str],
                      environ: Mapping[str, str] = os.environ) -> Optional[Path]:
    """The directory of JAX's persistent compilation cache for `compile_cache=setting`: None
    turns it off; "auto" is $JAX_COMPILATION_CACHE_DIR if set, else $XDG_CACHE_HOME/purerl/xla,
    else ~/.cache/purerl/xla; anything else is the directory itself."""
    if setting is None:
        return None
    if setting == "auto":
        if environ.get("JAX_COMPILATION_CACHE_DIR"):
            return Path(environ["JAX_COMPILATION_CACHE_DIR"]).expanduser().absolute()
        base = Path(environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        return base.expanduser().absolute() / "purerl" / "xla"
    return Path(setting).expanduser().absolute()


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


def use_compile_cache(setting: Optional[str]) -> None:
    """Points JAX's persistent compilation cache at `compile_cache_dir(setting)` (or turns it
    off), caching every program however small or quick to compile. Call it before JAX compiles
    anything: JAX opens the cache at its first compile and keeps it."""
    import jax

    directory = compile_cache_dir(setting)
    jax.config.update("jax_compilation_cache_dir", None if directory is None else str(directory))
    if directory is not None:
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)  # no size limit


def preflight(argv: List[str]) -> None:
    """Composes and validates every job the command line asks for; raises ConfigError.

    Every setting is checked before JAX is imported; then JAX's compile cache is set up and the
    checks that need JAX follow: the device count and the environments (gymnax)."""
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException

    args = [a for a in normalize_argv(argv) if not a.startswith("-")]
    if any(a.startswith("-") and a not in ("-m", "--multirun") for a in argv):
        return  # --help, --cfg, --info ...: Hydra's own business
    try:
        overrides = OverridesParser.create().parse_overrides(args)
    except HydraException as error:
        raise ConfigError(_explain(error)) from None
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
    split_members_over_cores(configs)

    import jax

    use_compile_cache(configs[0].compile_cache)
    join_processes(configs[0])
    for config in configs:
        check_devices(config, jax.device_count())
    from purerl.envs import check_env, make_env

    for config in configs:
        check_env(*make_env(config.env), config)


FORCED_DEVICES = "--xla_force_host_platform_device_count"


def split_members_over_cores(configs: List[Config]) -> None:
    """Makes the CPU's cores devices, so that the members (seeds, sweep points) train split over
    them (`cpu_devices`): XLA_FLAGS's forced host device count, which JAX reads when it makes its
    CPU client (other backends are not touched). Nothing when XLA_FLAGS forces a count already,
    in a multi-host run (each process has its own devices), or once JAX is imported."""
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


def _check_distributed(configs: List[Config]) -> None:
    """The jobs of a sweep run in one process, which joins a multi-host run once: they must
    share the `distributed` settings; raises ConfigError."""
    settings = {repr(c.distributed) for c in configs}
    if len(settings) > 1:
        raise ConfigError("distributed.* differs between the jobs of a sweep, which run in one "
                          "process and join the other processes once; sweep other settings")


def join_processes(config: Config) -> None:
    """Joins the run's other processes (`distributed.enabled`) before any device is touched;
    all but process 0 log errors only."""
    import jax

    from purerl.distributed import initialize

    initialize(config.distributed)
    if jax.process_index() > 0:  # process 0 speaks for the run; the others only fail
        log.setLevel(logging.ERROR)


def check_same_run_dir(run_dir: Path) -> None:
    """The processes of a run write one run directory: raises ConfigError in every process
    when one process's differs from process 0's (a collective)."""
    from purerl.distributed import each_process

    dirs = each_process(str(run_dir.resolve()))
    other = next((i for i, d in enumerate(dirs) if d != dirs[0]), None)
    if other is not None:
        raise ConfigError(f"hydra.run.dir differs between the processes of the run ({dirs[0]} "
                          f"in process 0, {dirs[other]} in process {other}): give every "
                          "process the same one, on a file system they all mount")


def _quiet_hydra_beside_process_0() -> List[str]:
    """Hydra overrides for the processes of a multi-process run but process 0: no `.hydra/`
    config copy and no log file in the run directory, which process 0 writes."""
    if "jax" not in sys.modules:  # preflight returned early (--help, --cfg, ...)
        return []
    import jax

    if not jax.distributed.is_initialized() or jax.process_index() == 0:
        return []
    return ["hydra.output_subdir=null", "hydra/job_logging=disabled",
            "hydra/hydra_logging=disabled"]


def _fail(error, code: int = 2) -> None:
    print(f"purerl: error: {error}", file=sys.stderr)
    sys.exit(code)


class JobFailed(Exception):
    """A run that ended badly (its files written): the one-line reason and the exit code."""

    def __init__(self, message: str, code: int):
        super().__init__(message)
        self.code = code


# The jobs of this command's sweep (Hydra's -m) that failed: one line each, said at its end.
FAILED_JOBS: List[str] = []


def _job_failed(message: str, code: int, run_dir: Path) -> None:
    """A failed job: alone, the process exits with `code`; in a sweep it is logged, written to
    its summary.json when the run wrote none, and said again at the sweep's end (exit 1), and
    the sweep goes on, its sweeper getting None (Optuna's sweeper: a failed trial; NaN would
    make it raise)."""
    from hydra.types import RunMode

    hydra_config = HydraConfig.get()
    if hydra_config.mode != RunMode.MULTIRUN:
        _fail(message, code)
    log.error("%s", message)
    if not (run_dir / "summary.json").exists():
        from purerl.logging import write_summary

        write_summary(run_dir, {"status": "invalid", "error": message})
    overrides = " ".join(hydra_config.overrides.task)
    FAILED_JOBS.append(f"job #{hydra_config.job.num} ({overrides}) failed: {message}")
    return None


# ---------------------------------------------------------------------------------------------
# The run, in steps: compile the programs; open or resume the run directory; then chunks of
# updates, and after each chunk the events that are due (log, evaluate, checkpoint, ...).


class Programs:
    """The compiled programs of a run. `init` ((key, hparams) -> RunnerState) and `run_chunk`
    ((state, num) -> (state, Metrics [S, chunk]): `num` updates) are ready when
    `compile_programs` returns; the evaluation program and PBT's generation step are first
    needed after a chunk, so they compile in a thread while the first chunks train, and their
    first call waits for them. `compile_s`: seconds until init and chunk were compiled, plus
    the waits for the others."""

    def __init__(self, init: Callable, run_chunk: Callable, evaluate: Future,
                 pbt: Optional[Future], compile_s: float):
        self.init, self.run_chunk, self.compile_s = init, run_chunk, compile_s
        self._evaluate, self._pbt = evaluate, pbt

    def _ready(self, compiling: Future) -> Callable:
        if not compiling.done():
            start = time.perf_counter()
            compiling.result()
            self.compile_s += time.perf_counter() - start
        return compiling.result()

    def reused(self) -> "Programs":
        """The same programs for another run, none of whose time went to compiling them."""
        return Programs(self.init, self.run_chunk, self._evaluate, self._pbt, compile_s=0.0)

    def evaluate(self, params, obs_stats, keys):
        """EvalResult [S, temperatures] of the members' `params` and observation statistics,
        from their keys `[S]`."""
        return self._ready(self._evaluate)(params, obs_stats, keys)

    def pbt(self, state, fitness, key):
        """(state, source [S]): a generation of exploit and explore (`pbt.every` > 0)."""
        return self._ready(self._pbt)(state, fitness, key)


def compile_programs(config: Config, program, key,
                     meanwhile: Callable[[], None] = lambda: None) -> Programs:
    """Lowers the init, chunk and evaluation programs (and PBT's generation step when
    `pbt.every`) one after another. Init and chunk compile in threads as soon as they are
    lowered (XLA compiles without the GIL while Python lowers the next); the others compile
    once the chunk program is compiled, while the run trains. All but init are lowered from
    the state's shapes and shardings: no state is made before the run directory is opened.
    `meanwhile` runs once all are lowered, while init and chunk compile; `compile_s` is the
    time until both were compiled and all lowered, whether or not `meanwhile` took longer."""
    import jax
    import numpy as np

    from purerl.envs import make_env
    from purerl.evaluation import make_evaluator
    from purerl.parallel import map_seeds
    from purerl.schedules import member_hyperparams

    start = time.perf_counter()
    pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="compile")

    lowered_init = jax.jit(program.init, out_shardings=program.state_sharding).lower(
        key, member_hyperparams(config))
    compiling_init = pool.submit(_compiled_at, lowered_init)
    state = jax.tree.map(
        lambda sharding, shapes: jax.tree.map(
            lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=sharding), shapes),
        program.state_sharding, lowered_init.out_info)
    compiling_chunk = pool.submit(_compiled_at, jax.jit(program.run, donate_argnums=0).lower(
        state, np.int32(program.chunk)))

    def after_chunk(lowered):
        return pool.submit(_compile_after, compiling_chunk, lowered)

    evaluator = make_evaluator(config, *make_env(config.env))
    evaluate = after_chunk(jax.jit(map_seeds(evaluator.evaluate, config.num_members)).lower(
        state.params, state.normalizer.obs, _eval_keys(config, key)))
    pbt = None
    if config.pbt.every:
        from purerl.pbt import make_pbt_step

        fitness = jax.ShapeDtypeStruct((config.num_members,), np.float32)
        pbt = after_chunk(jax.jit(make_pbt_step(config), donate_argnums=0,
                                  out_shardings=(program.state_sharding, None)).lower(
            state, fitness, jax.random.key(0)))
    pool.shutdown(wait=False)  # its threads finish what was submitted
    lowered = time.perf_counter()
    meanwhile()
    init, init_ready = compiling_init.result()
    run_chunk, chunk_ready = compiling_chunk.result()
    return Programs(init, run_chunk, evaluate, pbt,
                    compile_s=max(lowered, init_ready, chunk_ready) - start)


def _compiled_at(lowered) -> Tuple[Callable, float]:
    """`lowered`'s executable, and when it was ready (`time.perf_counter()`)."""
    return lowered.compile(), time.perf_counter()


def _compile_after(first: Future, lowered) -> Callable:
    """`lowered`'s executable, compiled once `first` is done: the cores go first to the
    programs the run waits for."""
    first.result()
    return lowered.compile()


# The programs of this process's last jobs, by program settings, the latest last (see
# _programs_for); at most KEPT_PROGRAMS of them.
_COMPILED: "OrderedDict[str, Programs]" = OrderedDict()
KEPT_PROGRAMS = 4


def _programs_for(config: Config, program, key) -> Programs:
    """The run's programs: an earlier job's when a sweep's (Hydra's -m) jobs differ only in
    what the programs take as arguments, the seed and the hyperparameters' values
    (`schedules.program_settings`; `compile_s` 0); else compiled, the libraries the run's files
    are written with imported meanwhile."""
    from purerl.schedules import program_settings

    settings = repr(program_settings(config))
    if settings in _COMPILED:
        _COMPILED.move_to_end(settings)
        log.info("an earlier job's programs: only the seed or hyperparameters differ")
        return _COMPILED[settings].reused()
    programs = compile_programs(config, program, key, meanwhile=lambda: _import_writers(config))
    log.info("compiled in %.1f s", programs.compile_s)
    _COMPILED[settings] = programs
    if len(_COMPILED) > KEPT_PROGRAMS:
        _COMPILED.popitem(last=False)
    return programs


def _import_writers(config: Config) -> None:
    """Imports the libraries of the run's sinks and checkpoints ahead of their first use
    (about 0.7 s on a 2-core CPU)."""
    from purerl import logging as sinks
    from purerl.checkpoint import import_orbax
    from purerl.distributed import writes_files

    import_orbax()
    if writes_files():
        sinks.import_libraries(config.log)


def _eval_keys(config: Config, key):
    """One evaluation's keys, one per member, split from `key` and then converted to the run's
    PRNG (`prng_impl`), which compiles to far fewer kernels than JAX's default threefry."""
    import jax

    from purerl.prng import convert_key

    return convert_key(jax.random.split(key, config.num_members), config.prng_impl)


def _params_from(run_dir: Path, like, init_member: Optional[int] = None):
    """The network params (host arrays `[M, ...]`) of another run's final checkpoint: member
    `init_member`'s for every member (default: a sweep's best member; else each seed its own,
    or the one seed's for all), shape-checked against `like`, this run's abstract params;
    raises ConfigError."""
    import jax
    import numpy as np

    from purerl.checkpoint import restore_run
    from purerl.trained import checked_member

    saved = restore_run(run_dir)
    source, params = saved.config, saved.state.params
    num_members = jax.tree.leaves(like)[0].shape[0]
    member = checked_member(saved, run_dir, init_member, "init_member", best_by_default=False)
    if member is not None:
        params = jax.tree.map(lambda x: x[member:member + 1], params)
    elif source.num_members not in (1, num_members):
        raise ConfigError(f"init_from={run_dir}: it has {source.num_members} members, this "
                          f"run {num_members}; use 1 or {num_members}, or pick one by "
                          "init_member")
    mine = dict(jax.tree_util.tree_flatten_with_path(like)[0])
    theirs = dict(jax.tree_util.tree_flatten_with_path(params)[0])
    for path in sorted(set(mine) | set(theirs), key=jax.tree_util.keystr):
        shapes = [None if leaf is None else tuple(leaf.shape[1:])
                  for leaf in (theirs.get(path), mine.get(path))]
        if shapes[0] != shapes[1]:
            there, here = (shape or "missing" for shape in shapes)
            raise ConfigError(
                f"init_from={run_dir}: params{jax.tree_util.keystr(path)} has shape {there} "
                f"there and {here} here (network and env must match)")
    return jax.tree.map(lambda p, l: np.broadcast_to(p, l.shape), params, like)


def _open_run_dir(config: Config, run_dir: Path, checkpoints, num_devices: int) -> Optional[int]:
    """The update to resume from (None for a new run), after checking that the run directory
    fits the request; raises ConfigError."""
    from purerl.checkpoint import check_resumable

    latest = checkpoints.latest()
    if not config.resume:
        if latest is not None:
            raise ConfigError(
                f"{run_dir} already holds a run (checkpoints up to update {latest}): pass "
                "resume=true to continue it, or choose another hydra.run.dir")
        return None
    if latest is None:
        raise ConfigError(f"resume=true: {checkpoints.directory} has no complete checkpoint "
                          "(pass the run's directory as hydra.run.dir=...)")
    check_resumable(checkpoints.restore_record(latest), config, num_devices, run_dir)
    return latest


@dataclass
class Run:
    """A run in progress: what the steps between chunks read and change."""

    config: Config
    run_dir: Path
    programs: Programs
    num_devices: int
    key: Any  # the run's PRNG key (evaluation draws from a stream of it)
    checkpoints: Any  # purerl.checkpoint.Checkpoints
    best: Any  # Checkpoints of checkpoints/best/, or None
    state: Any = None  # the RunnerState
    history: Any = None  # purerl.logging.RunHistory
    done: int = 0  # updates done
    first_update: int = 0  # where this process started: a resumed run's checkpoint
    writers: List = field(default_factory=list)  # metrics.jsonl, TensorBoard, W&B
    bar: Any = None  # the progress bar
    train_s: float = 0.0
    status: str = "completed"  # completed (so far) | interrupted | nonfinite
    failure: str = ""  # what was non-finite where, when status is nonfinite

    @property
    def env_steps(self) -> int:
        """Env steps per seed so far."""
        return self.done * self.config.batch_size

    def sps(self) -> float:
        """Env steps per second over all members (seeds), of the updates this process ran."""
        steps = (self.done - self.first_update) * self.config.batch_size * self.config.num_members
        return steps / max(self.train_s, 1e-9)

    def record(self) -> Dict:
        """The host's record saved with a checkpoint."""
        from purerl.checkpoint import config_record

        import jax

        return {"config": config_record(self.config), "devices": self.num_devices,
                "processes": jax.process_count(),
                "update": self.done, "history": self.history.to_record()}


def _open_or_resume(run: Run, resume_from: Optional[int], init_params) -> None:
    """Sets the run's first state: the init program's, resumed from checkpoint `resume_from`
    (with its history and metrics.jsonl up to there), or starting from `init_params`."""
    import jax

    from purerl import logging as sinks
    from purerl.distributed import writes_files
    from purerl.schedules import member_hyperparams

    run.state = run.programs.init(run.key, member_hyperparams(run.config))
    run.history = sinks.RunHistory(run.config.num_members)
    if resume_from is not None:
        run.state, saved = run.checkpoints.restore(resume_from, run.state)
        run.history, run.done = sinks.RunHistory.from_record(saved["history"]), resume_from
        if writes_files():
            for name in ("metrics.jsonl", PBT_LOG):
                sinks.keep_rows_until(run.run_dir / name, run.done)
        if run.best is not None:
            run.best.delete_after(run.done)  # a best found after the checkpoint is found again
        log.info("resumed from the checkpoint of update %d", run.done)
    else:
        if writes_files():
            for name in ("metrics.jsonl", PBT_LOG):
                (run.run_dir / name).unlink(missing_ok=True)
        if init_params is not None:
            run.state = run.state._replace(params=jax.tree.map(
                lambda new, old: jax.device_put(new, old.sharding), init_params, run.state.params))
            log.info("network params from %s", run.config.init_from)
    run.first_update = run.done


def _open_sinks(run: Run, resumed: bool) -> None:
    """The metrics writers (metrics.jsonl, TensorBoard, W&B) and the progress bar."""
    from purerl import logging as sinks

    from purerl.distributed import writes_files

    config = run.config
    run.bar = sinks.ProgressBar(config.num_updates * config.batch_size,
                                config.log.progress and writes_files(), initial=run.env_steps)
    if not writes_files():  # process 0 writes for the run
        return
    run.writers = [sinks.MetricsLog(run.run_dir)]
    if config.log.tensorboard:
        run.writers.append(sinks.TensorBoardSink(
            run.run_dir, purge_step=run.env_steps + 1 if resumed else None))
    if config.log.wandb:
        run.writers.append(sinks.WandbSink(config, run.run_dir))


def _close(run: Run) -> None:
    if run.bar is not None:
        run.bar.close()
    for writer in run.writers:
        writer.close()
    run.checkpoints.close()
    if run.best is not None:
        run.best.close()


@dataclass
class Chunk:
    """What one chunk of updates brought: the rows of its good updates (those before a
    non-finite one), for the events to log and extend."""

    previous: int  # updates done before the chunk
    rows: List[Dict]  # metrics rows of the good updates
    stop_requested: bool  # Ctrl-C came: read once, so that the save and the stop agree
    nonfinite: int  # the NaN guard's bits of the first bad update; 0 when all were good
    evaluated: bool = False  # the evaluation event ran after it
    failed: bool = False  # an event raised after it: what trained is kept, then it re-raises


def _run_chunk(run: Run, num: int, stop: _StopRequest) -> Chunk:
    """Runs `num` updates and keeps those before the first non-finite one (the NaN guard)."""
    import jax
    import numpy as np

    from purerl import logging as sinks
    from purerl.distributed import any_process, to_host
    from purerl.sweep import is_sweep, per_member_rows

    tick = time.perf_counter()
    state, metrics = run.programs.run_chunk(run.state, np.int32(num))
    metrics = jax.tree.map(lambda x: np.asarray(x)[:, :num], to_host(metrics))
    run.train_s += time.perf_counter() - tick
    stop_requested = any_process(stop.requested)  # every process stops at the same chunk
    flags = np.bitwise_or.reduce(metrics.nonfinite, axis=0)  # [num], over seeds
    good = int(np.argmax(flags != 0)) if flags.any() else num
    metrics = jax.tree.map(lambda x: x[:, :good], metrics)
    rows = sinks.metrics_rows(metrics, run.done + 1, run.config.batch_size)
    if is_sweep(run.config):
        for row, members in zip(rows, per_member_rows(metrics.episode_return_sum,
                                                      metrics.episode_count, run.config.num_seeds)):
            row.update(members)
    chunk = Chunk(run.done, rows, stop_requested, int(flags[good]) if good < num else 0)
    run.history.extend(metrics)
    run.state, run.done = state, run.done + good
    return chunk


def _due(every: int, done: int, num_updates: int) -> bool:
    """An event every `every` updates (0: only at the end) falls on update `done`."""
    return done == num_updates or (every > 0 and done % every == 0)


class Event:
    """Something done between chunks when `due`. A periodic event (`every` > 0) also ends
    chunks on its updates. Events run in order; once one stops the run, the rest wait. When
    one raises in a single process, those after it that keep what trained (`keeps_work`)
    still run."""

    every = 0
    keeps_work = False

    def due(self, run: Run, chunk: Chunk) -> bool:
        """Whether to handle the chunk that just ended (`run.done` is its last update)."""
        return True

    def handle(self, run: Run, chunk: Chunk) -> None:
        raise NotImplementedError


class Evaluate(Event):
    """Evaluation episodes every `eval.every` updates and at the end; keeps the best."""

    def __init__(self, config: Config):
        self.every = config.eval.every

    def due(self, run, chunk):
        return not chunk.nonfinite and _due(self.every, run.done, run.config.num_updates)

    def handle(self, run, chunk):
        import jax
        import numpy as np

        from purerl import logging as sinks
        from purerl.distributed import to_host
        from purerl.sweep import is_sweep

        config, key = run.config, run.key
        eval_key = jax.random.fold_in(jax.random.fold_in(key, EVAL_STREAM), run.done)
        result = run.programs.evaluate(run.state.params, run.state.normalizer.obs,
                                       _eval_keys(config, eval_key))
        members = np.asarray(to_host(result).episode_return)  # [M, temperatures]
        temperatures = [str(float(t)) for t in config.eval.temperatures]
        returns = {t: sinks.json_number(v) for t, v in zip(temperatures, members.mean(axis=0))}
        previous_best = run.history.best_eval()
        entry = {"update": run.done, "env_steps": run.env_steps, "returns": returns}
        if is_sweep(config):
            entry["per_member"] = {t: [sinks.json_number(v) for v in members[:, i]]
                                   for i, t in enumerate(temperatures)}
        run.history.evals.append(entry)
        if run.best is not None and run.history.best_eval() != previous_best:
            run.best.save(run.done, run.state, run.record())
        chunk.rows[-1].update({sinks.eval_key(t): v for t, v in returns.items()})
        chunk.evaluated = True


class Log(Event):
    """Writes every `log_every`-th row, the last update's and the evaluated one."""

    keeps_work = True

    def handle(self, run, chunk):
        config = run.config
        logged = [r for r in chunk.rows if r["update"] % config.log_every == 0
                  or r["update"] == config.num_updates or (chunk.evaluated and r is chunk.rows[-1])]
        for writer in run.writers:
            writer.write(logged)


class NonfiniteGuard(Event):
    """Stops the run after a non-finite update (what came before it is logged and kept);
    `names(bits)` names what was non-finite."""

    def __init__(self, names: Callable[[int], List[str]]):
        self.names = names

    def due(self, run, chunk):
        return chunk.nonfinite != 0

    def handle(self, run, chunk):
        run.status = "nonfinite"
        run.failure = (f"non-finite {', '.join(self.names(chunk.nonfinite))} at update "
                       f"{run.done + 1}")


class Progress(Event):
    """The progress bar, and about PROGRESS_LINES progress lines per run in the log."""

    def __init__(self, config: Config):
        self.line_every = math.ceil(config.num_updates / PROGRESS_LINES)

    def handle(self, run, chunk):
        from purerl.logging import progress_line

        sps, latest = run.sps(), chunk.rows[-1]
        run.bar.update(run.env_steps, sps, latest["episode_return"])
        if (run.done // self.line_every > chunk.previous // self.line_every
                or run.done == run.config.num_updates):
            log.info(progress_line(latest, run.config.num_updates, sps))


class Generation(Event):
    """Population-based training: a generation of exploit and explore every `pbt.every`
    updates (not at the run's end), compiled; its line in pbt.jsonl and pbt.png redrawn."""

    def __init__(self, config: Config):
        self.every = config.pbt.every

    def due(self, run, chunk):
        return (self.every > 0 and not chunk.nonfinite and run.done % self.every == 0
                and run.done < run.config.num_updates)

    def handle(self, run, chunk):
        import jax
        import numpy as np

        from purerl.distributed import to_host, writes_files
        from purerl.logging import plot_pbt
        from purerl.pbt import PBT_STREAM, generation_fitness, generation_row

        config, history, generation = run.config, run.history, run.done // self.every
        window = slice(run.done - self.every, run.done)
        fitness = generation_fitness(history.return_sum[:, window], history.count[:, window])
        key = jax.random.fold_in(jax.random.fold_in(run.key, PBT_STREAM), generation)
        run.state, source = run.programs.pbt(run.state, fitness, key)
        names = config.pbt.evolving(config.sweep)
        source, hparams = to_host(  # one gather from every process
            (source, {name: getattr(run.state.hparams, name) for name in names}))
        row = generation_row(run.done, generation, fitness, np.asarray(source), hparams, names)
        if writes_files():
            with (run.run_dir / PBT_LOG).open("a") as file:
                file.write(json.dumps(row) + "\n")
            plot_pbt(run.run_dir / "pbt.png", _pbt_rows(run.run_dir), names,
                     title=config.env.name)
        log.info("generation %d at update %d: %d member(s) copied others", generation,
                 run.done, len(row["copies"]))


def _pbt_rows(run_dir: Path) -> List[Dict]:
    """The generations of pbt.jsonl so far."""
    path = run_dir / PBT_LOG
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


class Checkpoint(Event):
    """A checkpoint every `checkpoint.every` updates, at the end, when asked to stop, and
    after an event failed."""

    keeps_work = True

    def __init__(self, config: Config):
        self.every = config.checkpoint.every

    def due(self, run, chunk):
        return (_due(self.every, run.done, run.config.num_updates) or chunk.stop_requested
                or chunk.failed)

    def handle(self, run, chunk):
        run.checkpoints.save(run.done, run.state, run.record())


class Plot(Event):
    """Redraws learning_curve.png after each evaluation but the last (the run's end draws
    the final one)."""

    def due(self, run, chunk):
        from purerl.distributed import writes_files

        return chunk.evaluated and run.done < run.config.num_updates and writes_files()

    def handle(self, run, chunk):
        _plot(run)


class StopRequest(Event):
    """Stops the run at the chunk's end after a Ctrl-C (once the checkpoint is saved)."""

    def due(self, run, chunk):
        return chunk.stop_requested and run.done < run.config.num_updates

    def handle(self, run, chunk):
        run.status = "interrupted"


def default_events(config: Config, nonfinite_names) -> List[Event]:
    """The events between chunks, in the order they run."""
    return [Evaluate(config), Log(), NonfiniteGuard(nonfinite_names), Progress(config),
            Generation(config), Checkpoint(config), Plot(), StopRequest()]


def _next_stop(run: Run, events: List[Event], chunk: int) -> int:
    """Updates in the next chunk: at most `chunk`, ending on the next periodic event's update
    and at the end of the run."""
    stops = [run.config.num_updates]
    stops += [(run.done // e.every + 1) * e.every for e in events if e.every > 0]
    return min(chunk, min(stops) - run.done)


def _train(run: Run, events: List[Event], chunk: int) -> None:
    """Chunks of at most `chunk` updates until the run ends or an event stops it; after each,
    the events that are due, in order. An event that raises ends the run, in a single
    process once what trained is kept (`_keep_work`; a checkpoint is a collective, and with
    several processes the others may not be at this event)."""
    import jax

    with _StopRequest() as stop:
        while run.done < run.config.num_updates and run.status == "completed":
            result = _run_chunk(run, _next_stop(run, events, chunk), stop)
            for position, event in enumerate(events):
                if run.status != "completed":
                    break
                if event.due(run, result):
                    try:
                        event.handle(run, result)
                    except Exception:
                        if jax.process_count() == 1:  # else the others are not here to save
                            _keep_work(run, result, events[position + 1:])
                        raise


def _keep_work(run: Run, chunk: Chunk, rest: List[Event]) -> None:
    """After an event raised: the events of `rest` that keep what trained (the chunk's rows,
    a checkpoint of its end), so that `resume=true` goes on from there."""
    chunk.failed = True
    for event in rest:
        if event.keeps_work and event.due(run, chunk):
            event.handle(run, chunk)
    if run.checkpoints.latest() == run.done:
        log.error("failed after update %d, checkpoint saved: continue with resume=true "
                  "hydra.run.dir=%s", run.done, run.run_dir)


class _StopRequest:
    """Ctrl-C asks the run to stop at the next chunk boundary; a second one exits at once."""

    def __init__(self):
        self.requested = False

    def __enter__(self):
        self._previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def _handle(self, signum, frame):
        self.requested = True
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        log.warning("interrupted: stopping after this chunk (Ctrl-C again to exit at once)")

    def __exit__(self, *exc):
        signal.signal(signal.SIGINT, self._previous)


def run(config: Config, run_dir: Path) -> Dict:
    """Trains `config` in `run_dir`: metrics.jsonl, summary.json, checkpoints/, TensorBoard
    events and learning_curve.png; returns the summary. Raises JobFailed after a non-finite
    update and exits 130 after Ctrl-C, keeping what was good."""
    import jax

    from purerl.checkpoint import BEST, CHECKPOINTS, Checkpoints
    from purerl.learner import nonfinite_names
    from purerl.program import make_program
    from purerl.sweep import is_sweep

    use_compile_cache(config.compile_cache)
    num_updates = config.num_updates
    program = make_program(config, chunk=max(1, math.ceil(num_updates / CHUNKS)))
    checkpoints = Checkpoints(run_dir / CHECKPOINTS, keep=config.checkpoint.keep)
    resume_from = _open_run_dir(config, run_dir, checkpoints, program.num_devices)
    key = jax.random.key(config.seed)
    init_params = None
    if config.init_from:
        init_params = _params_from(Path(config.init_from),
                                   jax.eval_shape(program.init, key).params, config.init_member)
    points = len(config.sweep.grid())
    log.info("%s: %s%d seed(s) x %d envs on %d device(s), %d updates of %d steps",
             config.env.name, f"{points} grid point(s) x " if is_sweep(config) else "",
             config.num_seeds, config.env.num_envs, program.num_devices, num_updates,
             config.batch_size)

    programs = _programs_for(config, program, key)
    gc.enable()  # off from the command line's start until now: see main
    best = Checkpoints(run_dir / CHECKPOINTS / BEST, keep=1) if config.checkpoint.best else None
    active = Run(config, run_dir, programs, program.num_devices, key, checkpoints, best)
    try:
        _open_or_resume(active, resume_from, init_params)
        _open_sinks(active, resumed=resume_from is not None)
        _train(active, default_events(config, nonfinite_names), program.chunk)
    finally:
        _close(active)
    return _finish(active)


def _finish(run: Run) -> Dict:
    """The final plot and summary.json; raises JobFailed after a non-finite update, exits 130
    when interrupted; returns the summary."""
    from purerl import logging as sinks
    from purerl.checkpoint import CHECKPOINTS, Checkpoints
    from purerl.distributed import writes_files

    summary = _summary(run)
    if writes_files():
        _plot(run)
        sinks.write_summary(run.run_dir, summary)
    if run.status == "nonfinite":
        kept = Checkpoints(run.run_dir / CHECKPOINTS).latest()
        raise JobFailed(f"{run.failure}: stopped; metrics.jsonl keeps updates 1-{run.done}"
                        + (f", checkpoints/{kept} is the last good checkpoint" if kept else ""),
                        code=1)
    if run.status == "interrupted":
        log.warning("stopped at update %d of %d; checkpoint saved: continue with resume=true "
                    "hydra.run.dir=%s", run.done, run.config.num_updates, run.run_dir)
        sys.exit(130)
    log.info("final return %s | eval %s | compile %.1f s | train %.1f s | %s steps/s",
             summary["final_return"], summary["eval_return"], summary["compile_s"], run.train_s,
             f"{summary['sps']:,.0f}")
    if "best" in summary:
        from purerl.sweep import point_label

        best = summary["best"]
        log.info("best of %d %sgrid points: %s, final return %s (seeds: %s)",
                 len(summary["combinations"]), "starting " if "pbt" in summary else "",
                 point_label(best["hparams"]),
                 best["final_return"], best["final_return_per_seed"])
    return summary


def _plot(run: Run) -> None:
    import numpy as np

    from purerl.logging import plot_learning_curve
    from purerl.sweep import is_sweep, point_labels

    history, config = run.history, run.config
    plot_learning_curve(run.run_dir / "learning_curve.png",
                        np.arange(1, history.num_updates + 1) * config.batch_size,
                        history.returns(), history.eval_points(), title=config.env.name,
                        groups=point_labels(config) if is_sweep(config) else None)


def _summary(run: Run) -> Dict:
    """summary.json of the run (`sps`: env steps of all members per second of training); a
    sweep's has its members, grid points (`combinations`) and `best` too."""
    import jax
    import numpy as np

    from purerl.logging import json_number
    from purerl.sweep import is_sweep, summary_sections

    config, history = run.config, run.history
    finals = history.final_returns()
    per_seed = [None if r is None else json_number(r) for r in finals]
    finite = [r for r in finals if r is not None]
    summary = {
        "env": config.env.name,
        "status": run.status,
        "num_seeds": config.num_seeds,
        "devices": run.num_devices,
        "processes": jax.process_count(),
        "updates": history.num_updates,
        "env_steps": history.num_updates * config.batch_size,
        "final_return": json_number(float(np.mean(finite))) if finite else None,
        "final_return_per_seed": per_seed,
        "eval_return": history.evals[-1]["returns"] if history.evals else None,
        "compile_s": round(run.programs.compile_s, 3),
        "train_s": round(run.train_s, 3),
        "sps": round(run.sps(), 1),
    }
    if is_sweep(config) or config.pbt.every:
        last = history.evals[-1] if history.evals else {}
        rows = _pbt_rows(run.run_dir) if config.pbt.every else []
        evolved = rows[-1]["hparams"] if rows else None
        summary["num_members"] = config.num_members
        summary.update(summary_sections(config, finals, last.get("per_member"), evolved))
        if config.pbt.every:
            summary["pbt"] = {"generations": len(rows), "hparams": evolved}
    return summary


@hydra.main(config_path=str(config_dir()), config_name="config", version_base="1.3")
def _hydra_main(cfg: DictConfig) -> Optional[float]:
    import jax

    from purerl.distributed import exit_lost_peer, lost_peer

    run_dir = Path(HydraConfig.get().runtime.output_dir)
    try:
        config = load_config(cfg)
        join_processes(config)
        check_same_run_dir(run_dir)
        check_devices(config, jax.device_count())
        summary = run(config, run_dir)
        return summary["best"]["final_return"] if "best" in summary else summary["final_return"]
    except ConfigError as error:
        return _job_failed(str(error), 2, run_dir)
    except JobFailed as failure:
        return _job_failed(str(failure), failure.code, run_dir)
    except Exception as error:
        if not lost_peer(error):
            raise
        exit_lost_peer(error, run_dir)


def main() -> None:
    # Python's cyclic garbage collector is off until the first job's programs are compiled:
    # the start (imports, configuration, tracing and lowering) makes some 250,000 objects
    # that live as long as the run, and every full collection scans them all (0.1-0.2 s each
    # on a 2-core CPU, several of them while JAX imports and traces).
    gc.disable()
    try:
        preflight(sys.argv[1:])
        sys.argv[1:] = normalize_argv(sys.argv[1:]) + _quiet_hydra_beside_process_0()
        _hydra_main()
    except ConfigError as error:
        _fail(error)
    except KeyboardInterrupt:  # before the loop's handler (compiling) or a second Ctrl-C
        print("purerl: interrupted", file=sys.stderr)
        sys.exit(130)
    if FAILED_JOBS:  # of a sweep, which went on
        for line in FAILED_JOBS:
            print(f"purerl: error: {line}", file=sys.stderr)
        sys.exit(1)
    _exit_without_teardown()


def _exit_without_teardown() -> None:
    """Ends the process after a completed command, its files written and closed: the exit
    handlers run (logging's flush among them), but not the interpreter's teardown of the
    modules of JAX, gymnax and the rest (about a second)."""
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
