"""Learning benchmark: every preset at its default budget, through the real command line.

    python benchmarks/learning.py                 # every gymnax preset in conf/env/
    python benchmarks/learning.py pendulum acrobot
    python benchmarks/learning.py --memory        # memory envs: feed-forward against GRU
    python benchmarks/learning.py --memory pointrobot-misc

Each preset runs `python -m purerl.train +env=<preset>` in `results/learning/runs/<preset>/`
(not in git); its summary and wall time are merged into `results/learning.json`, its curve
drawn to `results/learning/<preset>.png`, all curves to `results/learning.png`, and the docs'
table printed. `--plot-only` redraws the PNGs from the runs kept. `--memory` runs each of
`MEMORY_PRESETS` with `network=mlp` and `network=gru` (2 seeds) into `results/recurrent.json`."""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import tables  # noqa: E402
from harness import REPO  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.ticker import EngFormatter  # noqa: E402

from purerl.logging.plots import plot_seeds, smoothing_window  # noqa: E402

RESULTS = tables.RESULTS  # where tables.learning() and tables.recurrent() read what this writes
TARGETS = {"acrobot": -100.0, "pendulum": -300.0, "breakout-minatar": 10.0}  # issue 3's targets
MEMORY_PRESETS = ["memorychain-bsuite", "metamaze-misc", "pointrobot-misc", "bernoullibandit-misc",
                  "gaussianbandit-misc"]
MEMORY_NETWORKS = ["mlp", "gru"]


def all_presets() -> list[str]:
    """The gymnax presets of `conf/env/` (the other suites' are `suites.py`'s)."""
    from omegaconf import OmegaConf

    return sorted(p.stem for p in (REPO / "conf" / "env").glob("*.yaml")
                  if p.stem != "gymnax" and "/" not in OmegaConf.load(p).env.name)


def python_m(*args: str) -> None:
    """`python -m ARGS` from the repository root; raises with its stderr's end if it fails."""
    proc = subprocess.run([sys.executable, "-m", *args], cwd=REPO, capture_output=True,
                          text=True)
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


def draw_curve(ax, preset: str, run_dir: Path) -> None:
    """The run's return per logged update faint, its moving mean thick, the target dashed."""
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    steps = np.array([r["env_steps"] for r in rows], dtype=float)
    returns = np.array([np.nan if r["episode_return"] is None else r["episode_return"]
                        for r in rows], dtype=float)
    window = smoothing_window(steps.size)
    plot_seeds(ax, steps, returns[None], window, "C0", f"mean over {window} updates")
    if preset in TARGETS:
        ax.axhline(TARGETS[preset], color="gray", ls="--", lw=0.8, label="target")
    ax.xaxis.set_major_formatter(EngFormatter())
    ax.grid(alpha=0.3)


def plot_curve(preset: str, run_dir: Path, path: Path) -> None:
    fig, ax = plt.subplots(figsize=(5, 3.6), layout="constrained")
    draw_curve(ax, preset, run_dir)
    ax.plot([], [], color="C0", lw=0.8, alpha=0.4, label="per update")
    ax.set(xlabel="env steps", ylabel="episode return", title=f"+env={preset}")
    fig.legend(loc="outside lower center", ncols=3, fontsize="small")
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_grid(presets: list[str], runs: Path, path: Path) -> None:
    """The learning curves of the `presets` run under `runs`, small multiples in one figure."""
    presets = [p for p in presets if (runs / p / "metrics.jsonl").exists()]
    cols, rows = 5, -(-len(presets) // 5)
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 2.4 * rows + 0.5), squeeze=False,
                             layout="constrained")
    for ax, preset in zip(axes.flat, presets):
        draw_curve(ax, preset, runs / preset)
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
    fig.savefig(path, dpi=90)
    plt.close(fig)


def run_memory(presets: list[str]) -> None:
    """Each of `presets` with each of `MEMORY_NETWORKS`, 2 seeds each."""
    results_path, runs = RESULTS / "recurrent.json", RESULTS / "learning" / "runs"
    results = json.loads(results_path.read_text()) if results_path.exists() else {}
    for preset in presets:
        for network in MEMORY_NETWORKS:
            name = f"{preset} network={network}"
            results[name] = run_preset(preset, runs / f"{preset}-{network}", f"network={network}",
                                       "num_seeds=2")
            results_path.write_text(json.dumps(results, indent=2) + "\n")
            print(f"{name}: final return {results[name]['final_return_per_seed']}, "
                  f"{results[name]['wall_s']} s", flush=True)
    print(tables.recurrent())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("presets", nargs="*",
                        help="presets to run (default: all; with --memory, MEMORY_PRESETS)")
    parser.add_argument("--memory", action="store_true",
                        help="the memory presets with network=mlp and network=gru")
    parser.add_argument("--plot-only", action="store_true",
                        help="redraw the PNGs from the run directories kept, training nothing")
    args = parser.parse_args()
    if args.memory:
        return run_memory(args.presets or MEMORY_PRESETS)
    presets = args.presets or all_presets()
    curves = RESULTS / "learning"
    runs = curves / "runs"
    if args.plot_only:
        kept = [p for p in presets if (runs / p / "metrics.jsonl").exists()]
        for preset in kept:
            plot_curve(preset, runs / preset, curves / f"{preset}.png")
        if kept:
            plot_grid(all_presets(), runs, RESULTS / "learning.png")
        return print(f"redrew {len(kept)} of {len(presets)} presets from {runs}")
    curves.mkdir(parents=True, exist_ok=True)
    results_path = RESULTS / "learning.json"
    results = json.loads(results_path.read_text()) if results_path.exists() else {}
    for preset in presets:
        results[preset] = run_preset(preset, runs / preset)
        plot_curve(preset, runs / preset, curves / f"{preset}.png")
        results_path.write_text(json.dumps(dict(sorted(results.items())), indent=2) + "\n")
        print(f"{preset}: final return {results[preset]['final_return']}, "
              f"{results[preset]['wall_s']} s", flush=True)
    plot_grid(sorted(results), runs, RESULTS / "learning.png")
    print(tables.learning())


if __name__ == "__main__":
    main()
