"""The peers beyond PureJaxRL, for `peers.py --peer NAME`: each runs from a venv the user points
to (`--peer-python`), taking turns with purerl, one program per process: its driver
(`peer_<name>.py`) under the peer's Python, purerl's sides under this one (or the peer's, where
its venv holds purerl: Brax). From each run: the whole process's wall time, its start-up,
compile and training time, steps/s, final return, time to the env's return from the process's
start, and peak memory (`peer_curves.py`). Writes `results/peers_<peer>.json` and prints a
table per program of medians with purerl / peer ratios."""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import NamedTuple

from harness import (
    BENCHMARKS,
    HUNG_AFTER_S,
    PURERL_PACKAGES,
    REPO,
    comparison,
    cpu_devices,
    cut,
    git_state,
    machine,
    markdown,
    package_versions,
    subprocess_env,
    timed_run,
)
from peer_curves import LAUNCHED_AT, WARM_CACHE


class Peer(NamedTuple):
    """A peer: its driver (a file in benchmarks/), its sides after purerl's, its rows (name:
    programs), the packages whose versions are recorded, how to get it, whether purerl's sides
    run under the peer's Python (from this checkout: PYTHONPATH), when a run has hung,
    purerl's sides, which of them each peer side is compared with, and purerl's sides that
    read a compile cache filled by an untimed run first (WARM_CACHE)."""

    driver: str
    sides: tuple
    rows: dict
    packages: list
    get_it: str
    purerl_in_peer_python: bool = False
    hung_after_s: float = HUNG_AFTER_S
    purerl_sides: tuple = ("purerl",)
    compared_with: dict = {}
    warm_sides: tuple = ()

    def purerl_sides_of(self, side: str) -> tuple:
        """The purerl sides that peer side `side` is compared with."""
        return self.compared_with.get(side, ("purerl",))


def seeds(setting: str, *counts: int) -> list:
    """A row's programs."""
    return [{"setting": setting, "num_seeds": n} for n in counts]


PEERS = {
    "rejax": Peer(
        "peer_rejax.py", ("rejax", "rejax-lean"),
        {"cartpole": seeds("cartpole", 1, 8), "breakout": seeds("breakout", 1, 8)},
        ["rejax", "jax", "jaxlib", "flax", "optax", "gymnax", "distrax", "numpy"],
        "python3.11 -m venv ../rejax-venv && ../rejax-venv/bin/pip install rejax==0.1.3 "
        "gymnax==0.0.9, then --peer-python ../rejax-venv/bin/python",
        # purerl as its command line runs it a second time (its compile cache warm), too
        purerl_sides=("purerl", "purerl-warm"),
        compared_with={side: ("purerl", "purerl-warm") for side in ("rejax", "rejax-lean")},
        warm_sides=("purerl-warm",)),
    "stoix": Peer(
        "peer_stoix.py", ("stoix", "stoix-lean"),
        {row: [{"setting": row}] for row in ("cartpole", "cartpole-64tanh", "cartpole-purejaxrl")},
        ["stoix", "stoa-env", "jax", "jaxlib", "flax", "optax", "chex", "distrax", "gymnax",
         "hydra-core", "numpy"],
        "git clone https://github.com/EdanToledo/Stoix ../stoix, python3.11 -m venv "
        "../stoix-venv, install the packages benchmarks/README.md's Stoix section lists "
        "(jax 0.5.3: Stoix pins jax<0.6) and `pip install --no-deps -e ../stoix "
        "flashbax==0.1.3`, then --peer-python ../stoix-venv/bin/python"),
    "sb3": Peer(
        "peer_sb3.py", ("sb3-zoo", "sb3"), {"cartpole-zoo": [{"setting": "cartpole-zoo"}]},
        ["stable-baselines3", "rl_zoo3", "torch", "gymnasium", "numpy"],
        "python3.11 -m venv ../sb3-venv && ../sb3-venv/bin/pip install stable-baselines3 "
        "rl_zoo3 sbx-rl gymnasium torch jax==0.10.2 jaxlib==0.10.2, then "
        "--peer-python ../sb3-venv/bin/python"),
    "sbx": Peer(
        "peer_sb3.py", ("sbx",), {"cartpole-zoo": [{"setting": "cartpole-zoo"}]},
        ["sbx-rl", "stable-baselines3", "jax", "jaxlib", "flax", "optax", "gymnasium", "numpy"],
        "the sb3 peer's venv (it holds sbx too), --peer-python ../sb3-venv/bin/python"),
    "brax": Peer(
        "peer_brax.py", ("brax", "brax-lean"),
        {"inverted_pendulum": [{"setting": "inverted_pendulum"}],
         "hopper": [{"setting": "hopper"}]},
        ["brax", "mujoco", "mujoco-mjx", "jax", "jaxlib", "flax", "optax", "numpy"],
        "python3.11 -m venv ../brax-venv && ../brax-venv/bin/pip install -e '.[brax]' "
        "jax==0.10.2 jaxlib==0.10.2 (purerl and brax: both sides run there), then "
        "--peer-python ../brax-venv/bin/python",
        # Brax's shipped inverted_pendulum run (3.1M steps, 20 evaluations) took 4.7 minutes
        # on a quiet 2-core CPU, 10-20 with its cores loaded
        purerl_in_peer_python=True, hung_after_s=3600,
        # Brax as shipped against purerl with its evaluations (time to a return read off
        # both evaluations) and against purerl lean; Brax lean against purerl lean
        purerl_sides=("purerl", "purerl-eval"),
        compared_with={"brax": ("purerl-eval", "purerl")}),
}


def not_given(name: str) -> str:
    """The one line printed when `--peer NAME` comes without `--peer-python`."""
    return f"peers.py: --peer {name} needs --peer-python PATH; to get it: {PEERS[name].get_it}"


def side_env(peer: Peer, side: str, num_seeds: int = 1,
             compile_cache: Path | None = None) -> dict:
    """The environment of a process that runs `side` against `peer`."""
    env = subprocess_env()
    if side in peer.warm_sides:
        env[WARM_CACHE] = str(compile_cache)
    if side in peer.purerl_sides and peer.purerl_in_peer_python:  # this repository's purerl
        env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(REPO), env.get("PYTHONPATH"))))
    if side in peer.purerl_sides and num_seeds > 1:  # as the command line runs seeds on a CPU
        env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={cpu_devices(num_seeds)}"
    return env


def run_side(peer: Peer, side: str, python: str, program: dict, work: Path,
             compile_cache: Path | None = None) -> dict:
    """One process of the driver for `side`; its result, with the process's wall time."""
    out = work / f"{side}.json"
    env = side_env(peer, side, program.get("num_seeds", 1), compile_cache)
    env[LAUNCHED_AT] = repr(time.time())
    wall_s = timed_run([python, BENCHMARKS / peer.driver, side, json.dumps(program), out],
                       REPO, work / f"{side}.log", env, peer.hung_after_s)
    return {**json.loads(out.read_text()), "process_wall_s": round(wall_s, 3)}


def purerl_python(peer: Peer, peer_python: str) -> str:
    """The Python that runs purerl's side against `peer`."""
    return peer_python if peer.purerl_in_peer_python else sys.executable


def side_python(peer: Peer, side: str, peer_python: str) -> str:
    """The Python that runs `side` against `peer`: `purerl_python` for purerl's sides, the
    peer's venv's for the peer's."""
    return purerl_python(peer, peer_python) if side in peer.purerl_sides else peer_python


def run_turn(peer: Peer, programs: list, peer_python: str, work: Path,
             compile_cache: Path | None = None, sides: tuple | None = None) -> list:
    """One turn of a row: each program, purerl's sides then the peer's."""
    turn = []
    for index, program in enumerate(programs):
        results = {}
        for side in sides or (*peer.purerl_sides, *peer.sides):
            side_dir = work / f"{index}_{side}"
            side_dir.mkdir()
            results[side] = run_side(peer, side, side_python(peer, side, peer_python),
                                     program, side_dir, compile_cache)
        turn.append(results)
    return turn


# The table's lines per program: (what, unit, key of a result, what the ratio compares).
MEASURES = (
    ("whole process, start to exit", "s", "process_wall_s", "time"),
    ("before training: start-up, imports, compile", "s", "before_train_s", "time"),
    ("compile (lowering included)", "s", "compile_s", "time"),
    ("training, compile excluded, all seeds' steps", "steps/s", "sps", "steps/s"),
    ("time to the return threshold from the process's start", "s", "time_to_return_s", "time"),
    ("the same for the curve's moving mean over a twentieth of the run", "s",
     "time_to_return_smoothed_s", "time"),
    ("final return (the curve's last 5%)", "return", "final_return", None),
    ("peak resident memory of the process", "MiB", "peak_rss_mib", "memory"),
)


def program_label(program: dict, result: dict) -> str:
    """How a table names a program."""
    return (f"{program['setting']} ({result['env']}, {result['num_seeds']} seed"
            f"{'s' if result['num_seeds'] > 1 else ''}, {result['env_steps']:,} steps)")


def reached(theirs: list, ours: list, side: str, ours_side: str = "purerl") -> str:
    """What a time-to-return line adds when some turns never reached the threshold (its
    medians are then of the turns that did)."""
    if None not in theirs + ours:
        return ""
    count = sum(v is not None for v in theirs)
    return (f" (reached in {count} of {len(theirs)} turns by {side}, "
            f"{sum(v is not None for v in ours)} by {ours_side})")


def comparisons(turns: list, programs: list, peer: Peer) -> list[dict]:
    """A row's tables: per program, peer side and the purerl side it is compared with
    (`Peer.purerl_sides_of`), purerl against it on every measure."""
    tables = []
    for index, program in enumerate(programs):
        runs = [turn[index] for turn in turns]
        pairs = [(side, ours) for side in peer.sides for ours in peer.purerl_sides_of(side)]
        for side, ours_side in pairs:
            lines = []
            for what, unit, key, ratio_of in MEASURES:
                theirs = [run[side].get(key) for run in runs]
                ours = [run[ours_side].get(key) for run in runs]
                if key.startswith("time_to_return"):
                    what += reached(theirs, ours, side, ours_side)
                lines.append(comparison(what, unit, theirs, ours, ratio_of,
                                        paired=None not in theirs + ours,
                                        sides=(side, ours_side)))
            tables.append({"program": program_label(program, runs[0][side]), "side": side,
                           "purerl_side": ours_side, "lines": lines})
    return tables


def run(name: str, peer_python: str, rows: list, repeats: int, out: Path,
        total_timesteps: int | None = None) -> None:
    """Runs peer `name`'s rows against purerl, `repeats` turns each; writes and prints."""
    peer = PEERS[name]
    start = time.perf_counter()
    programs = {row: cut(peer.rows[row], total_timesteps) for row in rows}
    purerl_side_python = purerl_python(peer, peer_python)
    result = {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": machine(), "repeats": repeats, "peer": name,
        "purerl": {**git_state(REPO), "python": purerl_side_python,
                   "versions": package_versions(purerl_side_python, PURERL_PACKAGES)},
        name: {"python": peer_python, "versions": package_versions(peer_python, peer.packages)},
        "programs": programs, "rows": {}, "tables": {},
    }
    with tempfile.TemporaryDirectory(prefix=f"purerl_peers_{name}_") as work:
        compile_cache = Path(work) / "compile_cache"
        for row in rows:
            if peer.warm_sides:  # fills the compile cache; not timed
                warm_up = Path(work) / f"{row}_warm_up"
                warm_up.mkdir()
                run_turn(peer, programs[row], peer_python, warm_up, compile_cache,
                         peer.warm_sides)
            turns = result["rows"][row] = []
            for turn in range(repeats):
                turn_dir = Path(work) / f"{row}_{turn}"
                turn_dir.mkdir()
                turns.append(run_turn(peer, programs[row], peer_python, turn_dir,
                                      compile_cache))
                print(f"{row} {turn + 1}/{repeats} done", flush=True)
            result["tables"][row] = comparisons(turns, programs[row], peer)
    result["machine"]["load_average_at_end"] = os.getloadavg()
    result["total_s"] = round(time.perf_counter() - start, 1)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    for row, tables in result["tables"].items():
        for table in tables:
            ours_side = table["purerl_side"]
            print(f"\n{row}: {table['program']}, {ours_side} against {table['side']}")
            print(markdown(table["lines"], (table["side"], ours_side)))
    print(f"ratios: purerl / {name} of the medians (range over the turns); of time and memory "
          f"< 1 and of steps/s > 1: purerl ahead. {repeats} turns each, "
          f"{result['total_s']:.0f} s in all; wrote {out}")
