"""purerl over 8 seeds on each gymnax preset, reported as `python -m purerl.report` reports:
the IQM table of docs/benchmarks.md.

    python benchmarks/report_presets.py                 # presets whose one-seed run took <= 30 s
    python benchmarks/report_presets.py cartpole acrobot
    python benchmarks/report_presets.py cartpole --total-timesteps 50_000   # a check, cut short
    python benchmarks/report_presets.py --report-only   # the reports again, from the runs kept

Each preset trains once, `--seeds` vmapped seeds at its default budget, into
`results/report_presets/runs/<preset>/` (not in git); by default the presets whose one-seed run
in `results/learning.json` took at most `--max-one-seed-s`. Then `python -m purerl.report` per
preset, and one normalized report over those with a score range (`group_by=all`). Merges into
`results/report_presets.json` and prints the table of the presets run."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from harness import BENCHMARKS, REPO
from learning import all_presets, python_m, run_preset
from omegaconf import OmegaConf

OUT = BENCHMARKS / "results" / "report_presets"
RESULTS = BENCHMARKS / "results" / "report_presets.json"
RANGES = REPO / "conf" / "score_ranges.yaml"


def report(*args: str) -> dict:
    """`python -m purerl.report ARGS`'s report.json (its `out=` is the last argument)."""
    python_m("purerl.report", *args)
    return json.loads((Path(args[-1].removeprefix("out=")) / "report.json").read_text())


def has_range(env: str) -> bool:
    entry = OmegaConf.to_container(OmegaConf.load(RANGES)).get(env, {})
    return {"random", "target"} <= set(entry)


def interval(stat: dict) -> str:
    return f"{stat['point']:.4g} [{stat['interval'][0]:.4g}, {stat['interval'][1]:.4g}]"


def markdown(results: dict, normalized: dict | None) -> str:
    """The table of each preset's report, and a line of the normalized one."""
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
    if not (presets := args.presets):
        learning = json.loads((BENCHMARKS / "results" / "learning.json").read_text())
        presets = [p for p in all_presets()
                   if p in learning and learning[p]["wall_s"] <= args.max_one_seed_s]
    results = json.loads(RESULTS.read_text())["presets"] if RESULTS.exists() else {}
    budget = [] if args.total_timesteps is None else [f"total_timesteps={args.total_timesteps}"]
    for preset in presets:
        if not args.report_only:
            summary = run_preset(preset, OUT / "runs" / preset, f"num_seeds={args.seeds}",
                                 *budget)
            results[preset] = {k: summary[k]
                               for k in ("env", "env_steps", "sps", "compile_s", "wall_s")}
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
