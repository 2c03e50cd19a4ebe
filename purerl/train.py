"""Command line: `python -m purerl.train +env=cartpole [key=value ...]`.

Settings are checked before anything compiles; a bad one prints a one-line error and exits 2.
The run directory (Hydra's output dir) receives `metrics.jsonl` and `summary.json`.
"""

from __future__ import annotations

import difflib
import logging
import math
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
PROGRESS_LINES = 10  # about this many progress lines per run


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

    with initialize_config_dir(str(config_dir()), version_base="1.3"):
        for variant in _override_variants(job_overrides):
            try:
                cfg = compose("config", overrides=variant)
            except (HydraException, OmegaConfBaseException) as error:
                raise ConfigError(_explain(error)) from None
            config = load_config(cfg, jax.local_device_count())
            check_env(*make_env(config.env), config)


def _fail(error: ConfigError) -> None:
    print(f"purerl: error: {error}", file=sys.stderr)
    sys.exit(2)


# ---------------------------------------------------------------------------------------------
# The run: compile, then the jitted update in chunks, logging between chunks.


def run(config: Config, run_dir: Path) -> Dict:
    """Trains `config`, writing metrics.jsonl and summary.json into `run_dir`; returns the summary."""
    import jax
    import jax.numpy as jnp

    from purerl import logging as sinks
    from purerl.ppo import make_program

    num_updates = config.num_updates
    chunk = max(1, math.ceil(num_updates / PROGRESS_LINES))
    program = make_program(config, chunk=chunk)
    log.info("%s: %d seed(s) x %d envs on %d device(s), %d updates of %d steps",
             config.env.name, config.num_seeds, config.env.num_envs, program.num_devices,
             num_updates, config.batch_size)

    start = time.perf_counter()
    init = jax.jit(program.init).lower(jax.random.key(config.seed)).compile()
    state = init(jax.random.key(config.seed))
    run_chunk = jax.jit(program.run, donate_argnums=0).lower(state, jnp.int32(chunk)).compile()
    compile_s = time.perf_counter() - start
    log.info("compiled in %.1f s", compile_s)

    metrics_log = sinks.MetricsLog(run_dir)
    return_sums, counts = [], []
    train_s, done = 0.0, 0
    try:
        while done < num_updates:
            num = min(chunk, num_updates - done)
            tick = time.perf_counter()
            state, metrics = run_chunk(state, jnp.int32(num))
            metrics = jax.tree.map(lambda x: np.asarray(x)[:, :num], jax.device_get(metrics))
            train_s += time.perf_counter() - tick
            rows = sinks.metrics_rows(metrics, done + 1, config.batch_size)
            done += num
            return_sums.append(metrics.episode_return_sum)
            counts.append(metrics.episode_count)
            metrics_log.write([r for r in rows if r["update"] % config.log_every == 0
                               or r["update"] == num_updates])
            sps = done * config.batch_size * config.num_seeds / train_s
            log.info(sinks.progress_line(rows[-1], num_updates, sps))
    finally:
        metrics_log.close()

    per_seed = sinks.final_returns(np.concatenate(return_sums, 1), np.concatenate(counts, 1))
    finite = [r for r in per_seed if r is not None]
    env_steps = num_updates * config.batch_size
    summary = {
        "env": config.env.name,
        "num_seeds": config.num_seeds,
        "devices": program.num_devices,
        "env_steps": env_steps,
        "final_return": float(np.mean(finite)) if finite else None,
        "final_return_per_seed": per_seed,
        "compile_s": round(compile_s, 3),
        "train_s": round(train_s, 3),
        "sps": round(env_steps * config.num_seeds / train_s, 1),
    }
    sinks.write_summary(run_dir, summary)
    log.info("final return %s | compile %.1f s | train %.1f s | %s steps/s",
             summary["final_return"], compile_s, train_s, f"{summary['sps']:,.0f}")
    return summary


@hydra.main(config_path=str(config_dir()), config_name="config", version_base="1.3")
def _hydra_main(cfg: DictConfig) -> Optional[float]:
    import jax

    try:
        config = load_config(cfg, jax.local_device_count())
    except ConfigError as error:
        _fail(error)
    run_dir = Path(HydraConfig.get().runtime.output_dir)
    return run(config, run_dir)["final_return"]


def main() -> None:
    try:
        preflight(sys.argv[1:])
    except ConfigError as error:
        _fail(error)
    sys.argv[1:] = normalize_argv(sys.argv[1:])
    _hydra_main()


if __name__ == "__main__":
    main()
