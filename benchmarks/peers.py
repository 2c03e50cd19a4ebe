"""purerl and a peer side by side, taking turns: PureJaxRL (`ppo.py`, `ppo_rnn.py`, the default)
at its CartPole setting, or with --peer rejax, stoix, sb3, sbx or brax at that peer's own
(`other_peers.py`). `benchmarks/README.md` says how to get each peer and lists the rows.

PureJaxRL's rows: `process` times whole processes (the README command into an empty and a warm
compile cache against `python ppo.py`, and each side's imports); the driver rows run
`peer_driver.py` per side and turn, which compiles each whole-run program apart from one run of
it; `gru-vs-mlp` is purerl against itself. The sides take turns (purerl, PureJaxRL, purerl,
...), `--repeats` of each. Writes `results/peers.json` (every turn's numbers, the machine,
both sides' package versions and checkouts) and prints a markdown table of medians (min-max)
with purerl / PureJaxRL of the medians and the ratio's range over the turns. purerl is what
`python -m purerl` imports here: to measure one commit while others edit the tree, run this
file from a clone of it."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from harness import (
    BENCHMARKS,
    GRU_VS_MLP_SIDES,
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

DRIVER = BENCHMARKS / "peer_driver.py"
GET_A_CHECKOUT = (
    "peers.py: no PureJaxRL checkout given; `git clone https://github.com/luchris429/purejaxrl`, "
    "make its venv as this file's docstring says, and pass --purejaxrl DIR --peer-python PATH")


def program(num_envs: int, total_timesteps: int, num_seeds: int = 1,
            network: str = "mlp") -> dict:
    return {"num_envs": num_envs, "total_timesteps": total_timesteps, "num_seeds": num_seeds,
            "network": network}


# The rows measured by peer_driver.py: the programs each side's driver builds, in order.
DRIVER_ROWS = {
    "4envs": [program(4, 500_000)],
    "1024envs": [program(1024, 5_000_000)],
    "16384envs": [program(16384, 6_291_456)],
    # the sizes of an accelerator's run (benchmarks/gpu.sh); --total-timesteps cuts them
    "4096envs": [program(4096, 50_000_000)],
    "65536envs": [program(65536, 200_000_000)],
    "16seeds": [program(512, 10_000_000, num_seeds=16)],
    "8seeds": [program(4, 100_000), program(4, 100_000, num_seeds=8)],
    "8seeds-devices": [program(4, 100_000, num_seeds=8)],
    "gru": [program(4, 500_000, network="gru")],
}
# Rows whose purerl side runs on the forced CPU devices the command line makes by default
# (`cpu_devices()`: the seeds split over them, each device a stream of kernels of its own);
# PureJaxRL's side runs as it does in every row.
PURERL_ON_CPU_DEVICES = {"8seeds-devices"}
# The rows with purerl on both sides: each side's name and programs, in the order of a turn.
PURERL_ROWS = {
    "gru-vs-mlp": {"gru": DRIVER_ROWS["gru"], "mlp": DRIVER_ROWS["4envs"]},
}
ROWS = ["process", *DRIVER_ROWS, *PURERL_ROWS]
ACCELERATOR_ROWS = ("4096envs", "65536envs", "16seeds")  # not run unless --rows names them
# --plans: purerl's side of each row run on the plain plan, then with each of the plan's
# switches that lay it out as PureJaxRL's program is, then with all of them.
PUREJAXRL_LAYOUT = ("permutation_per_epoch", "gather_per_epoch", "value_in_step",
                    "next_value_in_step", "towers_apart")
PLAN_VARIANTS = {"plain": {}, **{name: {name: True} for name in PUREJAXRL_LAYOUT},
                 "purejaxrl_layout": dict.fromkeys(PUREJAXRL_LAYOUT, True)}
# What each side's program imports before it starts: the CLI's modules (train.py imports the
# heavy ones inside its functions); ppo.py imports all of its own at its top.
PURERL_IMPORTS = ("import purerl.train, purerl.envs, purerl.algos.evaluation, "
                  "purerl.logging.sinks, purerl.logging.history, purerl.logging.progress, "
                  "purerl.logging.plots, purerl.storage.checkpoint, purerl.storage.restoring")
PUREJAXRL_PACKAGES = ["jax", "jaxlib", "flax", "optax", "chex", "distrax", "gymnax", "brax",
                      "navix", "numpy"]


def purerl_cli_run(run_dir: Path, compile_cache: Path, seed: int, log: Path) -> dict:
    """The README's command, timed whole, and what its summary.json says of the run."""
    command = [sys.executable, "-m", "purerl.train", "+env=cartpole", f"hydra.run.dir={run_dir}"]
    command += [f"seed={seed}"] if seed else []
    command.append(f"compile_cache={compile_cache}")
    wall_s = timed_run(command, REPO, log)
    summary = json.loads((run_dir / "summary.json").read_text())
    return {"wall_s": round(wall_s, 3),
            **{k: summary[k] for k in ("compile_s", "train_s", "sps", "final_return")}}


def process_turn(checkout: Path, peer_python: str, work: Path) -> dict:
    """One turn of the process row: the imports of each side, then purerl's CLI into an empty
    cache, PureJaxRL's `ppo.py`, and purerl's CLI again from that cache."""
    peer_dir = checkout / "purejaxrl"
    cache = work / "compile_cache"
    cache.mkdir()
    purerl_imports_s = timed_run([sys.executable, "-c", PURERL_IMPORTS], REPO,
                                 work / "purerl_imports.log")
    purejaxrl_imports_s = timed_run([peer_python, "-c", "import ppo"], peer_dir,
                                    work / "purejaxrl_imports.log")
    cold = purerl_cli_run(work / "run_cold", cache, 0, work / "purerl_cold.log")
    purejaxrl_s = timed_run([peer_python, "ppo.py"], peer_dir, work / "purejaxrl_ppo.log")
    warm = purerl_cli_run(work / "run_warm", cache, 1, work / "purerl_warm.log")
    return {"purerl_imports_s": round(purerl_imports_s, 3),
            "purejaxrl_imports_s": round(purejaxrl_imports_s, 3),
            "purerl_cold": cold, "purejaxrl_wall_s": round(purejaxrl_s, 3), "purerl_warm": warm}


def driver_turn(row: str, programs, checkout: Path | None, peer_python: str, work: Path,
                plans: list | None = None, profile: Path | None = None,
                static_work: bool = False) -> dict:
    """One turn of a driver row: purerl's driver, then PureJaxRL's, each one's list of results
    of the row's `programs`; with `plans` (names of `PLAN_VARIANTS`), purerl's driver once per
    variant (sides "purerl:<variant>"); or for a row of `PURERL_ROWS`, purerl's driver for each
    of its sides in turn, with that side's programs. `profile`: each driver profiles its
    programs there; `static_work`: each driver counts its programs' work instead of running."""
    if row in PURERL_ROWS:
        sides = [(side, sys.executable, "purerl", side_programs)
                 for side, side_programs in programs.items()]
    else:
        sides = ([(f"purerl:{name}", sys.executable, "purerl",
                   [dict(p, plan=PLAN_VARIANTS[name]) for p in programs])
                  for name in plans] if plans
                 else [("purerl", sys.executable, "purerl", programs)])
        sides.append(("purejaxrl", peer_python, "purejaxrl", programs))
    turn = {}
    for side, python, driver_side, side_programs in sides:
        out = work / f"{side}.json"
        command = [python, DRIVER, driver_side, json.dumps(side_programs), out]
        command += ["--purejaxrl", checkout] if driver_side == "purejaxrl" else []
        command += ["--profile", profile / side] if profile else []
        command += ["--work"] if static_work else []
        env = subprocess_env()
        if driver_side == "purerl" and row in PURERL_ON_CPU_DEVICES:
            env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={cpu_devices()}"
        timed_run(command, REPO, work / f"{side}_driver.log", env)
        turn[side] = json.loads(out.read_text())
    return turn


def comparisons(rows: dict) -> list[dict]:
    """The table's lines, from the rows that were run."""
    lines = []
    process = rows.get("process", [])
    # The peer's compile to set beside the CLI's: its one program, from the 4envs row.
    peer_compile = [t["purejaxrl"][0]["compile_s"] for t in rows.get("4envs", [])]
    if process:
        peer_wall = [t["purejaxrl_wall_s"] for t in process]
        cold = [t["purerl_cold"] for t in process]
        warm = [t["purerl_warm"] for t in process]
        lines += [
            comparison("`python -m purerl.train +env=cartpole` (compile cache empty) vs "
                       "`python ppo.py`: whole process wall", "s",
                       peer_wall, [r["wall_s"] for r in cold], "time"),
            comparison("the same, purerl's second run (`seed=1`, cache warm)", "s",
                       peer_wall, [r["wall_s"] for r in warm], "time"),
            comparison("imports, in a process of their own (purerl: the CLI's modules; "
                       "PureJaxRL: `import ppo`)", "s", [t["purejaxrl_imports_s"] for t in process],
                       [t["purerl_imports_s"] for t in process], "time"),
            comparison("compile: purerl what the CLI waits for, init + chunk programs, while "
                       "its files' libraries import (summary.json's compile_s; eval compiles "
                       "while it trains), cache empty; PureJaxRL its whole-run program (4envs "
                       "row)", "s",
                       peer_compile, [r["compile_s"] for r in cold], "time", paired=False),
            comparison("the same, purerl's CLI with the cache warm", "s",
                       peer_compile, [r["compile_s"] for r in warm], "time", paired=False),
        ]
    for row in ("4envs", "1024envs", "16384envs", "gru", *ACCELERATOR_ROWS):
        if row not in rows:
            continue
        theirs = [t["purejaxrl"][0] for t in rows[row]]
        label = program_label(row, theirs[0])
        for side in sorted(side for side in rows[row][0] if side.startswith("purerl")):
            ours = [t[side][0] for t in rows[row]]
            plan = f", plan {side.removeprefix('purerl:')}" if ":" in side else ""
            for what, unit, key, ratio_of in (
                    ("compile of the whole-run program (lowering included)", "s", "compile_s",
                     "time"),
                    ("training", "steps/s", "sps", "steps/s"),
                    ("final return", "return", "final_return", None)):
                lines.append(comparison(f"{what}, {label}{plan}", unit,
                                        [r[key] for r in theirs], [r[key] for r in ours],
                                        ratio_of))
    if "8seeds" in rows:
        one_seed, eight_seeds = ({side: [t[side][i] for t in rows["8seeds"]]
                                  for side in ("purejaxrl", "purerl")} for i in (0, 1))
        time_ratios = {side: [round(eight["train_s"] / one["train_s"], 2)
                              for one, eight in zip(one_seed[side], eight_seeds[side])]
                       for side in one_seed}
        lines += [
            comparison("training, 8 seeds vmapped, 4 envs, 1e5 steps each, all seeds' steps",
                       "steps/s", [r["sps"] for r in eight_seeds["purejaxrl"]],
                       [r["sps"] for r in eight_seeds["purerl"]], "steps/s"),
            comparison("8 seeds' training time / 1 seed's (1e5 steps, in the same process)", "x",
                       time_ratios["purejaxrl"], time_ratios["purerl"], None),
        ]
    if "8seeds-devices" in rows:
        eight_seeds = {side: [t[side][0] for t in rows["8seeds-devices"]]
                       for side in ("purejaxrl", "purerl")}
        lines.append(comparison(
            f"the same 8 seeds, purerl on {cpu_devices()} forced CPU devices (a device per "
            "core, the seeds split over them: the command line's default, cpu_devices=0), "
            "PureJaxRL as above", "steps/s",
            [r["sps"] for r in eight_seeds["purejaxrl"]], [r["sps"] for r in eight_seeds["purerl"]],
            "steps/s"))
        if "8seeds" in rows:  # against one seed on one device, from the 8seeds row's turns
            one_seed = [t["purerl"][0]["train_s"] for t in rows["8seeds"]]
            lines.append(comparison(
                "purerl's 8 seeds on the CPU devices: training time / 1 seed's on one device "
                "(8seeds row; medians)", "x", [],
                [round(statistics.median(r["train_s"] for r in eight_seeds["purerl"])
                       / statistics.median(one_seed), 2)], None))
    return lines


def program_label(row: str, result: dict) -> str:
    """How a table names a row's program, from a side's result of it."""
    if row == "gru":
        return "GRU (ppo_rnn.py; purerl network=gru), 4 envs, 5e5 steps"
    seeds = f"{result['num_seeds']} seeds vmapped, " if result["num_seeds"] > 1 else ""
    return f"{seeds}{result['num_envs']:,} envs, {result['env_steps']:.3g} steps"


def gru_vs_mlp_comparisons(rows: dict) -> list[dict]:
    """gru-vs-mlp's table: purerl's GRU against its MLP, GRU / MLP."""
    if "gru-vs-mlp" not in rows:
        return []
    runs = {side: [t[side][0] for t in rows["gru-vs-mlp"]] for side in GRU_VS_MLP_SIDES}
    return [comparison(f"{what}, purerl, CartPole, 4 envs, 5e5 steps", unit,
                       [r[key] for r in runs["mlp"]], [r[key] for r in runs["gru"]], ratio_of,
                       sides=GRU_VS_MLP_SIDES)
            for what, unit, key, ratio_of in (
                ("compile of the whole-run program (lowering included)", "s", "compile_s",
                 "time"),
                ("training", "steps/s", "sps", "steps/s"),
                ("final return", "return", "final_return", None))]


def arguments() -> argparse.Namespace:
    """The command line; --rows checked against the peer's rows."""
    from other_peers import PEERS

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peer", choices=["purejaxrl", *PEERS], default="purejaxrl",
                        help="the peer to run against purerl (default: PureJaxRL)")
    parser.add_argument("--purejaxrl", type=Path,
                        help="the root of a PureJaxRL checkout (with purejaxrl/ppo.py)")
    parser.add_argument("--peer-python",
                        help="the Python of the peer's venv (PureJaxRL: this Python if absent)")
    parser.add_argument("--rows", nargs="+",
                        help="rows to run (default: all of the peer's); PureJaxRL's: "
                        f"{' '.join(ROWS)}; " + "; ".join(
                            f"{name}'s: {' '.join(peer.rows)}" for name, peer in PEERS.items()))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--total-timesteps", type=int,
                        help="cut every program's budget to this, to check a peer's setup or "
                        "size a row to the machine")
    parser.add_argument("--plans", nargs="*", choices=list(PLAN_VARIANTS),
                        help="PureJaxRL's driver rows: purerl on the plain plan, with each "
                        "switch that lays it out as PureJaxRL's program, and with all of them "
                        "(or the variants named)")
    parser.add_argument("--work", action="store_true",
                        help="driver rows: each side's program's work by primitive, from its "
                        "jaxpr (not compiled or run)")
    parser.add_argument("--profile", type=Path,
                        help="a folder: every driver row's programs run once more under "
                        "jax.profiler there, their ops' time per kind in the results")
    parser.add_argument("--out", type=Path,
                        help="default results/peers.json, results/peers_<peer>.json")
    args = parser.parse_args()
    known = ROWS if args.peer == "purejaxrl" else list(PEERS[args.peer].rows)
    args.rows = args.rows or [row for row in known if row not in ACCELERATOR_ROWS]
    if args.plans == []:  # --plans alone: every variant
        args.plans = list(PLAN_VARIANTS)
    if unknown := [row for row in args.rows if row not in known]:
        parser.error(f"{args.peer} has no row {', '.join(unknown)}; its rows: {' '.join(known)}")
    if args.peer_python is not None:  # absolute (not resolved: a venv's python is a link)
        args.peer_python = os.path.abspath(args.peer_python)
        if not os.path.exists(args.peer_python):
            parser.error(f"--peer-python {args.peer_python}: no such file")
    if args.purejaxrl is not None:
        args.purejaxrl = args.purejaxrl.absolute()
    name = "peers.json" if args.peer == "purejaxrl" else f"peers_{args.peer}.json"
    args.out = args.out or BENCHMARKS / "results" / name
    return args


def main() -> None:
    args = arguments()
    if args.peer != "purejaxrl":
        import other_peers

        if args.peer_python is None:
            print(other_peers.not_given(args.peer))
            return
        other_peers.run(args.peer, args.peer_python, args.rows, args.repeats, args.out,
                        args.total_timesteps)
        return
    args.peer_python = args.peer_python or sys.executable
    with_peer = any(row not in PURERL_ROWS for row in args.rows)
    if args.purejaxrl is None and with_peer:
        print(GET_A_CHECKOUT)
        return
    checkout = args.purejaxrl.resolve() if args.purejaxrl else None
    for name in ["ppo.py"] + (["ppo_rnn.py"] if "gru" in args.rows else []):
        if with_peer and not (checkout / "purejaxrl" / name).is_file():
            sys.exit(f"peers.py: {checkout / 'purejaxrl' / name} not found: --purejaxrl is "
                     "the root of a PureJaxRL checkout")

    start = time.perf_counter()
    result = {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": machine(),
        "repeats": args.repeats,
        "purerl": {**git_state(REPO), "python": sys.executable,
                   "versions": package_versions(sys.executable, PURERL_PACKAGES)},
        "purejaxrl": {**git_state(checkout), "checkout": str(checkout),
                      "python": args.peer_python,
                      "versions": package_versions(args.peer_python, PUREJAXRL_PACKAGES)}
        if with_peer else None,
        "programs": {**{row: cut(DRIVER_ROWS[row], args.total_timesteps)
                        for row in args.rows if row in DRIVER_ROWS},
                     **{row: {side: cut(programs, args.total_timesteps)
                              for side, programs in PURERL_ROWS[row].items()}
                        for row in args.rows if row in PURERL_ROWS}},
        "plans": {name: PLAN_VARIANTS[name] for name in args.plans or []},
        "rows": {},
    }
    with tempfile.TemporaryDirectory(prefix="purerl_peers_") as work:
        for row in args.rows:
            turns = result["rows"][row] = []
            for turn in range(args.repeats):
                turn_dir = Path(work) / f"{row}_{turn}"
                turn_dir.mkdir()
                profile = args.profile / f"{row}_{turn}" if args.profile else None
                turns.append(process_turn(checkout, args.peer_python, turn_dir)
                             if row == "process"
                             else driver_turn(row, result["programs"][row], checkout,
                                              args.peer_python, turn_dir, args.plans, profile,
                                              args.work))
                print(f"{row} {turn + 1}/{args.repeats}: {json.dumps(turns[-1])}", flush=True)
    result["machine"]["load_average_at_end"] = os.getloadavg()
    result["total_s"] = round(time.perf_counter() - start, 1)
    timed = not args.work
    result["table"] = comparisons(result["rows"]) if timed else []
    result["gru_vs_mlp_table"] = gru_vs_mlp_comparisons(result["rows"]) if timed else []
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    if result["table"]:
        print(markdown(result["table"]))
        print("ratios: purerl / PureJaxRL of the medians (range over the turns); of time < 1 and "
              "of steps/s > 1: purerl faster.")
    if result["gru_vs_mlp_table"]:
        print(markdown(result["gru_vs_mlp_table"], GRU_VS_MLP_SIDES))
        print("ratios: GRU / MLP of the medians (range over the turns); of time < 1 and of "
              "steps/s > 1: the GRU faster.")
    print(f"{args.repeats} turn(s) each, {result['total_s']:.0f} s in all; wrote {args.out}")


if __name__ == "__main__":
    main()
