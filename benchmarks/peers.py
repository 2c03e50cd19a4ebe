"""purerl and a peer side by side, taking turns: PureJaxRL (the default), rejax, Stoix, SB3, sbx
or Brax, each at its own home settings, each a module `peer_<name>.py` (`benchmarks/README.md`
says how to get each one and lists its rows).

Every program of a row runs once per side and turn, one process each (purerl's sides, then the
peer's), so that start-up, compile and peak memory are the process's own; a side that reads a
warm compile cache runs once untimed first. Writes `results/peers.json` (PureJaxRL) or
`results/peers_<peer>.json`: the machine, the date, both sides' commits and package versions,
every run's numbers and curve, and per program and pair of sides the table's lines: medians
(min-max) over the turns, purerl / peer of the medians and its range over the turns. purerl is
what this Python imports: to measure one commit while others edit the tree, run from a clone."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from harness import (
    BENCHMARKS,
    LAUNCHED_AT,
    MEASURES,
    REPO,
    WARM_CACHE,
    Peer,
    comparison,
    cpu_devices,
    detail,
    git_state,
    machine,
    package_versions,
    subprocess_env,
    timed_run,
)

MODULES = {"purejaxrl": "peer_purejaxrl", "rejax": "peer_rejax", "stoix": "peer_stoix",
           "sb3": "peer_sb3", "sbx": "peer_sb3", "brax": "peer_brax", "jaxmarl": "peer_jaxmarl"}
PURERL_PACKAGES = ["purerl", "jax", "jaxlib", "flax", "optax", "chex", "gymnax", "hydra-core",
                   "numpy"]
# --plans: purerl's side on the plain plan, with each switch that lays it out as PureJaxRL's
# program is, and with all of them
PUREJAXRL_LAYOUT = ("permutation_per_epoch", "gather_per_epoch", "value_in_step",
                    "next_value_in_step", "towers_apart")
PLAN_VARIANTS = {"plain": {}, **{name: {name: True} for name in PUREJAXRL_LAYOUT},
                 "purejaxrl_layout": dict.fromkeys(PUREJAXRL_LAYOUT, True)}


def peer_of(name: str) -> Peer:
    return importlib.import_module(MODULES[name]).PEERS[name]


def side_env(peer: Peer, side: str, num_seeds: int, work: Path, checkout: Path | None) -> dict:
    """The environment of the process that runs `side`."""
    env = subprocess_env()
    env[LAUNCHED_AT] = repr(time.time())
    if checkout:
        env["PEER_CHECKOUT"] = str(checkout)
    if side in peer.warm_sides:
        env[WARM_CACHE] = str(work / "compile_cache")
    if side.startswith("purerl"):
        if peer.purerl_in_peer_python:  # this checkout's purerl
            env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(REPO), env.get("PYTHONPATH"))))
        if num_seeds > 1:  # the seeds on the CPU devices the command line makes
            env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={cpu_devices(num_seeds)}"
    return env


def run_turn(peer: Peer, programs: list, sides: tuple, pythons: tuple, work: Path,
             turn_dir: Path, checkout: Path | None = None) -> list:
    """One turn of a row: each program, each side in turn (`sides`: `(side, its program's
    extra keys)`), one process each, purerl's sides under `pythons[0]`, the peer's under
    `pythons[1]`; their results with the process's wall time."""
    turn = []
    for index, program in enumerate(programs):
        results = {}
        for side, extra in sides:
            side_dir = turn_dir / f"{index}_{side}"
            side_dir.mkdir(parents=True)
            out, name = side_dir / "result.json", side.partition(":")[0]
            python = pythons[0] if name.startswith("purerl") else pythons[1]
            wall_s = timed_run([python, BENCHMARKS / peer.driver, name,
                                json.dumps({**program, **extra}), out], REPO,
                               side_dir / "log", side_env(peer, name, program.get("num_seeds", 1),
                                                          work, checkout), peer.hung_after_s)
            results[side] = {**json.loads(out.read_text()), "process_wall_s": round(wall_s, 3)}
        turn.append(results)
    return turn


def program_label(result: dict) -> str:
    """How a table names a program, from a side's result of it."""
    if result.get("setting") == "cli":
        return (f"`python -m purerl.train +env=cartpole` against `python ppo.py` (CartPole-v1, "
                f"4 envs, {result.get('total_timesteps', 500_000):.2g} steps)")
    seeds = result.get("num_seeds", 1)
    what = result.get("setting") or f"{result['num_envs']:,} envs"
    network = ", GRU" if result.get("network") == "gru" else ""
    return (f"{what} ({result.get('env', 'CartPole-v1')}{network}, {seeds} seed"
            f"{'s' if seeds > 1 else ''}, {result.get('env_steps', 0):,} steps)")


def pairs(peer: Peer, peer_sides: tuple, ours: list, plans: bool) -> list[tuple]:
    """`(peer side, purerl side)` of a row's tables: each peer side against the purerl sides
    it is compared with (`Peer.compared_with`), or against every plan."""
    return [(side, our) for side in peer_sides for our in ours
            if plans or our in peer.compared_with.get(side, ("purerl",))]


def comparisons(turns: list, pairs: list) -> list[dict]:
    """A row's tables: per program and `(peer side, purerl side)` pair, purerl against the peer
    on every measure either side has."""
    tables = []
    for index in range(len(turns[0])):
        runs = [turn[index] for turn in turns]
        for side, ours in pairs:
            lines = []
            for what, unit, key, ratio_of, _ in MEASURES:
                theirs, our = ([run[s].get(key) for run in runs] for s in (side, ours))
                if theirs.count(None) + our.count(None) == 2 * len(runs):
                    continue
                if key.startswith("time_to_return") and None in theirs + our:
                    what += (f" (reached in {len(runs) - theirs.count(None)} of {len(runs)} turns"
                             f" by {side}, {len(runs) - our.count(None)} by {ours})")
                lines.append(comparison(what, unit, theirs, our, ratio_of, (side, ours)))
            tables.append({"program": program_label(runs[0][side]), "side": side,
                           "purerl_side": ours, "lines": lines})
    return tables


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peer", choices=list(MODULES), default="purejaxrl")
    parser.add_argument("--checkout", "--purejaxrl", type=Path, dest="checkout",
                        help="the root of the peer's checkout (PureJaxRL's, JaxMARL's)")
    parser.add_argument("--peer-python", help="the Python of the peer's venv (PureJaxRL: this "
                                              "Python if absent)")
    parser.add_argument("--rows", nargs="+", help="rows to run (default: the peer's rows but "
                                                  "an accelerator's)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--total-timesteps", type=int,
                        help="cut every program's budget, to check a peer or fit a machine")
    parser.add_argument("--plans", nargs="*", choices=list(PLAN_VARIANTS),
                        help="purerl on the plain plan, with each switch that lays it out as "
                             "PureJaxRL's program is, and with all of them (or those named)")
    parser.add_argument("--profile", type=Path,
                        help="a folder: each program runs once more under jax.profiler there, "
                             "its ops' time per kind in the results")
    parser.add_argument("--out", type=Path, help="default results/peers.json, "
                                                 "results/peers_<peer>.json")
    args = parser.parse_args()
    peer, timed_programs = peer_of(args.peer), args.plans is not None or args.profile
    args.rows = args.rows or [row for row in peer.rows if row not in peer.accelerator_rows
                              and not (timed_programs and row == "cli")]  # cli: whole commands
    if unknown := [row for row in args.rows if row not in peer.rows]:
        parser.error(f"{args.peer} has no row {', '.join(unknown)}; its rows: "
                     + " ".join(peer.rows))
    if refused := [name for name in ("plans", "profile")
                   if getattr(args, name) not in (None, False) and name not in peer.options]:
        parser.error(f"--{' --'.join(refused)}: {args.peer}'s driver does not take it")
    if timed_programs and "cli" in args.rows:
        parser.error("--plans and --profile time programs; the row cli runs whole commands")
    args.plans = list(PLAN_VARIANTS) if args.plans == [] else args.plans
    if peer.checkout_file:
        if args.checkout is None or not (args.checkout / peer.checkout_file).is_file():
            sys.exit(f"peers.py: --checkout {args.checkout}: no {peer.checkout_file} there; "
                     f"{peer.get_it}")
        args.checkout = args.checkout.resolve()
    if args.peer == "purejaxrl":
        args.peer_python = args.peer_python or sys.executable
    elif args.peer_python is None:
        sys.exit(f"peers.py: --peer {args.peer} needs --peer-python PATH; {peer.get_it}")
    args.peer_python = os.path.abspath(args.peer_python)  # not resolved: a venv's is a link
    if not os.path.exists(args.peer_python):
        parser.error(f"--peer-python {args.peer_python}: no such file")
    args.out = args.out or BENCHMARKS / "results" / (
        "peers.json" if args.peer == "purejaxrl" else f"peers_{args.peer}.json")
    return args


def main() -> None:
    args = arguments()
    peer, start = peer_of(args.peer), time.perf_counter()
    purerl_python = args.peer_python if peer.purerl_in_peer_python else sys.executable
    pythons = (purerl_python, args.peer_python)
    result = {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": machine(), "repeats": args.repeats, "peer": args.peer,
        "purerl": {**git_state(REPO), "python": purerl_python,
                   "versions": package_versions(purerl_python, PURERL_PACKAGES)},
        args.peer: {**(git_state(args.checkout) if args.checkout else {}),
                    "python": args.peer_python,
                    "versions": package_versions(args.peer_python, peer.packages)},
        "programs": {row: [dict(p, total_timesteps=args.total_timesteps) if args.total_timesteps
                           else p for p in peer.rows[row]] for row in args.rows},
        "plans": {name: PLAN_VARIANTS[name] for name in args.plans or []},
        "rows": {}, "tables": {},
    }
    with tempfile.TemporaryDirectory(prefix=f"purerl_peers_{args.peer}_") as work:
        work = Path(work)
        for row in args.rows:
            purerl_sides, peer_sides = peer.sides_of(row)
            ours = ([(f"purerl:{name}", {"plan": PLAN_VARIANTS[name]}) for name in args.plans]
                    if args.plans else [(side, {}) for side in purerl_sides])
            sides = ours + [(side, {}) for side in peer_sides]
            programs = result["programs"][row]
            if warm := [(side, {}) for side in purerl_sides if side in peer.warm_sides]:
                run_turn(peer, programs, warm, pythons, work, work / f"{row}_warm_up",
                         args.checkout)  # fills the compile cache; not timed
            turns = result["rows"][row] = []
            for turn in range(args.repeats):
                traced = {s: {"profile": str(args.profile.resolve() / f"{row}_{turn}" / s)}
                          if args.profile else {} for s, _ in sides}
                turns.append(run_turn(peer, programs, [(s, {**e, **traced[s]})
                                                       for s, e in sides],
                                      pythons, work, work / f"{row}_{turn}", args.checkout))
                print(f"{row} {turn + 1}/{args.repeats} done", flush=True)
            result["tables"][row] = comparisons(
                turns, pairs(peer, peer_sides, [side for side, _ in ours], bool(args.plans)))
    result["machine"]["load_average_at_end"] = os.getloadavg()
    result["total_s"] = round(time.perf_counter() - start, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(detail([(row, table) for row, tables in result["tables"].items() for table in tables],
                 tuple(m[0] for m in MEASURES)))
    print(f"ratios: purerl / {args.peer} of the medians (range over the turns); of time and "
          f"memory < 1 and of steps/s > 1: purerl ahead. {args.repeats} turn(s) each, "
          f"{result['total_s']:.0f} s in all; wrote {args.out}")


if __name__ == "__main__":
    main()
