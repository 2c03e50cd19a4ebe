"""A run, in steps: compile its programs; open or resume its directory; then chunks of updates,
and after each chunk the events that are due (evaluate, log, checkpoint, ...); last the
summary. `run` is what the command line calls, and what a Python program calls to train with
events of its own.
"""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import jax
import numpy as np

from purerl.config import Config, ConfigError
from purerl.logging.history import RunHistory
from purerl.logging.progress import ProgressBar, console_log
from purerl.logging.sinks import (
    MetricsLog,
    TensorBoardSink,
    WandbSink,
    keep_rows_until,
    metrics_rows,
    write_summary,
)
from purerl.parallel.distributed import process_max, to_host, writes_files
from purerl.parallel.program import make_program
from purerl.parallel.runtime import use_compile_cache
from purerl.plan import plan_name
from purerl.plugins import load_callable
from purerl.reports.sweep import is_sweep, per_point_rows, point_label
from purerl.runs.builtin_events import PBT_LOG, default_events, plot_learning_curve
from purerl.runs.events import Chunk, Event, Run
from purerl.runs.program_cache import ProgramCache
from purerl.runs.run_dir import lock_run_dir, params_from, resume_point
from purerl.runs.signals import StopSignals
from purerl.runs.summary import run_summary
from purerl.storage.checkpoint import BEST, CHECKPOINTS, Checkpoints
from purerl.storage.write_errors import write_error, writes_to

log = logging.getLogger("purerl")
CHUNKS = 50  # at least about this many chunks per run: the progress bar's refresh
FIRST_CHUNK = 1  # updates in a run's first chunk, which measures how long an update takes


def run(config: Config, run_dir, events: Sequence[Event] = (), *,
        cache: Optional[ProgramCache] = None, console: bool = True, **given) -> Dict:
    """Trains `config` in `run_dir`: what `python -m purerl.train` runs.

    Compiles the programs, opens or resumes the run directory, then runs chunks of updates
    with the events between them, and writes metrics.jsonl, summary.json, checkpoints/,
    TensorBoard events and learning_curve.png there. It never ends the process: Ctrl-C and
    SIGTERM / SIGUSR1 end the run after the chunk in flight (at most about `chunk_s`
    seconds of training) and its checkpoint.

    Args:
        config: the run's settings (checked with `validate`).
        run_dir: the run directory, a path; with `config.resume`, the run to continue.
        events: `Event`s of the caller's, run between chunks after the evaluation and before
            the log, in order, after those that the `events` setting names.
        cache: compiled programs of earlier runs to reuse (a sweep's jobs); default: none.
        console: show the run's log lines on stderr as the command line does (the start,
            progress lines, warnings, the final return) where logging is not set up (no
            handler on the "purerl" logger or the root); False leaves logging alone. The
            progress bar follows `log.progress`.
        **given: `algorithm`, `network`, `loss_terms` and `optimizer`, as `make_program`
            takes them (`load(run_dir, network=...)` then loads a network given here).

    Returns:
        The summary, summary.json's content as a dict. Its `status` says how the run ended:
            "completed"; "stopped" (an event asked, `stopped_by` names it); "interrupted"
            (Ctrl-C) or "preempted" (SIGTERM, SIGUSR1), each after the chunk in flight and its
            checkpoint; or "nonfinite" (the NaN guard; `error` says what and where, and what
            was kept).

    Raises:
        ConfigError: before anything compiles, when a setting does not fit (`resume` and
            `init_from` included), a user's network has other shapes than purerl needs, a
            `pkg.module:name` setting does not import, or another run holds `run_dir`.
        purerl.storage.write_errors.WriteError: a write failed (full disk, read-only or vanished
            directory, permission); what was written before stays valid.
    """
    events = [*load_events(config.events), *events]
    run_dir = Path(run_dir)
    with console_log(console), writes_to(run_dir), lock_run_dir(run_dir):
        return _run(config, run_dir, events, cache, given)


def load_events(names: Sequence[str]) -> List[Event]:
    """The events that the `events` setting names, each its class called with no arguments.

    Args:
        names: `pkg.module:Cls` each, `Cls()` a `purerl.Event` (a zero-argument factory
            returning one will do).

    Returns:
        The events, in order. Raises ConfigError when one does not import, cannot be made
            without arguments, or is not an `Event`.
    """
    events = []
    for name in names:
        made = load_callable("events", name)
        try:
            event = made()
        except Exception as error:
            raise ConfigError(f"events={name}: {name.partition(':')[2]}() failed: "
                              f"{' '.join(str(error).split())}") from None
        if not isinstance(event, Event):
            raise ConfigError(f"events={name}: {name.partition(':')[2]}() made a "
                              f"{type(event).__name__}, not a purerl.Event")
        events.append(event)
    return events


def _run(config: Config, run_dir: Path, events: Sequence[Event], cache: Optional[ProgramCache],
         given: Dict) -> Dict:
    """`run` in `run_dir`, which this process holds."""
    use_compile_cache(config.compile_cache)
    num_updates = config.num_updates
    program = make_program(config, chunk=max(1, math.ceil(num_updates / CHUNKS)), **given)
    checkpoints = Checkpoints(run_dir / CHECKPOINTS, keep=config.checkpoint.keep, owner=True)
    plan = plan_name(program.plan)
    resume_from = resume_point(config, run_dir, checkpoints, program.num_devices, plan)
    key = jax.random.key(config.seed)
    init_params = None
    if config.init_from:
        init_params = params_from(Path(config.init_from),
                                  jax.eval_shape(program.init, key).params, config.init_member)
    points = len(config.sweep.grid())
    log.info("%s: %s%d seed(s) x %d envs on %d device(s), %d updates of %d steps",
             config.env.name, f"{points} grid point(s) x " if is_sweep(config) else "",
             config.num_seeds, config.env.num_envs, program.num_devices, num_updates,
             config.batch_size)

    programs = (ProgramCache(keep=1) if cache is None else cache).programs_for(
        config, program, key)
    best = (Checkpoints(run_dir / CHECKPOINTS / BEST, keep=1, owner=True)
            if config.checkpoint.best else None)
    active = Run(config, run_dir, programs, program.num_devices, key, checkpoints, best,
                 plan=plan)
    try:
        _open_or_resume(active, resume_from, init_params, program.hyperparams)
        _open_sinks(active, resumed=resume_from is not None)
        _train(active, default_events(config, events), program.chunk)
    finally:
        _close(active)
    return _finish(active)


def _open_or_resume(run: Run, resume_from: Optional[int], init_params, hyperparams) -> None:
    """Sets the run's first state: the init program's, resumed from checkpoint `resume_from`
    (with its history and metrics.jsonl up to there), or starting from `init_params`, the
    members' base `hyperparams` `[M]` (`Program.hyperparams`)."""
    run.state = run.programs.init(run.key, hyperparams)
    run.history = RunHistory(run.config.num_members)
    if resume_from is not None:
        resume_from, run.state, saved = run.checkpoints.restore_intact(resume_from, run.state)
        run.history, run.update = RunHistory.from_record(saved["history"]), resume_from
        if writes_files():
            for name in ("metrics.jsonl", PBT_LOG):
                keep_rows_until(run.run_dir / name, run.update)
        if run.best is not None:
            run.best.delete_after(run.update)  # a best found after the checkpoint is found again
        log.info("resumed from the checkpoint of update %d", run.update)
    else:
        if writes_files():
            for name in ("metrics.jsonl", PBT_LOG):
                (run.run_dir / name).unlink(missing_ok=True)
        if init_params is not None:
            run.state = run.state._replace(params=jax.tree.map(
                lambda new, old: jax.device_put(new, old.sharding), init_params, run.state.params))
            log.info("network params from %s", run.config.init_from)
    run.first_update = run.update


def _open_sinks(run: Run, resumed: bool) -> None:
    """The metrics writers (metrics.jsonl, TensorBoard, W&B) and the progress bar."""
    config = run.config
    run.bar = ProgressBar(config.num_updates * config.batch_size,
                                config.log.progress and writes_files(), initial=run.env_steps)
    if not writes_files():  # process 0 writes for the run
        return
    run.writers = [MetricsLog(run.run_dir)]
    if config.log.tensorboard:
        run.writers.append(TensorBoardSink(
            run.run_dir, purge_step=run.env_steps + 1 if resumed else None))
    if config.log.wandb:
        run.writers.append(WandbSink(config, run.run_dir))


def _close(run: Run) -> None:
    if run.bar is not None:
        run.bar.close()
    for writer in run.writers:
        writer.close()
    run.checkpoints.close()
    if run.best is not None:
        run.best.close()


def _next_stop(run: Run, events: List[Event], chunk: int) -> int:
    """Updates in the next chunk: at most `chunk`, ending on the next periodic event's update
    and at the end of the run."""
    stops = [run.config.num_updates]
    stops += [(run.update // e.every + 1) * e.every for e in events if e.every > 0]
    return min(chunk, min(stops) - run.update)


def chunk_updates(updates: int, seconds: float, chunk_s: float, room: int) -> int:
    """Updates in the next chunk: as many as fit in `chunk_s` seconds at the pace of the last
    chunk (`updates` in `seconds`), at least 1 and at most `room`.

    Args:
        updates: the updates the last chunk ran.
        seconds: the time they took in this process.
        chunk_s: the `chunk_s` setting.
        room: the most updates a chunk holds (the compiled chunk program's).

    Returns:
        The next chunk's number of updates, before the events' stops (`_next_stop`).
    """
    if seconds <= 0:
        return room
    return max(1, min(room, int(chunk_s * updates / seconds)))


def _train(run: Run, events: List[Event], room: int) -> None:
    """Chunks of updates until the run ends or an event ends it; after each, the events that
    are due, in order (`_handle`). The first chunk runs `FIRST_CHUNK` updates; each one after
    as many as fit in `chunk_s` seconds at the last one's pace (fewer when a time-based
    checkpoint falls due sooner), at most `room`, so that stop signals are answered within
    about `chunk_s` and time-based checkpoints within about one update of their time."""
    run.last_checkpoint = time.monotonic()
    size = min(room, FIRST_CHUNK)
    with StopSignals() as signals:
        while run.update < run.config.num_updates and run.status == "completed":
            chunk, size = _run_chunk(run, _next_stop(run, events, size), signals, room)
            _handle(run, events, chunk)


def chunk_time_budget(config: Config, since_checkpoint: float, due: bool) -> float:
    """How long the next chunk may train: `chunk_s`, or less when a time-based checkpoint
    falls due sooner (`checkpoint.every_s` after the last one; when one is due after this
    chunk, after that one).

    Args:
        config: the run's settings (`chunk_s`, `checkpoint.every_s`).
        since_checkpoint: seconds since the last checkpoint (or the start).
        due: a time-based checkpoint is due after this chunk.

    Returns:
        The next chunk's seconds of training, for `chunk_updates`.
    """
    every_s = config.checkpoint.every_s
    if every_s <= 0:
        return config.chunk_s
    return min(config.chunk_s, every_s if due else every_s - since_checkpoint)


def _handle(run: Run, events: List[Event], chunk: Chunk) -> None:
    """The chunk's events, each when due, until one ends the run (the NaN guard, Ctrl-C).
    After an event's `request_stop`, the earlier events not handled that are due at the run's
    end run first (the final evaluation), then the rest. An event that raises ends the run,
    in a single process once what trained is kept (`_keep_work`; a checkpoint is a
    collective, and with several processes the others may not be at this event)."""
    handled = set()
    for position, event in enumerate(events):
        if run.status not in ("completed", "stopped"):
            break
        stopping = run.stopped_by is not None
        if event.due(run, chunk):
            try:
                event.handle(run, chunk)
            except Exception as error:
                if jax.process_count() == 1:  # else the others are not here to save
                    _keep_work(run, chunk, events[position + 1:], error)
                raise
            handled.add(position)
        if run.stopped_by is not None and not stopping:  # this event ended the run
            for i, earlier in enumerate(events[:position]):
                if i not in handled and earlier.due(run, chunk):
                    earlier.handle(run, chunk)


def _keep_work(run: Run, chunk: Chunk, rest: List[Event], error: Exception) -> None:
    """After an event raised `error`: the events of `rest` that keep what trained (the chunk's
    rows, a checkpoint of its end), so that `resume=auto` goes on from there; none after a
    failed write."""
    if write_error(error, run.run_dir) is not None:
        return  # the chunk's rows may be cut short: the last checkpoint stays the newest
    chunk.failed = True
    for event in rest:
        if event.keeps_work and event.due(run, chunk):
            event.handle(run, chunk)
    if run.checkpoints.latest() == run.update:
        log.error("failed after update %d, checkpoint saved: continue with resume=auto "
                  "hydra.run.dir=%s", run.update, run.run_dir)


def _run_chunk(run: Run, num: int, signals: StopSignals, room: int) -> Tuple[Chunk, int]:
    """Runs `num` updates and keeps those before the first non-finite one (the NaN guard);
    the chunk says whether a stop signal came and a checkpoint is due by the clock. Returns
    the chunk and the next chunk's updates (at most `room`, `chunk_updates` at this chunk's
    pace), each decided alike in every process."""
    tick = time.perf_counter()
    state, metrics = run.programs.run_chunk(run.state, np.int32(num))
    metrics = jax.tree.map(lambda x: np.asarray(x)[:, :num], to_host(metrics))
    seconds = time.perf_counter() - tick
    run.train_s += seconds
    every_s = run.config.checkpoint.every_s
    since_checkpoint = time.monotonic() - run.last_checkpoint
    due = every_s > 0 and since_checkpoint >= every_s
    budget = chunk_time_budget(run.config, since_checkpoint, due)
    fits = chunk_updates(num, seconds, budget, room)
    # Every process stops and saves at the same chunk, and runs as many updates next as the
    # one that fits the fewest
    stop_signal, checkpoint_due, fewest = process_max([signals.received or 0, due, -fits])
    flags = np.bitwise_or.reduce(metrics.nonfinite, axis=0)  # [num], over seeds
    good = int(np.argmax(flags != 0)) if flags.any() else num
    metrics = jax.tree.map(lambda x: x[:, :good], metrics)
    rows = metrics_rows(metrics, run.update + 1, run.config.batch_size)
    if is_sweep(run.config):
        for row, points in zip(rows, per_point_rows(metrics.episode_return_sum,
                                                    metrics.episode_count, run.config.num_seeds)):
            row.update(points)
    chunk = Chunk(run.update, rows, stop_signal, int(flags[good]) if good < num else 0,
                  checkpoint_due=bool(checkpoint_due))
    run.history.extend(metrics)
    run.state, run.update = state, run.update + good
    return chunk, -fewest


def _finish(run: Run) -> Dict:
    """The final plot and summary.json, and the run's last log lines; returns the summary."""
    if run.status == "nonfinite":
        kept = Checkpoints(run.run_dir / CHECKPOINTS).latest()
        run.failure = (f"{run.failure}: stopped; metrics.jsonl keeps updates 1-{run.update}"
                       + (f", checkpoints/{kept} is the last good checkpoint" if kept else ""))
    summary = run_summary(run)
    if writes_files():
        plot_learning_curve(run)
        write_summary(run.run_dir, summary)
    if run.status in ("interrupted", "preempted"):
        log.warning("stopped at update %d of %d; checkpoint saved: continue with resume=auto "
                    "hydra.run.dir=%s", run.update, run.config.num_updates, run.run_dir)
    if run.status not in ("completed", "stopped"):
        return summary
    log.info("final return %s | eval %s | compile %.1f s | train %.1f s | %s steps/s",
             summary["final_return"], summary["eval_return"], summary["compile_s"],
             run.train_s, f"{summary['sps']:,.0f}")
    if "best" in summary:

        best = summary["best"]
        log.info("best of %d %sgrid points: %s, final return %s (seeds: %s)",
                 len(summary["combinations"]), "starting " if "pbt" in summary else "",
                 point_label(best["hparams"]),
                 best["final_return"], best["final_return_per_seed"])
    return summary
