"""What the benchmarks share, in plain Python at import (a peer's driver runs it under the peer's
venv, where purerl may not be installed): the peer protocol, the one timer of compiled programs,
a learning curve read to a time to a return, and two sides' numbers made a table's line.

A curve is the env steps (of one seed) at each point and the training return there (a mean over
seeds). Time to a return is the wall time from the process's start until the curve first reaches
the env's threshold: read off the wall clock at each point where a side takes it, else start-up
and compile plus the share of the training time the steps up to that point took."""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

IMPORTED = time.time()  # a driver imports this first: its start, where peers.py gave none
BENCHMARKS = Path(__file__).resolve().parent
REPO = BENCHMARKS.parent
THRESHOLDS = {"CartPole-v1": 475.0, "Breakout-MinAtar": 10.0, "brax/inverted_pendulum": 950.0,
              "brax/hopper": 1500.0,  # the return that counts as solved
              # the team's: MPE's, Overcooked's (one soup served an episode, paying both cooks
              # 20), SMAX's (each of the five allies paid the team's reward)
              "jaxmarl/MPE_simple_spread_v3": -50.0, "jaxmarl/overcooked": 40.0,
              "jaxmarl/HeuristicEnemySMAX": 6.0}
LAUNCHED_AT = "PEERS_LAUNCHED_AT"  # peers.py's wall clock at a driver's launch
WARM_CACHE = "PEER_COMPILE_CACHE"  # the compile cache of a warm purerl side
# jax.monitoring's durations of a compile: tracing and lowering, then XLA's compile (drivers
# whose peer compiles inside its own call read its compile time off them)
LOWERING_EVENTS = ("/jax/core/compile/jaxpr_trace_duration",
                   "/jax/core/compile/jaxpr_to_mlir_module_duration")
COMPILE_EVENTS = (*LOWERING_EVENTS, "/jax/core/compile/backend_compile_duration")
# A command still running after this long has hung (jaxlib's batched LAPACK QR can wait forever
# for XLA:CPU's pool threads): it is killed and run once more.
HUNG_AFTER_S = 600


class CompileClock:
    """A `jax.monitoring` listener: `(event, seconds, wall clock at its end)` of each compile."""

    def __init__(self):
        self.spans = []

    def __call__(self, event: str, duration: float, **_) -> None:
        if event in COMPILE_EVENTS:
            self.spans.append((event, duration, time.time()))

    def seconds(self, events: tuple = COMPILE_EVENTS) -> float:
        return sum(duration for event, duration, _ in self.spans if event in events)


class Peer(NamedTuple):
    """A peer as `peers.py` runs it: its driver (`DRIVER SIDE PROGRAM OUT`), sides, rows (name:
    programs), packages whose versions are recorded and how to get it. `compared_with`: the
    purerl sides each peer side is compared with; `row_sides`: rows whose sides differ, `(purerl
    sides, peer sides)`; `warm_sides` read a compile cache an untimed run fills first; `options`:
    which of --plans and --profile the driver takes; `accelerator_rows` run only when named;
    `checkout_file`: the peer runs from a checkout the user points to, which has this file."""

    driver: str
    sides: tuple
    rows: dict
    packages: list
    get_it: str
    purerl_in_peer_python: bool = False  # the peer's venv runs purerl's sides too
    hung_after_s: float = HUNG_AFTER_S
    purerl_sides: tuple = ("purerl",)
    compared_with: dict = {}
    row_sides: dict = {}
    warm_sides: tuple = ()
    options: tuple = ()
    accelerator_rows: tuple = ()
    checkout_file: str = ""  # a file the checkout (--checkout) must have; "": none needed

    def sides_of(self, row: str) -> tuple[tuple, tuple]:
        return self.row_sides.get(row, (self.purerl_sides, self.sides))


def subprocess_env() -> dict:
    """This environment without JAX's cache variable: each run says where its cache is."""
    return {k: v for k, v in os.environ.items() if k != "JAX_COMPILATION_CACHE_DIR"}


def timed_run(command: list, cwd: Path, log: Path, env: dict | None = None,
              hung_after_s: float = HUNG_AFTER_S) -> float:
    """Wall seconds of `command`, its output to `log`; run again once if it hangs; exits with
    the end of its output when it fails or hangs twice."""
    name = " ".join(map(str, command))
    for attempt in (1, 2):
        with log.open("w") as out:
            start = time.perf_counter()
            try:
                code = subprocess.run(command, cwd=cwd, env=env or subprocess_env(), stdout=out,
                                      stderr=subprocess.STDOUT, timeout=hung_after_s).returncode
            except subprocess.TimeoutExpired:
                print(f"{name} hung: killed after {hung_after_s:g} s"
                      + ("; running it again" if attempt == 1 else ""), flush=True)
                continue
        if code:
            sys.exit(f"{name} exited {code}; the end of its output:\n{log.read_text()[-3000:]}")
        return time.perf_counter() - start
    sys.exit(f"{name} hung twice; the end of its output:\n{log.read_text()[-3000:]}")


def timed(programs: dict, key, repeats: int = 1) -> tuple[dict, dict]:
    """The one timer of compiled programs: each called `repeats` times, taking turns, each call
    up to `jax.block_until_ready`; the first with `key`, the others with `fold_in(key, i)`.
    Returns each program's best seconds and last output."""
    import jax

    best, outputs = dict.fromkeys(programs, float("inf")), {}
    for i in range(repeats):
        call_key = key if i == 0 else jax.random.fold_in(key, i)
        for name, compiled in programs.items():
            start = time.perf_counter()
            outputs[name] = jax.block_until_ready(compiled(call_key))
            best[name] = min(best[name], time.perf_counter() - start)
    return best, outputs


def compile_and_run(train, key, jit: bool = True,
                    profile: Path | None = None) -> tuple[dict, object]:
    """`jax.jit(train).lower(key)`, its `.compile()` and one call, timed apart (and one more
    call traced into `profile`, its op time per kind)."""
    import jax

    start = time.perf_counter()
    lowered = (jax.jit(train) if jit else train).lower(key)
    lower_s = time.perf_counter() - start
    compiled = lowered.compile()
    compile_s = time.perf_counter() - start
    best, outputs = timed({"train": compiled}, key)
    timings = {"lower_s": round(lower_s, 3), "compile_s": round(compile_s, 3),
               "train_s": round(best["train"], 3)}
    if profile is not None:  # after the timed call, its time apart
        from op_profile import profiled

        start = time.perf_counter()
        timings["profile"] = profiled(compiled, (key,), profile)
        timings["profile_s"] = round(time.perf_counter() - start, 3)
    return timings, outputs["train"]


def start_jax(compile_cache: str | None = None) -> None:
    """JAX's persistent cache off (every compile cold) or at `compile_cache` as purerl's command
    line sets it, and JAX's one-time start-up paid here rather than in the first compile."""
    import jax
    import jax.numpy as jnp

    if compile_cache is None:
        jax.config.update("jax_enable_compilation_cache", False)
    else:
        from purerl.parallel.runtime import use_compile_cache

        use_compile_cache(compile_cache)
    jax.block_until_ready(jax.jit(lambda x: x + 1)(jnp.zeros(())))


def purerl_curve(config, metrics) -> tuple[list, list]:
    """A purerl run's curve: each update's mean return of the episodes that ended in it."""
    import numpy as np

    sums = np.asarray(metrics.episode_return_sum, np.float64).reshape(-1, config.num_updates)
    counts = np.asarray(metrics.episode_count).reshape(-1, config.num_updates).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        returns = (sums.sum(axis=0) / counts).tolist()
    return [config.batch_size * k for k in range(1, config.num_updates + 1)], returns


def program_side(train, key, env_steps: int, curve, launched: float, jit: bool = True,
                 profile: Path | None = None) -> dict:
    """A side's whole-run program compiled and run (`compile_and_run`): a driver's run dict;
    `curve(output)` gives the curve's steps, returns and (optionally) wall clock at each."""
    timings, output = compile_and_run(train, key, jit, profile)
    steps, returns, *times = curve(output)
    after_train_s = timings["train_s"] + timings.get("profile_s", 0.0)
    return {**timings, "before_train_s": round(seconds_since(launched) - after_train_s, 3),
            "env_steps": env_steps, "steps": steps, "returns": returns,
            "times": times[0] if times else None}


def purerl_side(config, make_train_kwargs: dict | None = None, launched: float = 0.0,
                profile: Path | None = None) -> dict:
    """purerl's whole-run program of `config` (seed 0), as `program_side` runs it."""
    import jax

    import purerl

    purerl.validate(config, jax.local_device_count())
    return program_side(purerl.make_train(config, **(make_train_kwargs or {})),
                        jax.random.key(0), config.num_updates * config.batch_size,
                        lambda output: purerl_curve(config, output[1]), launched,
                        profile=profile)


def launched_at(fallback: float = IMPORTED) -> float:
    """When this process was launched: peers.py's stamp, else `fallback`."""
    return float(os.environ.get(LAUNCHED_AT) or fallback)


def seconds_since(start: float) -> float:
    return round(time.time() - start, 3)


def is_number(value) -> bool:
    return value is not None and not math.isnan(value)


def finite(values) -> list:
    return [v for v in values if is_number(v)]


def reach_index(returns, threshold: float) -> int | None:
    """The index of the curve's first point at or above `threshold`."""
    return next((i for i, v in enumerate(returns) if is_number(v) and v >= threshold), None)


def first_reach(steps, returns, threshold: float) -> int | None:
    return None if (index := reach_index(returns, threshold)) is None else int(steps[index])


def time_to_return(steps, returns, threshold: float, *, before_train_s: float, train_s: float,
                   total_steps: int) -> float | None:
    """Seconds from the process's start to the curve's first reach, at a steady rate."""
    if (reached := first_reach(steps, returns, threshold)) is None:
        return None
    return round(before_train_s + train_s * min(1.0, reached / total_steps), 3)


def clock_time_to_return(times, returns, threshold: float, launched: float) -> float | None:
    """The same from the wall clock taken at each point."""
    index = reach_index(returns, threshold)
    taken = [] if index is None else [t for t in times[:index + 1] if t is not None]
    return round(taken[-1] - launched, 3) if taken else None


def window(values, fraction: float = 0.05) -> int:
    return max(1, math.ceil(fraction * len(values)))


def moving_mean(values) -> list:
    """A curve's trailing mean over a twentieth of its points, NaNs left out (over the same
    share, two runs of one budget span the same env steps)."""
    size, means = window(values), []
    for end in range(1, len(values) + 1):
        kept = finite(values[max(0, end - size):end])
        means.append(sum(kept) / len(kept) if kept else float("nan"))
    return means


def tail_mean(values) -> float | None:
    """The mean of the curve's last twentieth of points (at least one), NaNs left out."""
    kept = finite(values[-window(values):])
    return round(sum(kept) / len(kept), 1) if kept else None


def reaching(steps, returns, threshold: float, *, launched: float, times=None,
             before_train_s: float | None = None, train_s: float | None = None,
             total_steps: int | None = None) -> dict:
    """When the curve first reaches `threshold`, and when its moving mean does (a point of one
    or two episodes reaches early by chance)."""
    def seconds(curve):
        if times is not None:
            return clock_time_to_return(times, curve, threshold, launched)
        return time_to_return(steps, curve, threshold, before_train_s=before_train_s,
                              train_s=train_s, total_steps=total_steps)

    smooth = moving_mean(returns)
    return {"threshold": threshold, "reached_at_steps": first_reach(steps, returns, threshold),
            "time_to_return_s": seconds(returns),
            "reached_smoothed_at_steps": first_reach(steps, smooth, threshold),
            "time_to_return_smoothed_s": seconds(smooth),
            "time_to_return_from": "rate" if times is None else "clock"}


def rounded(values) -> list:
    """Returns for JSON: to 0.01, None for NaN."""
    return [round(v, 2) if is_number(v) else None for v in values]


def peak_rss_mib() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def side_result(spec: dict, side: str, env: str, run: dict, *, kind: str, startup_s: float,
                launched: float, num_seeds: int = 1) -> dict:
    """A driver's result of one run: the program, its timings, steps/s, final return, time to
    the env's threshold, peak memory and curve."""
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


def driver_main(description: str, sides: tuple, measure, started: float = IMPORTED) -> None:
    """A driver's command line, `DRIVER SIDE PROGRAM OUT`: `measure(program, side, launched)`'s
    result, with the process's time so far, written to OUT."""
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


def cpu_devices(num_seeds: int = 8) -> int:
    """The CPU devices the command line splits `num_seeds` seeds over (`cpu_devices=0`)."""
    from purerl.config import auto_cpu_devices

    return auto_cpu_devices([num_seeds])


def stats(values: list) -> dict | None:
    if not (values := [v for v in values if v is not None]):
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "values": values}


def comparison(what: str, unit: str, theirs: list, ours: list, ratio_of: str | None,
               sides: tuple) -> dict:
    """One line of a table: each side's values over the turns, and ours / theirs of the medians
    where `ratio_of` says what it compares, with its range over the turns where both sides
    have every turn."""
    their_side, our_side = sides
    line = {"what": what, "unit": unit, their_side: stats(theirs), our_side: stats(ours),
            "ratio_of": ratio_of, "ratio": None, "turn_ratios": None}
    if ratio_of and line[their_side] and line[our_side]:
        line["ratio"] = round(line[our_side]["median"] / line[their_side]["median"], 3)
        if None not in theirs + ours:
            line["turn_ratios"] = [round(a / b, 3) for a, b in zip(ours, theirs)]
    return line


HEADINGS = {"purejaxrl": "PureJaxRL", "purejaxrl-lean": "PureJaxRL lean", "purerl": "purerl",
            "rejax": "rejax", "rejax-lean": "rejax lean", "stoix": "Stoix",
            "stoix-lean": "Stoix lean", "sb3-zoo": "SB3 (RL Zoo)", "sb3": "SB3", "sbx": "sbx",
            "brax": "Brax", "brax-lean": "Brax lean", "purerl-eval": "purerl with evaluations",
            "purerl-warm": "purerl, compile cache warm", "jaxmarl": "JaxMARL",
            "jaxmarl-lean": "JaxMARL lean"}
# A table's lines per program: (what, unit, key of a result, what the ratio compares, a column's
# heading); a line neither side measured is left out.
MEASURES = (
    ("the command, start to exit", "s", "command_wall_s", "time", "the command s"),
    ("whole process, start to exit", "s", "process_wall_s", "time", "whole process s"),
    ("before training: start-up, imports, compile", "s", "before_train_s", "time",
     "before training s"),
    ("compile (lowering included)", "s", "compile_s", "time", "compile s"),
    ("training, compile excluded, all seeds' steps", "steps/s", "sps", "steps/s",
     "training steps/s"),
    ("time to the return threshold from the process's start", "s", "time_to_return_s", "time",
     "time to the return s"),
    ("the same for the curve's moving mean over a twentieth of the run", "s",
     "time_to_return_smoothed_s", "time", "the same, moving mean s"),
    ("final return (the curve's last 5%)", "return", "final_return", None, "final return"),
    ("peak resident memory of the process", "MiB", "peak_rss_mib", "memory", "peak MiB"),
)


def heading(side: str) -> str:
    """How a table heads a side (`purerl:<plan>`: purerl on that plan)."""
    return HEADINGS.get(side) or f"purerl, plan {side.removeprefix('purerl:')}"


def number(value: float | None, unit: str = "") -> str:
    if value is None:
        return "n/a"
    if unit == "steps/s":
        return f"{value / 1e6:.2f}M" if value >= 1e6 else f"{value / 1e3:.1f}k"
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"


def line_of(table: dict, start: str) -> dict | None:
    return next((line for line in table["lines"] if line["what"].startswith(start)), None)


def pair(line: dict | None, theirs: str, ours: str) -> str:
    """`peer / purerl (purerl / peer)` of one measure's medians."""
    if line is None:
        return "n/a"
    cell = " / ".join("not reached" if line.get(side) is None
                      else number(line[side]["median"], line["unit"]) for side in (theirs, ours))
    return cell + (f" ({line['ratio']:.2f})" if line["ratio"] is not None else "")


def detail(tables: list[tuple[str, dict]], measures: tuple) -> str:
    """`(name, table)` of `peers.py` results as one markdown table: a line per program and pair
    of sides, a cell `peer / purerl (purerl / peer)` per measure (the start of its "what")."""
    headings = [next(m[4] for m in MEASURES if m[0].startswith(start)) for start in measures]
    lines = ["| peer, program | sides | " + " | ".join(headings) + " |",
             "| --- | --- |" + " ---: |" * len(measures)]
    for name, table in tables:
        theirs, ours = table["side"], table["purerl_side"]
        lines.append(f"| {name}: {table['program']} | {heading(theirs)} / {heading(ours)} | "
                     + " | ".join(pair(line_of(table, m), theirs, ours) for m in measures) + " |")
    return "\n".join(lines)


VERSIONS_SCRIPT = """
import importlib.metadata, json, platform, sys
def version(name):  # the distribution first on the path: the one the Python imports
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None
print(json.dumps({"python": platform.python_version(), **{n: version(n) for n in sys.argv[1:]}}))"""


def package_versions(python: str, packages: list[str]) -> dict:
    """The Python's version and each package's (None: not installed)."""
    return json.loads(subprocess.run([python, "-c", VERSIONS_SCRIPT, *packages],
                                     capture_output=True, text=True, check=True).stdout)


def git_state(path: Path) -> dict:
    """The checkout's commit and whether tracked files changed (None, False: no git there)."""
    has_git = shutil.which("git") is not None  # a device machine's copy of the tree may lack it

    def git(*args):
        return subprocess.run(["git", "-C", str(path), *args], capture_output=True,
                              text=True).stdout.strip() if has_git else ""

    return {"commit": git("rev-parse", "HEAD") or None,
            "tracked_files_changed": bool(git("status", "--porcelain", "--untracked-files=no"))}


def machine() -> dict:
    return {"cpus": os.cpu_count(), "platform": platform.platform(),
            "processor": platform.processor() or platform.machine(),
            "load_average_at_start": os.getloadavg()}
