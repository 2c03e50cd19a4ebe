"""Command line: `python -m purerl.train +env=cartpole [key=value ...]`.

Settings are checked before anything compiles; a bad one prints a one-line error and exits 2.
The run directory (Hydra's output dir) receives `metrics.jsonl` and `summary.json`.
"""

from __future__ import annotations

import difflib
import logging
import math
import signal
import sys
import time
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Dict, List, Optional

import hydra
import numpy as np
from hydra.core.config_store import ConfigStore
from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import (
    ConfigAttributeError, ConfigKeyError, OmegaConfBaseException, ValidationError,
)

from purerl.config import Config, ConfigError, validate

log = logging.getLogger("purerl")
logging.getLogger("absl").setLevel(logging.WARNING)  # orbax logs every file it writes
PROGRESS_LINES = 10  # about this many progress lines per run
CHUNKS = 50  # about this many chunks per run: the progress bar's refresh
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
        keys += _schema_keys(value, f"{prefix}{f.name}.") if is_dataclass(value) else [prefix + f.name]
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


def _override_variants(overrides) -> List[List[str]]:
    """Command lines to check: every value of every sweep, the other sweeps at their first."""
    choices = []
    for o in overrides:
        key = o.get_key_element()
        values = list(o.sweep_string_iterator()) if o.is_sweep_override() else [o.get_value_element_as_str()]
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


def load_config(cfg: DictConfig, num_devices: int) -> Config:
    """The validated `Config` of a composed Hydra config."""
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


def preflight(argv: List[str]) -> None:
    """Composes and validates every job the command line asks for; raises ConfigError."""
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
    job_overrides = [o for o in overrides if not o.key_or_group.startswith("hydra")]

    import jax
    from purerl.envs import check_env, make_env
    from purerl.logging import wandb_missing

    with initialize_config_dir(str(config_dir()), version_base="1.3"):
        for variant in _override_variants(job_overrides):
            try:
                cfg = compose("config", overrides=variant)
            except (HydraException, OmegaConfBaseException) as error:
                raise ConfigError(_explain(error)) from None
            config = load_config(cfg, jax.local_device_count())
            check_env(*make_env(config.env), config)
            if config.log.wandb and wandb_missing():
                raise ConfigError("log.wandb=true but wandb is not installed: pip install wandb, "
                                  "or leave log.wandb=false")


def _fail(error, code: int = 2) -> None:
    print(f"purerl: error: {error}", file=sys.stderr)
    sys.exit(code)


# ---------------------------------------------------------------------------------------------
# The run: compile, then the jitted update in chunks; between chunks log, evaluate, checkpoint.


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


def _due(every: int, done: int, num_updates: int) -> bool:
    """An event every `every` updates (0: only at the end) falls on update `done`."""
    return done == num_updates or (every > 0 and done % every == 0)


def _next_event(config: Config, done: int) -> int:
    """The next update after `done` at which the run must stop to evaluate or checkpoint."""
    events = [config.num_updates]
    for every in (config.eval.every, config.checkpoint.every):
        if every > 0:
            events.append((done // every + 1) * every)
    return min(events)


def _params_from(run_dir: Path, like):
    """The network params (host arrays `[S, ...]`) of another run's final checkpoint,
    shape-checked against `like`, this run's abstract params; raises ConfigError."""
    import jax
    import numpy as np

    from purerl.checkpoint import restore_run

    saved = restore_run(run_dir)
    source, params = saved.config, saved.state.params
    num_seeds = jax.tree.leaves(like)[0].shape[0]
    if source.num_seeds not in (1, num_seeds):
        raise ConfigError(f"init_from={run_dir}: it has {source.num_seeds} seeds, this run "
                          f"{num_seeds}; use 1 or {num_seeds}")
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


def run(config: Config, run_dir: Path) -> Dict:
    """Trains `config` in `run_dir`: metrics.jsonl, summary.json, checkpoints/, TensorBoard
    events and learning_curve.png; returns the summary. Exits 1 after a non-finite update and
    130 after Ctrl-C, keeping what was good."""
    import jax
    import jax.numpy as jnp

    from purerl import logging as sinks
    from purerl.checkpoint import BEST, CHECKPOINTS, Checkpoints, config_record
    from purerl.envs import make_env
    from purerl.evaluation import make_evaluator
    from purerl.learner import nonfinite_names
    from purerl.program import make_program

    num_updates, batch_size = config.num_updates, config.batch_size
    program = make_program(config, chunk=max(1, math.ceil(num_updates / CHUNKS)))
    checkpoints = Checkpoints(run_dir / CHECKPOINTS, keep=config.checkpoint.keep)
    resume_from = _open_run_dir(config, run_dir, checkpoints, program.num_devices)
    key = jax.random.key(config.seed)
    init_params = None
    if config.init_from:
        init_params = _params_from(Path(config.init_from),
                                   jax.eval_shape(program.init, key).params)
    log.info("%s: %d seed(s) x %d envs on %d device(s), %d updates of %d steps",
             config.env.name, config.num_seeds, config.env.num_envs, program.num_devices,
             num_updates, batch_size)

    start = time.perf_counter()
    state = jax.jit(program.init)(key)
    run_chunk = jax.jit(program.run, donate_argnums=0).lower(
        state, jnp.int32(program.chunk)).compile()
    env, env_params = make_env(config.env)
    eval_keys = jax.random.split(key, config.num_seeds)
    evaluate = jax.jit(jax.vmap(make_evaluator(config, env, env_params).evaluate)).lower(
        state.params, state.normalizer.obs, eval_keys).compile()
    compile_s = time.perf_counter() - start
    log.info("compiled in %.1f s", compile_s)

    best = Checkpoints(run_dir / CHECKPOINTS / BEST, keep=1) if config.checkpoint.best else None
    history, done = sinks.RunHistory(config.num_seeds), 0
    if resume_from is not None:
        state, saved = checkpoints.restore(resume_from, state)
        history, done = sinks.RunHistory.from_record(saved["history"]), resume_from
        sinks.keep_metrics_until(run_dir, done)
        if best is not None:
            best.delete_after(done)  # a best found after the checkpoint is found again
        log.info("resumed from the checkpoint of update %d", done)
    else:
        (run_dir / "metrics.jsonl").unlink(missing_ok=True)
        if init_params is not None:
            state = state._replace(params=jax.tree.map(
                lambda new, old: jax.device_put(new, old.sharding), init_params, state.params))
            log.info("network params from %s", config.init_from)

    def record() -> Dict:
        return {"config": config_record(config), "devices": program.num_devices,
                "update": done, "history": history.to_record()}

    def run_evaluation() -> Dict[str, float]:
        eval_key = jax.random.fold_in(jax.random.fold_in(key, EVAL_STREAM), done)
        result = evaluate(state.params, state.normalizer.obs,
                          jax.random.split(eval_key, config.num_seeds))
        means = np.asarray(result.episode_return).mean(axis=0)  # over seeds
        returns = {str(float(t)): sinks.json_number(v)
                   for t, v in zip(config.eval.temperatures, means)}
        previous_best = history.best_eval()
        history.evals.append({"update": done, "env_steps": done * batch_size, "returns": returns})
        if best is not None and history.best_eval() != previous_best:
            best.save(done, state, record())
        return returns

    writers = [sinks.MetricsLog(run_dir)]
    if config.log.tensorboard:
        writers.append(sinks.TensorBoardSink(run_dir, purge_step=(
            done * batch_size + 1 if resume_from is not None else None)))
    if config.log.wandb:
        writers.append(sinks.WandbSink(config, run_dir))
    bar = sinks.ProgressBar(num_updates * batch_size, config.log.progress,
                            initial=done * batch_size)
    status, failure, train_s, first_update = "completed", "", 0.0, done
    line_every = math.ceil(num_updates / PROGRESS_LINES)
    with _StopRequest() as stop:
        try:
            while done < num_updates:
                num = min(program.chunk, _next_event(config, done) - done)
                tick = time.perf_counter()
                state, metrics = run_chunk(state, jnp.int32(num))
                metrics = jax.tree.map(lambda x: np.asarray(x)[:, :num], jax.device_get(metrics))
                train_s += time.perf_counter() - tick
                stopping = stop.requested  # read once: the save and the break must agree
                flags = np.bitwise_or.reduce(metrics.nonfinite, axis=0)  # [num], over seeds
                good = int(np.argmax(flags != 0)) if flags.any() else num
                metrics = jax.tree.map(lambda x: x[:, :good], metrics)
                rows = sinks.metrics_rows(metrics, done + 1, batch_size)
                history.extend(metrics)
                previous, done = done, done + good
                if good < num:
                    status = "nonfinite"
                    failure = (f"non-finite {', '.join(nonfinite_names(int(flags[good])))} at "
                               f"update {done + 1}")
                evaluated = status != "nonfinite" and _due(config.eval.every, done, num_updates)
                if evaluated:
                    rows[-1].update({sinks.eval_key(t): v for t, v in run_evaluation().items()})
                logged = [r for r in rows if r["update"] % config.log_every == 0
                          or r["update"] == num_updates or (evaluated and r is rows[-1])]
                for writer in writers:
                    writer.write(logged)
                if status == "nonfinite":
                    break
                sps = (done - first_update) * batch_size * config.num_seeds / train_s
                bar.update(done * batch_size, sps, rows[-1]["episode_return"])
                if done // line_every > previous // line_every or done == num_updates:
                    log.info(sinks.progress_line(rows[-1], num_updates, sps))
                if _due(config.checkpoint.every, done, num_updates) or stopping:
                    checkpoints.save(done, state, record())
                if evaluated:
                    _plot(run_dir, config, history)
                if stopping and done < num_updates:
                    status = "interrupted"
                    break
        finally:
            bar.close()
            for writer in writers:
                writer.close()
            checkpoints.close()
            if best is not None:
                best.close()
    _plot(run_dir, config, history)

    summary = _summary(config, history, status, program.num_devices, compile_s, train_s,
                       (done - first_update) * batch_size * config.num_seeds)
    sinks.write_summary(run_dir, summary)
    if status == "nonfinite":
        kept = Checkpoints(run_dir / CHECKPOINTS).latest()
        _fail(f"{failure}: stopped; metrics.jsonl keeps updates 1-{done}"
              + (f", checkpoints/{kept} is the last good checkpoint" if kept else ""), code=1)
    if status == "interrupted":
        log.warning("stopped at update %d of %d; checkpoint saved: continue with resume=true "
                    "hydra.run.dir=%s", done, num_updates, run_dir)
        sys.exit(130)
    log.info("final return %s | eval %s | compile %.1f s | train %.1f s | %s steps/s",
             summary["final_return"], summary["eval_return"], compile_s, train_s,
             f"{summary['sps']:,.0f}")
    return summary


def _plot(run_dir: Path, config: Config, history) -> None:
    from purerl.logging import plot_learning_curve

    plot_learning_curve(run_dir / "learning_curve.png",
                        np.arange(1, history.num_updates + 1) * config.batch_size,
                        history.returns(), history.eval_points(), title=config.env.name)


def _summary(config: Config, history, status: str, num_devices: int, compile_s: float,
             train_s: float, steps_run: int) -> Dict:
    """summary.json: `steps_run` env steps (all seeds) were trained in `train_s` seconds."""
    from purerl.logging import json_number

    finals = history.final_returns()
    per_seed = [None if r is None else json_number(r) for r in finals]
    finite = [r for r in finals if r is not None]
    return {
        "env": config.env.name,
        "status": status,
        "num_seeds": config.num_seeds,
        "devices": num_devices,
        "updates": history.num_updates,
        "env_steps": history.num_updates * config.batch_size,
        "final_return": json_number(float(np.mean(finite))) if finite else None,
        "final_return_per_seed": per_seed,
        "eval_return": history.evals[-1]["returns"] if history.evals else None,
        "compile_s": round(compile_s, 3),
        "train_s": round(train_s, 3),
        "sps": round(steps_run / max(train_s, 1e-9), 1),
    }


@hydra.main(config_path=str(config_dir()), config_name="config", version_base="1.3")
def _hydra_main(cfg: DictConfig) -> Optional[float]:
    import jax

    try:
        config = load_config(cfg, jax.local_device_count())
    except ConfigError as error:
        _fail(error)
    run_dir = Path(HydraConfig.get().runtime.output_dir)
    try:
        return run(config, run_dir)["final_return"]
    except ConfigError as error:
        _fail(error)


def main() -> None:
    try:
        preflight(sys.argv[1:])
        sys.argv[1:] = normalize_argv(sys.argv[1:])
        _hydra_main()
    except ConfigError as error:
        _fail(error)
    except KeyboardInterrupt:  # before the loop's handler (compiling) or a second Ctrl-C
        print("purerl: interrupted", file=sys.stderr)
        sys.exit(130)


if __name__ == "__main__":
    main()
