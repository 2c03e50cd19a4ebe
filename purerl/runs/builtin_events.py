"""The built-in events between chunks of updates (`purerl.runs.events.Event`): evaluation,
`stop_at_return`, the folded-time-limit check, the log, the NaN guard, progress, PBT
generations, checkpoints, plots and the stop signal; `default_events` puts them in the order
they run.
"""

from __future__ import annotations

import json
import logging
import math
import time
from pathlib import Path
from typing import Callable, Dict, List, Sequence

import jax
import numpy as np

from purerl.algos.learner import nonfinite_names
from purerl.config import Config
from purerl.core.schedules import hyperparam
from purerl.envs import folds_time_limit, make_env
from purerl.logging import plots
from purerl.logging.progress import EARLIER_NOTE, progress_line
from purerl.logging.sinks import eval_key, json_number, per_member_key
from purerl.parallel.distributed import to_host, writes_files
from purerl.parallel.pbt import PBT_STREAM, generation_fitness
from purerl.reports.sweep import is_sweep, point_labels
from purerl.runs.compiling import EVAL_STREAM, eval_keys
from purerl.runs.events import Chunk, Event, Run, periodic
from purerl.runs.signals import status_of

log = logging.getLogger("purerl")
PROGRESS_LINES = 10  # about this many progress lines per run
PBT_LOG = "pbt.jsonl"  # a PBT run's generations: who copied whom, the new hyperparameters
OUTCOMES_PNG = "outcomes.png"  # a multi-agent run's per-agent returns and outcomes, per update


class Evaluate(Event):
    """Evaluation episodes every `eval.every` updates and at the end; keeps the best."""

    def __init__(self, config: Config):
        self.every = config.eval.every

    def due(self, run: Run, chunk: Chunk) -> bool:
        """Whether to evaluate: on every `eval.every`-th update and at the run's end, unless
        the chunk went non-finite or was evaluated already.

        Args:
            run: the run, `run.update` the chunk's last update.
            chunk: the chunk that just ended.

        Returns:
            True to call `handle`.
        """
        return not chunk.nonfinite and not chunk.evaluated and periodic(self.every, run)

    def handle(self, run: Run, chunk: Chunk) -> None:
        """Evaluates every member, records the mean return per temperature in the history and
        the last row (`eval_return/<t>`, and per member), and saves `checkpoints/best/` on a new
        best.

        Args:
            run: the run, `run.update` the chunk's last update.
            chunk: the chunk that just ended.
        """
        config, key = run.config, run.key
        update_key = jax.random.fold_in(jax.random.fold_in(key, EVAL_STREAM), run.update)
        result = run.programs.evaluate(run.state.params, run.state.normalizer.obs,
                                       eval_keys(config, update_key))
        members = np.asarray(to_host(result).episode_return)  # [M, temperatures]
        temperatures = [str(float(t)) for t in config.eval.temperatures]
        returns = {t: json_number(v) for t, v in zip(temperatures, members.mean(axis=0))}
        per_member = {t: [json_number(v) for v in members[:, i]]
                      for i, t in enumerate(temperatures)}
        previous_best = run.history.best_eval()
        entry = {"update": run.update, "env_steps": run.env_steps, "returns": returns}
        if is_sweep(config):
            entry["per_member"] = per_member
        run.history.evals.append(entry)
        if run.best is not None and run.history.best_eval() != previous_best:
            run.best.save(run.update, run.state, run.record())
        chunk.rows[-1].update({eval_key(t): v for t, v in returns.items()})
        chunk.rows[-1].update({per_member_key(eval_key(t)): v for t, v in per_member.items()})
        chunk.evaluated = True


class StopAtReturn(Event):
    """Ends the run once the mean return over the members reaches `threshold` (as
    Stable-Baselines3's `StopTrainingOnRewardThreshold`): with evaluations every `eval.every`
    updates, after the first whose mean return at the first temperature is at least it;
    without, after the first logged update (every `log_every`-th) whose mean episode return
    is (chunks then end on logged updates)."""

    name = "stop_at_return"

    def __init__(self, threshold: float, config: Config):
        self.threshold = threshold
        self.by_evaluation = config.eval.every > 0
        self.every = config.eval.every if self.by_evaluation else config.log_every

    def due(self, run: Run, chunk: Chunk) -> bool:
        """Whether there is a return to compare: after an evaluation, or on a logged update
        without evaluations; never after a non-finite chunk or one with no good update.

        Args:
            run: the run, `run.update` the chunk's last update.
            chunk: the chunk that just ended.

        Returns:
            True to call `handle`.
        """
        return (not chunk.nonfinite and bool(chunk.rows)
                and (chunk.evaluated if self.by_evaluation else run.update % self.every == 0))

    def handle(self, run: Run, chunk: Chunk) -> None:
        """Stops the run when the evaluation's (or the row's) mean return reaches the threshold.

        Args:
            run: the run, `run.update` the chunk's last update.
            chunk: the chunk that just ended.
        """
        if self.by_evaluation:
            value = next(iter(run.history.evals[-1]["returns"].values()))
        else:
            value = chunk.rows[-1]["episode_return"]
        if value is not None and value >= self.threshold:
            log.info("mean return %.4g >= stop_at_return=%g", value, self.threshold)
            run.request_stop(self.name)


class Log(Event):
    """Writes every `log_every`-th row, the last update's and the evaluated one."""

    keeps_work = True

    def handle(self, run: Run, chunk: Chunk) -> None:
        """Writes the chunk's logged rows to each of `run.writers`.

        Args:
            run: the run, `run.update` the chunk's last update.
            chunk: the chunk that just ended.
        """
        config = run.config
        logged = [r for r in chunk.rows if r["update"] % config.log_every == 0
                  or (run.ending and r is chunk.rows[-1])
                  or (chunk.evaluated and r is chunk.rows[-1])]
        for writer in run.writers:
            writer.write(logged)


class NonfiniteGuard(Event):
    """Stops the run after a non-finite update (what came before it is logged and kept);
    `names(bits)` names what was non-finite."""

    def __init__(self, names: Callable[[int], List[str]]):
        self.names = names

    def due(self, run: Run, chunk: Chunk) -> bool:
        """Whether the chunk went non-finite.

        Args:
            run: the run, `run.update` the chunk's last update.
            chunk: the chunk that just ended.

        Returns:
            True to call `handle`.
        """
        return chunk.nonfinite != 0

    def handle(self, run: Run, chunk: Chunk) -> None:
        """Sets the run's status to "nonfinite" and its `failure` to what went non-finite and
        where.

        Args:
            run: the run, `run.update` the chunk's last update.
            chunk: the chunk that just ended.
        """
        run.status = "nonfinite"
        run.failure = (f"non-finite {', '.join(self.names(chunk.nonfinite))} at update "
                       f"{run.update + 1}")


class Progress(Event):
    """The progress bar, and about PROGRESS_LINES progress lines per run in the log."""

    def __init__(self, config: Config):
        self.line_every = math.ceil(config.num_updates / PROGRESS_LINES)
        self.noted = False  # whether the log has said what the earlier-return marker means

    def handle(self, run: Run, chunk: Chunk) -> None:
        """Updates the progress bar, and logs a progress line about every `num_updates / 10`
        updates and at the run's end.

        Args:
            run: the run, `run.update` the chunk's last update.
            chunk: the chunk that just ended.
        """
        sps, latest = run.sps(), chunk.rows[-1]
        own, earlier = latest["episode_return"], run.history.latest_return()
        run.bar.update(run.env_steps, sps, own if own is not None else earlier,
                       earlier=own is None and earlier is not None)
        if (run.update // self.line_every > chunk.previous // self.line_every or run.ending):
            log.info(progress_line(latest, run.config.num_updates, sps, earlier))
            if own is None and earlier is not None and not self.noted:
                log.info(EARLIER_NOTE)
                self.noted = True


class Generation(Event):
    """Population-based training: a generation of exploit and explore every `pbt.every`
    updates (not at the run's end), compiled; its line in pbt.jsonl and pbt.png redrawn."""

    def __init__(self, config: Config):
        self.every = config.pbt.every

    def due(self, run: Run, chunk: Chunk) -> bool:
        """Whether a generation falls on this update (never at the run's end or after a
        non-finite chunk).

        Args:
            run: the run, `run.update` the chunk's last update.
            chunk: the chunk that just ended.

        Returns:
            True to call `handle`.
        """
        return (self.every > 0 and not chunk.nonfinite and run.update % self.every == 0
                and not run.ending)

    def handle(self, run: Run, chunk: Chunk) -> None:
        """Runs the generation's program on `run.state`, appends its row to pbt.jsonl and
        redraws pbt.png.

        Args:
            run: the run, `run.update` the chunk's last update.
            chunk: the chunk that just ended.
        """
        config, history, generation = run.config, run.history, run.update // self.every
        window = slice(run.update - self.every, run.update)
        fitness = generation_fitness(history.return_sum[:, window], history.count[:, window])
        key = jax.random.fold_in(jax.random.fold_in(run.key, PBT_STREAM), generation)
        run.state, source = run.programs.pbt(run.state, fitness, key)
        names = config.pbt.evolving(config.sweep)
        source, hparams = to_host(  # one gather from every process
            (source, {name: hyperparam(run.state.hparams, name) for name in names}))
        row = generation_row(run.update, generation, fitness, np.asarray(source), hparams, names)
        if writes_files():
            with (run.run_dir / PBT_LOG).open("a") as file:
                file.write(json.dumps(row) + "\n")
            plots.plot_pbt(run.run_dir / "pbt.png", pbt_rows(run.run_dir), names,
                     title=config.env.name)
        log.info("generation %d at update %d: %d member(s) copied others", generation,
                 run.update, len(row["copies"]))


def generation_row(update: int, generation: int, fitness: np.ndarray, source: np.ndarray,
                   hparams: Dict[str, np.ndarray], names: List[str]) -> Dict:
    """pbt.jsonl's line of a generation: who copied whom and every member's evolving
    hyperparameters after it.

    Args:
        update: the update the generation ran after.
        generation: the generation's number.
        fitness: float `[M]`, each member's fitness (`generation_fitness`).
        source: int `[M]`, the member each one copied (itself when kept).
        hparams: each name's values `[M]` after the generation.
        names: the evolving hyperparameters to write.

    Returns:
        The row: `update`, `generation`, `fitness` (null where not finite, `json_number`),
            `copies` (`{"member", "from"}` of the replaced members only) and `hparams`.
    """
    copies = [{"member": m, "from": int(s)} for m, s in enumerate(source) if s != m]
    return {
        "update": update, "generation": generation,
        "fitness": [json_number(float(f)) for f in fitness],
        "copies": copies,
        "hparams": {name: [json_number(float(v)) for v in hparams[name]] for name in names},
    }


def pbt_rows(run_dir: Path) -> List[Dict]:
    """The generations of a run directory's pbt.jsonl so far.

    Args:
        run_dir: the run directory.

    Returns:
        pbt.jsonl's rows in order, none when there is no such file.
    """
    path = run_dir / PBT_LOG
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


class Checkpoint(Event):
    """A checkpoint every `checkpoint.every` updates and after `checkpoint.every_s` seconds,
    at the end, when a stop signal came, and after an event failed; never after a chunk that
    went non-finite (its state is past the last good update)."""

    keeps_work = True

    def __init__(self, config: Config):
        self.every = config.checkpoint.every

    def due(self, run: Run, chunk: Chunk) -> bool:
        """Whether to save: on every `checkpoint.every`-th update and at the run's end, after
        `checkpoint.every_s` seconds, a stop signal or a failed event; never after a non-finite
        chunk.

        Args:
            run: the run, `run.update` the chunk's last update.
            chunk: the chunk that just ended.

        Returns:
            True to call `handle`.
        """
        return not chunk.nonfinite and (periodic(self.every, run) or chunk.checkpoint_due
                                         or chunk.stop_requested or chunk.failed)

    def handle(self, run: Run, chunk: Chunk) -> None:
        """Saves `run.state` and the run's record as the checkpoint of `run.update`.

        Args:
            run: the run, `run.update` the chunk's last update.
            chunk: the chunk that just ended.
        """
        tick = time.monotonic()
        run.checkpoints.save(run.update, run.state, run.record())
        run.last_checkpoint = time.monotonic()
        run.checkpoint_s += run.last_checkpoint - tick


class Plot(Event):
    """Redraws learning_curve.png after each evaluation but the last (the run's end draws
    the final one)."""

    def due(self, run: Run, chunk: Chunk) -> bool:
        """Whether to redraw: after an evaluation but at the run's end, in the process that
        writes files.

        Args:
            run: the run, `run.update` the chunk's last update.
            chunk: the chunk that just ended.

        Returns:
            True to call `handle`.
        """
        return chunk.evaluated and not run.ending and writes_files()

    def handle(self, run: Run, chunk: Chunk) -> None:
        """Redraws learning_curve.png (`plot_learning_curve`).

        Args:
            run: the run, `run.update` the chunk's last update.
            chunk: the chunk that just ended.
        """
        plot_learning_curve(run)


def plot_learning_curve(run: Run) -> None:
    """Draws the run's learning_curve.png: every update's mean return, the evaluations; and
    for a multi-agent run outcomes.png, each agent's return and the env's outcomes.

    Args:
        run: the run, its history up to `run.update`.
    """
    history, config = run.history, run.config
    returns = history.returns()
    if config.pbt.every:  # members change hyperparameters: a curve per member, as in pbt.png
        groups = [f"member {m}" for m in range(returns.shape[0])]
    else:
        groups = point_labels(config) if is_sweep(config) else None
    env_steps = np.arange(1, history.num_updates + 1) * config.batch_size
    plots.plot_learning_curve(run.run_dir / "learning_curve.png", env_steps, returns,
                              history.eval_points(), title=config.env.name, groups=groups)
    if history.outcome_sums:
        plots.save_png(plots.outcomes_figure(env_steps, history.outcomes(), config.env.name),
                       run.run_dir / OUTCOMES_PNG)


class StopSignal(Event):
    """Stops the run at the chunk's end after a stop signal (once the checkpoint is saved):
    status "interrupted" after Ctrl-C, "preempted" after SIGTERM or SIGUSR1."""

    def due(self, run: Run, chunk: Chunk) -> bool:
        """Whether a stop signal came during the chunk (and the run is not ending already).

        Args:
            run: the run, `run.update` the chunk's last update.
            chunk: the chunk that just ended.

        Returns:
            True to call `handle`.
        """
        return chunk.stop_requested and not run.ending

    def handle(self, run: Run, chunk: Chunk) -> None:
        """Sets the run's status to "interrupted" or "preempted" by the signal.

        Args:
            run: the run, `run.update` the chunk's last update.
            chunk: the chunk that just ended.
        """
        run.status = status_of(chunk.stop_signal)
        run.stop_signal = chunk.stop_signal


class FoldedTimeLimit(Event):
    """After the first chunk, one warning when a user's env (`env.name=pkg.module:attr`)
    reports its time limit as termination (`purerl.envs.folds_time_limit`)."""

    def __init__(self) -> None:
        self.checked = False

    def due(self, run: Run, chunk: Chunk) -> bool:
        """Whether the check is still to run: after the first chunk only.

        Args:
            run: the run, `run.update` the chunk's last update.
            chunk: the chunk that just ended.

        Returns:
            True to call `handle`.
        """
        return not self.checked

    def handle(self, run: Run, chunk: Chunk) -> None:
        """Makes a user's env once and warns when it folds its time limit into termination;
        a check that fails is logged at debug.

        Args:
            run: the run, `run.update` the chunk's last update.
            chunk: the chunk that just ended.
        """
        self.checked = True
        name = run.config.env.name
        if ":" not in name:
            return
        env, env_params = make_env(run.config.env)
        try:
            folded = folds_time_limit(env, env_params)
        except Exception as error:  # an advisory check: a step it cannot take ends no run
            log.debug("the time-limit check of env.name=%s did not run: %s", name, error)
            return
        if folded:
            log.warning("env.name=%s: step_env returns terminated=true once state.time reaches "
                        "max_steps_in_episode=%d, so time-outs are treated as terminal (their "
                        "values not bootstrapped); return terminated=false there and let "
                        "gymnax's is_truncated end the episode (docs/environments.md)", name,
                        env_params.max_steps_in_episode)


def default_events(config: Config, user_events: Sequence[Event] = ()) -> List[Event]:
    """The events between chunks, in the order they run: evaluation, `stop_at_return` when
    set, `user_events`, the folded-time-limit check, then the log, the NaN guard, progress,
    PBT, checkpoint, plot and the stop signal.

    Args:
        config: the run's settings.
        user_events: the caller's events (`purerl.run(..., events=)`), in order.

    Returns:
        The events.
    """
    stop = [] if config.stop_at_return is None else [StopAtReturn(config.stop_at_return, config)]
    return [Evaluate(config), *stop, *user_events, FoldedTimeLimit(), Log(),
            NonfiniteGuard(nonfinite_names), Progress(config), Generation(config),
            Checkpoint(config), Plot(), StopSignal()]
