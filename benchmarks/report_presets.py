"""purerl over 8 seeds on each gymnax preset, reported as `python -m purerl.report` reports:
the IQM table of docs/benchmarks.md.

    python benchmarks/report_presets.py                 # presets whose one-seed run took <= 30 s
    python benchmarks/report_presets.py cartpole acrobot
    python benchmarks/report_presets.py cartpole --total-timesteps 50_000   # a check, cut short
    python benchmarks/report_presets.py --report-only   # the reports again, from the runs kept

Each preset trains once, as one program of `--seeds` vmapped seeds at its default budget:
`python -m purerl.train +env=<preset> num_seeds=8` into
`benchmarks/results/report_presets/runs/<preset>/` (runs and reports are not kept in git). By
default the presets are the gymnax ones whose one-seed run in `results/learning.json` took at
most `--max-one-seed-s` (the CNN and GRU presets take minutes per seed on a 2-core CPU). Then,
through the command line as a user types it, `python -m purerl.report runs/<preset>
out=reports/<preset>` per preset (raw returns; the optimality gap to the preset's target where
conf/score_ranges.yaml has one), and one report over the presets that have a score range,
normalized, as one group (`group_by=all`, into `reports/normalized/`). Writes
`benchmarks/results/report_presets.json`
(each preset's wall time, steps/s and report; entries of presets not run this time are kept)
and prints the markdown table of the presets run."""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

from learning import all_presets
from omegaconf import OmegaConf

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "benchmarks" / "results" / "report_presets"
RESULTS = REPO / "benchmarks" / "results" / "report_presets.json"
RANGES = REPO / "conf" / "score_ranges.yaml"


def default_presets(max_one_seed_s: float) -> list[str]:
    """The gymnax presets whose one-seed run in results/learning.json took at most that long."""
    learning = json.loads((REPO / "benchmarks" / "results" / "learning.json").read_text())
    return [p for p in all_presets() if p in learning and learning[p]["wall_s"] <= max_one_seed_s]


def command(*args: str) -> subprocess.CompletedProcess:
    """`python -m ARGS` from the repository root; raises with its stderr when it fails."""
    proc = subprocess.run([sys.executable, "-m", *args], cwd=REPO, capture_output=True,
                          text=True)
    if proc.returncode:
        raise RuntimeError(f"python -m {' '.join(args)} failed ({proc.returncode}): "
                           f"{proc.stderr[-2000:]}")
    return proc


def train(preset: str, seeds: int, total_timesteps: int | None) -> dict:
    """The preset's run of `seeds` vmapped seeds; its summary's numbers and wall time."""
    run_dir = OUT / "runs" / preset
    shutil.rmtree(run_dir, ignore_errors=True)
    budget = [] if total_timesteps is None else [f"total_timesteps={total_timesteps}"]
    start = time.perf_counter()
    command("purerl.train", f"+env={preset}", f"num_seeds={seeds}", *budget,
            f"hydra.run.dir={run_dir}")
    summary = json.loads((run_dir / "summary.json").read_text())
    return {"env": summary["env"], "env_steps": summary["env_steps"], "sps": summary["sps"],
            "compile_s": summary["compile_s"], "wall_s": round(time.perf_counter() - start, 1)}


def report(*args: str) -> dict:
    """`python -m purerl.report ARGS`'s report.json (its `out=` is the last argument)."""
    command("purerl.report", *args)
    return json.loads((Path(args[-1].removeprefix("out=")) / "report.json").read_text())


def has_range(env: str) -> bool:
    entry = OmegaConf.to_container(OmegaConf.load(RANGES)).get(env, {})
    return {"random", "target"} <= set(entry)


def interval(stat: dict) -> str:
    return f"{stat['point']:.4g} [{stat['interval'][0]:.4g}, {stat['interval'][1]:.4g}]"


def markdown(results: dict, normalized: dict | None) -> str:
    lines = ["| preset | env | seeds | env steps | IQM [95% CI] | mean [95% CI] | "
             "optimality gap [95% CI] | wall s |",
             "| --- | --- | ---: | ---: | --- | --- | --- | ---: |"]
    for preset, r in results.items():
        group = r["report"]["groups"][0]
        gap = (f"{interval(group['optimality_gap'])} (to {r['report']['optimality_target']:g})"
               if "optimality_gap" in group else "")
        lines.append(f"| `{preset}` | {r['env']} | {group['runs_per_env']} | "
                     f"{r['env_steps']:,} | {interval(group['iqm'])} | {interval(group['mean'])} "
                     f"| {gap} | {r['wall_s']:.0f} |")
    if normalized:
        (group,) = normalized["groups"]
        lines += ["", f"Normalized over the {len(group['envs'])} presets with a score range "
                  f"({group['runs_per_env']} seeds each): IQM {interval(group['iqm'])}, mean "
                  f"{interval(group['mean'])}, optimality gap {interval(group['optimality_gap'])}."]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("presets", nargs="*", help="default: the fast gymnax presets")
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--max-one-seed-s", type=float, default=30.0)
    parser.add_argument("--total-timesteps", type=int, default=None,
                        help="a budget for every preset in place of its own (a quick check)")
    parser.add_argument("--report-only", action="store_true",
                        help="report on the runs kept in results/report_presets/runs/")
    args = parser.parse_args()
    presets = args.presets or default_presets(args.max_one_seed_s)
    results = json.loads(RESULTS.read_text())["presets"] if RESULTS.exists() else {}
    for preset in presets:
        if not args.report_only:
            results[preset] = train(preset, args.seeds, args.total_timesteps)
            print(f"{preset}: trained in {results[preset]['wall_s']} s", flush=True)
        results[preset]["report"] = report(str(OUT / "runs" / preset),
                                           f"out={OUT / 'reports' / preset}")
    ranged = [p for p in presets if has_range(results[p]["env"])]
    normalized = report(*(str(OUT / "runs" / p) for p in ranged), "group_by=all",
                        "normalize=presets", f"out={OUT / 'reports' / 'normalized'}"
                        ) if len(ranged) > 1 else None
    RESULTS.write_text(json.dumps({"presets": dict(sorted(results.items())),
                                   "normalized": normalized}, indent=1) + "\n")
    print(markdown({p: results[p] for p in presets}, normalized))


if __name__ == "__main__":
    main()
