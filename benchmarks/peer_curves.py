"""What the peer drivers read from a learning curve and from their own process, in plain Python.

Every driver (`peer_rejax.py`, `peer_stoix.py`, `peer_sb3.py`, `peer_brax.py`) runs under its
own side's Python, a venv where purerl may not be installed, and imports this file from its
folder; it imports nothing beyond the standard library, so the tests read it too.

A curve is two equal-length sequences: the env steps (of one seed) at each point and the
training return logged there (a mean over the seeds where several ran). Time to a return is the
wall time from the process's start until the curve first reaches the threshold: read off the
wall clock taken at each point where a side takes it (`clock_time_to_return`), else the
process's start-up and compile before training plus the share of the training time that the
steps up to that point took, training being at a steady rate (`time_to_return`)."""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import time
from pathlib import Path

# The return that counts as solved, per env (issue 31's thresholds).
THRESHOLDS = {"CartPole-v1": 475.0, "Breakout-MinAtar": 10.0, "brax/inverted_pendulum": 950.0,
              "brax/hopper": 1500.0}
# The environment variable in which `peers.py` hands a driver the wall time (seconds since the
# epoch) at which it launched the driver's process.
LAUNCHED_AT = "PEERS_LAUNCHED_AT"
# The environment variable naming the folder of JAX's compile cache to a warm purerl side
# (one that runs its program a second time, the cache holding it).
WARM_CACHE = "PEER_COMPILE_CACHE"

# The durations `jax.monitoring` reports for each program JAX compiles (jax._src.dispatch's
# event names): tracing and lowering to MLIR, then XLA's compile. Drivers whose peer compiles
# inside its own call (Stoix, Brax) read its compile time off them.
LOWERING_EVENTS = ("/jax/core/compile/jaxpr_trace_duration",
                   "/jax/core/compile/jaxpr_to_mlir_module_duration")
COMPILE_EVENTS = (*LOWERING_EVENTS, "/jax/core/compile/backend_compile_duration")


def launched_at(fallback: float) -> float:
    """When this process was launched: `peers.py`'s stamp, else `fallback` (a driver's own
    stamp at the top of its file, which misses the interpreter's start of some 20-50 ms)."""
    stamp = os.environ.get(LAUNCHED_AT)
    return float(stamp) if stamp else fallback


def seconds_since(start: float) -> float:
    """Wall seconds from `start` (seconds since the epoch) until now, rounded to ms."""
    return round(time.time() - start, 3)


def reach_index(returns, threshold: float) -> int | None:
    """The index of the curve's first point whose return is at least `threshold`."""
    for index, value in enumerate(returns):
        if value is not None and not math.isnan(value) and value >= threshold:
            return index
    return None


def first_reach(steps, returns, threshold: float) -> int | None:
    """The env steps at the curve's first point whose return is at least `threshold`."""
    index = reach_index(returns, threshold)
    return None if index is None else int(steps[index])


def time_to_return(steps, returns, threshold: float, *, before_train_s: float,
                   train_s: float, total_steps: int) -> float | None:
    """Wall seconds from the process's start until the curve first reaches `threshold`."""
    reached = first_reach(steps, returns, threshold)
    if reached is None:
        return None
    return round(before_train_s + train_s * min(1.0, reached / total_steps), 3)


def clock_time_to_return(times, returns, threshold: float, launched: float) -> float | None:
    """Wall seconds from the process's start until the curve first reaches `threshold`, from
    the wall clock taken at each point."""
    index = reach_index(returns, threshold)
    if index is None:
        return None
    taken = [t for t in times[:index + 1] if t is not None]
    return round(taken[-1] - launched, 3) if taken else None


def moving_mean(values, fraction: float = 0.05) -> list:
    """A curve's trailing moving mean over a share of its points, NaNs left out: over the same
    share of two runs of one budget it spans the same env steps, whatever their points' spacing."""
    window = max(1, math.ceil(fraction * len(values)))
    means = []
    for end in range(1, len(values) + 1):
        kept = [v for v in values[max(0, end - window):end]
                if v is not None and not math.isnan(v)]
        means.append(sum(kept) / len(kept) if kept else float("nan"))
    return means


def reaching(steps, returns, threshold: float, *, launched: float, times=None,
             before_train_s: float | None = None, train_s: float | None = None,
             total_steps: int | None = None) -> dict:
    """When a side's curve first reaches `threshold`, and when its moving mean over a
    twentieth of the run does (a side whose points each hold one or two episodes reaches a
    single point early by chance; the mean over the same span of steps reads both sides alike)."""
    def seconds(curve):
        if times is not None:
            return clock_time_to_return(times, curve, threshold, launched)
        return time_to_return(steps, curve, threshold, before_train_s=before_train_s,
                              train_s=train_s, total_steps=total_steps)

    smooth = moving_mean(returns)
    return {"threshold": threshold,
            "reached_at_steps": first_reach(steps, returns, threshold),
            "time_to_return_s": seconds(returns),
            "reached_smoothed_at_steps": first_reach(steps, smooth, threshold),
            "time_to_return_smoothed_s": seconds(smooth),
            "time_to_return_from": "rate" if times is None else "clock"}


def tail_mean(values, fraction: float = 0.05) -> float | None:
    """The mean of the last `fraction` of a curve's points (at least one), NaNs left out."""
    window = values[-max(1, math.ceil(fraction * len(values))):]
    kept = [v for v in window if v is not None and not math.isnan(v)]
    return round(sum(kept) / len(kept), 1) if kept else None


def monitor_episodes(folder: Path) -> tuple[float, list[tuple]]:
    """The episodes that SB3's `Monitor` wrote under `folder`, one `<rank>.monitor.csv` per env
    (a `#` line of JSON with the wall clock at its start, `t_start`, then `r,l,t` rows: return,
    length, seconds since `t_start`)."""
    starts, episodes = [], []
    for path in sorted(Path(folder).rglob("*.monitor.csv")):
        lines = path.read_text().splitlines()
        starts.append(json.loads(lines[0].lstrip("#"))["t_start"])
        rank = int(path.name.split(".")[0])
        for row in lines[2:]:
            r, length, t = row.split(",")[:3]
            episodes.append((rank, float(r), int(length), starts[-1] + float(t)))
    return min(starts), episodes


def rollout_curve(episodes: list[tuple], n_envs: int, rollout_steps: int,
                  total_steps: int) -> tuple[list, list, list]:
    """Each rollout's mean return of the episodes that ended in it, from an SB3 run's
    `Monitor` episodes: its `n_envs` envs step together, so an episode of env `rank` ends at
    global step `n_envs x` the steps of that env's episodes so far."""
    count = -(-total_steps // rollout_steps)
    sums, ended, times = [0.0] * count, [0] * count, [None] * count
    lived = {}
    for rank, value, length, at in episodes:
        lived[rank] = lived.get(rank, 0) + length
        rollout = min(count, -(-n_envs * lived[rank] // rollout_steps)) - 1
        sums[rollout] += value
        ended[rollout] += 1
        times[rollout] = max(at, times[rollout] or at)
    returns = [s / n if n else float("nan") for s, n in zip(sums, ended)]
    return [rollout_steps * (k + 1) for k in range(count)], returns, times


def rounded(values) -> list:
    """A curve's returns for JSON: rounded to 0.01, None for NaN (no episode ended there)."""
    return [None if v is None or math.isnan(v) else round(v, 2) for v in values]


def peak_rss_mib() -> float:
    """The most resident memory this process has held so far, in MiB (Linux counts KiB)."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def side_result(spec: dict, side: str, env: str, run: dict, *, kind: str, startup_s: float,
                launched: float, num_seeds: int = 1) -> dict:
    """A driver's result of one run, JSON-ready: the program, the run's timings, its training
    steps/s, final return, time to the env's threshold and the process's peak memory so far."""
    run = dict(run)
    steps, returns, times = run.pop("steps"), run.pop("returns"), run.pop("times")
    return {**spec, "side": side, "env": env, "num_seeds": num_seeds, "startup_s": startup_s,
            **run, "sps": round(num_seeds * run["env_steps"] / run["train_s"]),
            "final_return": tail_mean(returns),
            **reaching(steps, returns, THRESHOLDS[env], launched=launched, times=times,
                       before_train_s=run["before_train_s"], train_s=run["train_s"],
                       total_steps=run["env_steps"]),
            "peak_rss_mib": peak_rss_mib(),
            "curve": {"kind": kind, "steps": steps, "returns": rounded(returns)}}


def driver_main(description: str, sides: tuple, measure, started: float) -> None:
    """A driver's command line, `DRIVER SIDE PROGRAM OUT`: runs `measure(program, side,
    launched)` and writes its result, with the process's time so far, to OUT as JSON."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("side", choices=sides)
    parser.add_argument("program", type=json.loads, help="the program, a JSON object")
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    launched = launched_at(started)
    result = measure(args.program, args.side, launched)
    result["process_s"] = seconds_since(launched)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k not in ("curve", "ep_rew_mean")}),
          flush=True)
