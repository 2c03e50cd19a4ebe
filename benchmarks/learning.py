"""Learning benchmarks: the gymnax presets through the real command line.

    python benchmarks/learning.py [PRESETS]   # each at its budget: learning.json, learning.png
    python benchmarks/learning.py --memory    # memory presets, mlp against gru: recurrent.json
    python benchmarks/learning.py --plot-only # learning.png again, from the runs kept
    python benchmarks/learning.py --random [--episodes 1000 --seed 0]   # random_returns.json
    python benchmarks/learning.py --report [--seeds 8 --max-one-seed-s 30 --report-only]

Runs train in `results/learning/runs/` or `results/report_presets/runs/` (not in git); each mode
merges into its `results/*.json` and prints its docs table (`--total-timesteps N`: every budget
cut, a check). `--report` trains those whose one-seed run took <= 30 s by default, then runs
`python -m purerl.report` on each and once normalized over those with a score range."""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import tables
from harness import REPO
from omegaconf import OmegaConf

RESULTS = tables.RESULTS  # where tables.py reads what this writes
TARGETS = {"acrobot": -100.0, "pendulum": -300.0, "breakout-minatar": 10.0}  # issue 3's targets
MEMORY_PRESETS = ["memorychain-bsuite", "metamaze-misc", "pointrobot-misc", "bernoullibandit-misc",
                  "gaussianbandit-misc"]  # --memory's, each with network=mlp and network=gru


def all_presets() -> list[str]:
    """The gymnax presets of `conf/env/` (the other suites' are `throughput.py --suites`'s)."""
    return sorted(p.stem for p in (REPO / "conf" / "env").glob("*.yaml")
                  if p.stem != "gymnax" and "/" not in OmegaConf.load(p).env.name)


def read(name: str) -> dict:
    return json.loads((RESULTS / name).read_text()) if (RESULTS / name).exists() else {}


def write(name: str, results: dict, indent: int = 2) -> None:
    (RESULTS / name).write_text(json.dumps(results, indent=indent) + "\n")


def python_m(*args: str) -> None:
    """`python -m ARGS` from the repository root; raises with its stderr's end if it fails."""
    proc = subprocess.run([sys.executable, "-m", *args], cwd=REPO, capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(f"python -m {' '.join(args)} failed ({proc.returncode}): "
                           f"{proc.stderr[-2000:]}")


def run_preset(preset: str, run_dir: Path, *overrides: str) -> dict:
    """Trains one preset with its defaults and `overrides`: its summary and wall time."""
    shutil.rmtree(run_dir, ignore_errors=True)
    start = time.perf_counter()
    python_m("purerl.train", f"+env={preset}", *overrides, f"hydra.run.dir={run_dir}")
    wall_s = time.perf_counter() - start
    return {**json.loads((run_dir / "summary.json").read_text()), "wall_s": round(wall_s, 1)}


def plot_grid(presets: list[str], runs: Path, path: Path) -> int:
    """The learning curves of the `presets` run under `runs`, small multiples in one figure:
    each run's return per logged update faint, its moving mean thick, the target dashed; how
    many were drawn."""
    from figures import figure
    from matplotlib.lines import Line2D
    from matplotlib.ticker import EngFormatter

    from purerl.logging.plots import plot_seeds, smoothing_window

    presets = [p for p in presets if (runs / p / "metrics.jsonl").exists()]
    if not presets:
        return 0
    cols, rows = 5, -(-len(presets) // 5)
    with figure(path, dpi=90, nrows=rows, ncols=cols, squeeze=False,
                figsize=(3.2 * cols, 2.4 * rows + 0.5)) as (fig, axes):
        for ax, preset in zip(axes.flat, presets):
            logged = [json.loads(line) for line in (runs / preset / "metrics.jsonl").open()]
            steps = np.array([r["env_steps"] for r in logged], dtype=float)
            returns = np.array([r["episode_return"] for r in logged], dtype=float)  # None: nan
            plot_seeds(ax, steps, returns[None], smoothing_window(steps.size), "C0", None)
            if preset in TARGETS:
                ax.axhline(TARGETS[preset], color="gray", ls="--", lw=0.8)
            ax.xaxis.set_major_formatter(EngFormatter())
            ax.grid(alpha=0.3)
            ax.set_title(preset, fontsize=9)
            ax.tick_params(labelsize=7)
        for ax in list(axes.flat)[len(presets):]:
            ax.axis("off")
        fig.supxlabel("env steps")
        fig.supylabel("episode return")
        fig.legend(handles=[Line2D([], [], color="C0", lw=0.8, alpha=0.4, label="per update"),
                            Line2D([], [], color="C0", lw=2.0,
                                   label="mean over a twentieth of the run"),
                            Line2D([], [], color="gray", ls="--", lw=0.8, label="target")],
                   loc="outside upper center", ncols=3)
    return len(presets)


def random_returns(preset: str, episodes: int, seed: int) -> dict:
    """A uniform-random policy's `episodes` episodes, each from its reset to its end, vmapped."""
    import jax
    import jax.numpy as jnp

    from purerl.cli.preflight import compose_jobs
    from purerl.envs import make_env

    config = compose_jobs([f"+env={preset}"])[0]
    env, env_params = make_env(config.env)
    space, steps = env.action_space(env_params), int(env_params.max_steps_in_episode)
    start = time.perf_counter()

    def episode(key):
        reset_key, run_key = jax.random.split(key)
        _, state = env.reset(reset_key, env_params)

        def step(carry, key):
            state, total, done = carry
            action_key, step_key = jax.random.split(key)
            _, state, reward, terminated, truncated, _ = env.step(
                step_key, state, space.sample(action_key), env_params)
            return (state, total + jnp.where(done, 0.0, reward),
                    done | terminated | truncated), None

        (_, total, done), _ = jax.lax.scan(step, (state, jnp.float32(0.0), jnp.bool_(False)),
                                           jax.random.split(run_key, steps))
        return total, done

    totals, done = jax.jit(jax.vmap(episode))(jax.random.split(jax.random.key(seed), episodes))
    totals = np.asarray(totals, dtype=np.float64)
    return {"env": config.env.name, "episodes": episodes, "ended": int(np.asarray(done).sum()),
            "max_steps": steps, "random_return": float(totals.mean()),
            "stderr": float(totals.std(ddof=1) / np.sqrt(len(totals))),
            "seconds": round(time.perf_counter() - start, 1)}


def report(runs: list[Path], out: Path, *options: str) -> dict:
    python_m("purerl.report", *map(str, runs), *options, f"out={out}")
    return json.loads((out / "report.json").read_text())


def run_report(args, budget: list[str]) -> None:
    out, learning = RESULTS / "report_presets", read("learning.json")
    presets = args.presets or [p for p in all_presets() if p in learning
                               and learning[p]["wall_s"] <= args.max_one_seed_s]
    results = read("report_presets.json").get("presets", {})
    for preset in presets:
        if not args.report_only:
            summary = run_preset(preset, out / "runs" / preset, f"num_seeds={args.seeds}", *budget)
            results[preset] = {k: summary[k]
                               for k in ("env", "env_steps", "sps", "compile_s", "wall_s")}
            print(f"{preset}: trained in {results[preset]['wall_s']} s", flush=True)
        results[preset]["report"] = report([out / "runs" / preset], out / "reports" / preset)
    ranges = OmegaConf.to_container(OmegaConf.load(REPO / "conf" / "score_ranges.yaml"))
    ranged = [p for p in presets if {"random", "target"} <= set(ranges.get(results[p]["env"], {}))]
    normalized = report([out / "runs" / p for p in ranged], out / "reports" / "normalized",
                        "group_by=all", "normalize=presets") if len(ranged) > 1 else None
    write("report_presets.json", {"presets": dict(sorted(results.items())),
                                  "normalized": normalized}, indent=1)
    print(tables.iqm_table({p: results[p] for p in presets}, normalized))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("presets", nargs="*", help="default: every gymnax preset")
    mode = parser.add_mutually_exclusive_group()
    for flag in ("--memory", "--plot-only", "--random", "--report"):
        mode.add_argument(flag, action="store_true")
    parser.add_argument("--report-only", action="store_true", help="--report, training nothing")
    parser.add_argument("--episodes", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--max-one-seed-s", type=float, default=30.0)
    parser.add_argument("--total-timesteps", type=int, default=None)
    args = parser.parse_args()
    budget = [] if args.total_timesteps is None else [f"total_timesteps={args.total_timesteps}"]
    if args.report or args.report_only:
        return run_report(args, budget)
    if args.random:
        results = read("random_returns.json")
        for preset in args.presets or all_presets():
            r = results[preset] = random_returns(preset, args.episodes, args.seed)
            print(f"{preset:24s} {r['env']:26s} {r['random_return']:10.4g} +- {r['stderr']:.2g} "
                  f"({r['ended']}/{args.episodes} ended)", flush=True)
        write("random_returns.json", dict(sorted(results.items())))
        return print(f"wrote {RESULTS / 'random_returns.json'}")
    runs = RESULTS / "learning" / "runs"
    if args.memory:
        results = read("recurrent.json")
        for preset in args.presets or MEMORY_PRESETS:
            for network in ("mlp", "gru"):
                name = f"{preset} network={network}"
                results[name] = run_preset(preset, runs / f"{preset}-{network}",
                                           f"network={network}", "num_seeds=2", *budget)
                write("recurrent.json", results)
                print(f"{name}: final return {results[name]['final_return_per_seed']}, "
                      f"{results[name]['wall_s']} s", flush=True)
        return print(tables.recurrent())
    results = read("learning.json")
    for preset in [] if args.plot_only else args.presets or all_presets():
        results[preset] = run_preset(preset, runs / preset, *budget)
        write("learning.json", dict(sorted(results.items())))
        print(f"{preset}: final return {results[preset]['final_return']}, "
              f"{results[preset]['wall_s']} s", flush=True)
    drawn = plot_grid(sorted(results), runs, RESULTS / "learning.png")
    print(f"drew {drawn} presets' curves from {runs}" if args.plot_only else tables.learning())


if __name__ == "__main__":
    main()
