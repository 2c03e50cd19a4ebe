"""The end of a run: `summary.json`'s content."""

from __future__ import annotations

import signal
from typing import Dict

import jax
import numpy as np

from purerl.config import result_settings
from purerl.logging.sinks import json_number
from purerl.reports.sweep import is_sweep, summary_sections
from purerl.runs.builtin_events import pbt_rows
from purerl.runs.events import Run
from purerl.storage.checkpoint import config_record


def run_summary(run: Run) -> Dict:
    """summary.json of the run (`sps`: env steps of all members per second of training; last,
    `config`: the settings that shape its result, `config.result_settings`); a multi-agent
    run's has `final_outcomes` (each agent's `return/<agent>`, SMAX's `won`, over the updates
    `final_return` reads) and `final_outcomes_per_seed`; a sweep's has its members, grid
    points (`combinations`) and `best` too, a stopped run's `stopped_by`, a failed one's
    `error`.

    Args:
        run: the run at its end.

    Returns:
        The summary, JSON-serializable; `final_return_per_seed` has one entry per member.
    """
    config, history = run.config, run.history
    finals, outcomes = history.final_returns(), history.final_outcomes()
    per_seed = [None if r is None else json_number(r) for r in finals]
    summary = {
        "env": config.env.name,
        "status": run.status,
        "num_seeds": config.num_seeds,
        "plan": run.plan,
        "devices": run.num_devices,
        "processes": jax.process_count(),
        "updates": history.num_updates,
        "env_steps": history.num_updates * config.batch_size,
        "final_return": _mean_of(finals),
        "final_return_per_seed": per_seed,
        **({"final_outcomes": {name: _mean_of(values) for name, values in outcomes.items()},
            "final_outcomes_per_seed": {name: [None if v is None else json_number(v)
                                               for v in values]
                                        for name, values in outcomes.items()}}
           if outcomes else {}),
        "eval_return": history.evals[-1]["returns"] if history.evals else None,
        "compile_s": round(run.programs.compile_s, 3),
        "train_s": round(run.train_s, 3),
        "checkpoint_s": round(run.checkpoint_s, 3),
        "sps": round(run.sps(), 1),
    }
    if run.stopped_by is not None:
        summary["stopped_by"] = run.stopped_by
    if run.stop_signal:
        summary["signal"] = signal.Signals(run.stop_signal).name
    if run.failure:
        summary["error"] = run.failure
    if is_sweep(config) or config.pbt.every:
        last = history.evals[-1] if history.evals else {}
        rows = pbt_rows(run.run_dir) if config.pbt.every else []
        evolved = rows[-1]["hparams"] if rows else None
        summary["num_members"] = config.num_members
        summary.update(summary_sections(config, finals, last.get("per_member"), evolved))
        if config.pbt.every:
            summary["pbt"] = {"generations": len(rows), "hparams": evolved}
    summary["config"] = result_settings(config_record(config))
    return summary


def _mean_of(values) -> object:
    """The mean of the members' values that are not None, as a `json_number`; None if none."""
    finite = [v for v in values if v is not None]
    return json_number(float(np.mean(finite))) if finite else None
