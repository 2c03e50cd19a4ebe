"""Learning benchmark: every preset at its default budget, through the real command line.

    python benchmarks/learning.py                 # every gymnax preset in conf/env/
    python benchmarks/learning.py pendulum acrobot
    python benchmarks/learning.py --memory        # memory envs: feed-forward against GRU
    python benchmarks/learning.py --memory pointrobot-misc

Each preset runs as `python -m purerl.train +env=<preset>` in a run directory under
`benchmarks/results/learning/runs/` (not kept in git). Its summary and wall time are merged into
`benchmarks/results/learning.json` (entries of presets not run this time are kept), its learning
curve is plotted to `benchmarks/results/learning/<preset>.png`, all curves at hand to
`benchmarks/results/learning.png`, and the table is printed as markdown for the README.
`--plot-only` redraws those PNGs from the run directories kept there, training nothing.

`--memory` runs each of `MEMORY_PRESETS` twice, with `network=mlp` and with `network=gru` (the
preset's other settings kept, 2 seeds vmapped, `num_seeds=2`), into
`benchmarks/results/recurrent.json`, and prints both side by side."""

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
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.ticker import EngFormatter  # noqa: E402

from purerl.logging.plots import plot_seeds, smoothing_window  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "results"
TARGETS = {"acrobot": -100.0, "pendulum": -300.0, "breakout-minatar": 10.0}  # issue 3's targets
MEMORY_PRESETS = ["memorychain-bsuite", "metamaze-misc", "pointrobot-misc", "bernoullibandit-misc",
                  "gaussianbandit-misc"]
MEMORY_NETWORKS = ["mlp", "gru"]


def all_presets() -> list[str]:
    """The gymnax presets of `conf/env/` (the other suites' presets, whose env names carry a
    `suite/` prefix and need extras, are `suites.py`'s)."""
    from omegaconf import OmegaConf

    return sorted(p.stem for p in (REPO / "conf" / "env").glob("*.yaml")
                  if p.stem != "gymnax" and "/" not in OmegaConf.load(p).env.name)


def run_preset(preset: str, run_dir: Path, *overrides: str) -> dict:
    """Trains one preset with its defaults (and `overrides`); returns its summary plus the
    wall time."""
    shutil.rmtree(run_dir, ignore_errors=True)
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "purerl.train", f"+env={preset}", *overrides,
         f"hydra.run.dir={run_dir}"],
        cwd=REPO, capture_output=True, text=True,
    )
    wall_s = time.perf_counter() - start
    if proc.returncode:
        raise RuntimeError(f"+env={preset} {' '.join(overrides)} failed ({proc.returncode}): "
                           f"{proc.stderr[-2000:]}")
    summary = json.loads((run_dir / "summary.json").read_text())
    return {**summary, "wall_s": round(wall_s, 1)}


def read_curve(run_dir: Path) -> tuple[np.ndarray, np.ndarray]:
    """A run's metrics.jsonl as `([U] env steps, [U] episode return)`, NaN where none ended."""
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return (np.array([r["env_steps"] for r in rows], dtype=float),
            np.array([np.nan if r["episode_return"] is None else r["episode_return"]
                      for r in rows], dtype=float))


def draw_curve(ax, preset: str, run_dir: Path) -> None:
    """The run's return per logged update faint, its moving mean thick, the preset's target
    dashed."""
    steps, returns = read_curve(run_dir)
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
    ax.set_xlabel("env steps")
    ax.set_ylabel("episode return")
    ax.set_title(f"+env={preset}")
    fig.legend(loc="outside lower center", ncols=3, fontsize="small")
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_grid(presets: list[str], runs: Path, path: Path) -> None:
    """All presets' learning curves as small multiples in one figure."""
    presets = [p for p in presets if (runs / p / "metrics.jsonl").exists()]
    cols = 5
    rows = -(-len(presets) // cols)
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


def markdown_table(results: dict) -> str:
    lines = ["| preset | env | final return | target | env steps | wall s | compile s |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for preset, r in sorted(results.items()):
        final = "n/a" if r["final_return"] is None else f"{r['final_return']:.2f}"
        target = f">= {TARGETS[preset]:g}" if preset in TARGETS else ""
        lines.append(f"| `{preset}` | {r['env']} | {final} | {target} | {r['env_steps']:,} | "
                     f"{r['wall_s']:.0f} | {r['compile_s']:.1f} |")
    return "\n".join(lines)


def memory_table(results: dict) -> str:
    """Feed-forward and GRU side by side: final return per seed, steps/s, wall time."""
    lines = ["| preset | " + " | ".join(f"{n} final return (seeds 0, 1) | {n} steps/s | {n} wall s"
                                       for n in MEMORY_NETWORKS) + " |",
             "| --- |" + " ---: | ---: | ---: |" * len(MEMORY_NETWORKS)]
    for preset in MEMORY_PRESETS:
        cells = []
        for network in MEMORY_NETWORKS:
            r = results.get(f"{preset} network={network}")
            if r is None:
                cells += ["", "", ""]
                continue
            finals = ", ".join("n/a" if x is None else f"{x:.2f}"
                               for x in r["final_return_per_seed"])
            cells += [finals, f"{r['sps']:,.0f}", f"{r['wall_s']:.0f}"]
        lines.append(f"| `{preset}` | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def run_memory(presets: list[str]) -> None:
    """Each of `presets` with each of `MEMORY_NETWORKS`, 2 seeds each."""
    runs = RESULTS / "learning" / "runs"
    results_path = RESULTS / "recurrent.json"
    results = json.loads(results_path.read_text()) if results_path.exists() else {}
    for preset in presets:
        for network in MEMORY_NETWORKS:
            name = f"{preset} network={network}"
            results[name] = run_preset(preset, runs / f"{preset}-{network}", f"network={network}",
                                       "num_seeds=2")
            results_path.write_text(json.dumps(results, indent=2) + "\n")
            print(f"{name}: final return {results[name]['final_return_per_seed']}, "
                  f"{results[name]['wall_s']} s", flush=True)
    print(memory_table(results))


def replot(presets: list[str], curves: Path) -> None:
    """Redraws each preset's PNG and learning.png from the runs under `curves/runs` (the
    curves are not in learning.json)."""
    runs = curves / "runs"
    kept = [p for p in presets if (runs / p / "metrics.jsonl").exists()]
    for preset in kept:
        plot_curve(preset, runs / preset, curves / f"{preset}.png")
    if kept:
        plot_grid(all_presets(), runs, RESULTS / "learning.png")
    print(f"redrew {len(kept)} of {len(presets)} presets from {runs}")


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
    if args.plot_only:
        return replot(presets, curves)
    curves.mkdir(parents=True, exist_ok=True)
    results_path = RESULTS / "learning.json"
    results = json.loads(results_path.read_text()) if results_path.exists() else {}
    for preset in presets:
        run_dir = curves / "runs" / preset
        result = run_preset(preset, run_dir)
        plot_curve(preset, run_dir, curves / f"{preset}.png")
        results[preset] = result
        results_path.write_text(json.dumps(dict(sorted(results.items())), indent=2) + "\n")
        print(f"{preset}: final return {result['final_return']}, {result['wall_s']} s", flush=True)
    plot_grid(sorted(results), curves / "runs", RESULTS / "learning.png")
    print(markdown_table(results))


if __name__ == "__main__":
    main()
