"""Command line: `python -m purerl.train +env=cartpole [key=value ...]`.

`--help` lists every setting and preset, `--version` prints the version.

Settings are checked before anything compiles (`purerl.cli.preflight`): first every setting, before
JAX is imported, then the device count and the environments; a bad one prints a one-line error
and exits 2. Each job (one, or a Hydra sweep's) then trains with `purerl.run` in Hydra's output
directory. Exit codes: 0 done (or stopped by an event such as `stop_at_return`), 1 a
non-finite update, a failed write (a full disk, a read-only directory; what was written before
stays valid) or a failed sweep job, 2 a bad setting or a run directory another run holds, and
after a stop signal, once the chunk in flight and its checkpoint are written, 128 + the
signal's number: 130 Ctrl-C (SIGINT), 143 SIGTERM, 138 SIGUSR1. `resume=auto` then continues
the run.
"""

from __future__ import annotations

import atexit
import gc
import logging
import os
import signal
import sys
from pathlib import Path
from typing import List, Optional

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from purerl.cli.preflight import load_config, normalize_argv, preflight
from purerl.cli.settings_help import help_text
from purerl.config import ConfigError, config_dir
from purerl.parallel.runtime import check_same_run_dir, join_processes
from purerl.runs.program_cache import ProgramCache
from purerl.storage.write_errors import WriteError
from purerl.validation import check_devices
from purerl.version import __version__

log = logging.getLogger("purerl")
logging.getLogger("absl").setLevel(logging.WARNING)  # orbax logs every file it writes

# The jobs of this command's sweep (Hydra's -m) that failed: one line each, said at its end.
FAILED_JOBS: List[str] = []


def _job(cfg: DictConfig, cache: ProgramCache) -> Optional[float]:
    """One Hydra job: the run of `cfg` in Hydra's output directory. Returns what a sweeper
    optimizes: the final return (a sweep's best grid point's), None for a failed job."""
    # JAX and the run (1 s): Hydra's job starts after preflight checked every setting
    import jax

    from purerl.parallel.distributed import exit_lost_peer, lost_peer
    from purerl.runs.runner import run
    from purerl.runs.signals import exit_code_of

    run_dir = Path(HydraConfig.get().runtime.output_dir)
    try:
        config = load_config(cfg)
        join_processes(config)
        check_same_run_dir(run_dir)
        check_devices(config, jax.device_count())
        summary = run(config, run_dir, cache=cache)
    except ConfigError as error:
        return _job_failed(str(error), 2, run_dir)
    except WriteError as error:  # what the run wrote before it stays; nothing more can be
        _exit_at_once(f"purerl: error: {error}", 1)
    except Exception as error:
        if not lost_peer(error):
            raise
        exit_lost_peer(error, run_dir)
    if summary["status"] == "nonfinite":
        return _job_failed(summary["error"], 1, run_dir)
    if "signal" in summary:
        sys.exit(exit_code_of(signal.Signals[summary["signal"]]))
    return summary["best"]["final_return"] if "best" in summary else summary["final_return"]


def _job_failed(message: str, code: int, run_dir: Path) -> None:
    """A failed job: alone, the process exits with `code`; in a sweep it is logged, written to
    its summary.json when the run wrote none, and said again at the sweep's end (exit 1), and
    the sweep goes on, its sweeper getting None (Optuna's sweeper: a failed trial; NaN would
    make it raise)."""
    hydra_config = HydraConfig.get()
    if hydra_config.mode != RunMode.MULTIRUN:
        _fail(message, code)
    log.error("%s", message)
    if not (run_dir / "summary.json").exists():
        from purerl.logging.sinks import write_summary  # numpy (50 ms): for a failed job only

        write_summary(run_dir, {"status": "invalid", "error": message})
    overrides = " ".join(hydra_config.overrides.task)
    FAILED_JOBS.append(f"job #{hydra_config.job.num} ({overrides}) failed: {message}")
    return None


def _exit_at_once(line: str, code: int) -> None:
    """Ends the process with `line` and `code`, without the exit handlers and teardown (a
    failed write's library threads would still be writing there)."""
    print(line, file=sys.stderr, flush=True)
    sys.stdout.flush()
    os._exit(code)


def _fail(error, code: int = 2) -> None:
    print(f"purerl: error: {error}", file=sys.stderr)
    sys.exit(code)


def _quiet_hydra_beside_process_0() -> List[str]:
    """Hydra overrides for the processes of a multi-process run but process 0: no `.hydra/`
    config copy and no log file in the run directory, which process 0 writes."""
    if "jax" not in sys.modules:  # preflight returned early (--help, --cfg, ...)
        return []
    # JAX (0.5 s): only where preflight imported it
    import jax

    if not jax.distributed.is_initialized() or jax.process_index() == 0:
        return []
    return ["hydra.output_subdir=null", "hydra/job_logging=disabled",
            "hydra/hydra_logging=disabled"]


def _answer_flags(argv: List[str]) -> None:
    """`--help` (`-h`) prints purerl's settings and presets, `--version` its version; either
    exits 0 before Hydra runs (Hydra's own help: `--hydra-help`)."""
    if "--help" in argv or "-h" in argv:

        print(help_text(), end="")
        sys.exit(0)
    if "--version" in argv:

        print(f"purerl {__version__}")
        sys.exit(0)


def main() -> None:
    """`python -m purerl.train`: the command line's `--version`, then Hydra's jobs."""
    _answer_flags(sys.argv[1:])
    # Python's cyclic garbage collector is off until the first job's programs are compiled:
    # the start (imports, configuration, tracing and lowering) makes some 250,000 objects
    # that live as long as the run, and every full collection scans them all (0.1-0.2 s each
    # on a 2-core CPU, several of them while JAX imports and traces).
    gc.disable()
    logging.raiseExceptions = False  # a log file on a full disk: its handler stays quiet
    cache = ProgramCache(on_compiled=gc.enable)  # the jobs of a sweep share compiled programs

    @hydra.main(config_path=str(config_dir()), config_name="config", version_base="1.3")
    def hydra_job(cfg: DictConfig) -> Optional[float]:
        return _job(cfg, cache)

    try:
        preflight(sys.argv[1:])
        sys.argv[1:] = normalize_argv(sys.argv[1:]) + _quiet_hydra_beside_process_0()
        hydra_job()
    except ConfigError as error:
        _fail(error)
    except WriteError as error:  # the run directory (preflight)
        _fail(error, 1)
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
