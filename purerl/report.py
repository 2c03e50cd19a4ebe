"""Command line: `python -m purerl.report DIR [DIR ...] [key=value ...]` (`--help`: this).

Reads finished runs (run directories; folders such as Hydra's multirun directories are searched
for them), takes every member of each run (each seed, each sweep member) as a sample, groups
them, and writes report.md, report.json, performance_profiles.png and sample_efficiency.png to
`out`: per group the mean, median, interquartile mean (IQM) and optimality gap, each with a 95%
stratified bootstrap confidence interval; the probability that each group's runs score above
each other group's; performance profiles; and the IQM against env steps. The definitions are
rliable's (Agarwal et al., NeurIPS 2021), reproduced in `purerl.reports.aggregate`.

    DIR ...               run directories, or folders to search for them (at least one)
    group_by=run          run: each run (a sweep: each grid point); all: one group; or a
                          setting, e.g. ppo.lr, env.name (a sweep member's swept values are
                          its own)
    metric=final_return   final_return (the last 5% of updates' episodes, per member), or
                          eval_return/<temperature> (the last evaluation), e.g. eval_return/0.0
    normalize=auto        presets: (return - random) / (target - random) per env, the ranges of
                          conf/score_ranges.yaml; a YAML file of such ranges
                          (`ENV_NAME: {random: R, target: T}`); none: raw returns (one env
                          only); auto: presets when the runs span several envs, else none
    out=report            the folder written
    reps=50000            bootstrap replicates of each interval in the tables
    seed=0                the bootstrap's seed
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy as np

from purerl.config import Config, ConfigError, flat_settings, result_settings
from purerl.logging import plots
from purerl.reports.markdown import markdown
from purerl.reports.results import EVAL_RETURN, FINAL_RETURN, read_samples
from purerl.reports.statistics import (
    SIZE,
    aggregates,
    curves,
    group_samples,
    improvements,
    profiles,
    raw_target,
    score_ranges,
)
from purerl.storage.write_errors import WriteError, writes_to

FILES = ("report.md", "report.json", "performance_profiles.png", "sample_efficiency.png")


@dataclasses.dataclass
class ReportArgs:
    """The command line's arguments, as `--help` describes them (`dirs`: the DIRs)."""

    dirs: List[str] = dataclasses.field(default_factory=list)
    group_by: str = "run"
    metric: str = FINAL_RETURN
    normalize: str = "auto"
    out: str = "report"
    reps: int = 50_000
    seed: int = 0


def parse_args(argv: Sequence[str]) -> ReportArgs:
    """The command line's arguments: DIRs, and `key=value` for the other fields of
    `ReportArgs`; checks all but what needs the runs.

    Args:
        argv: the arguments after `python -m purerl.report`.

    Returns:
        The `ReportArgs`, `metric` spelt as metrics.jsonl keys it.

    Raises:
        ConfigError: an unknown argument or setting key, a bad value, no DIR.
    """
    args, names = ReportArgs(), [f.name for f in dataclasses.fields(ReportArgs)][1:]
    for arg in argv:
        key, _, value = arg.partition("=")
        if key not in names:
            args.dirs.append(arg)
        elif key in ("reps", "seed"):
            try:
                setattr(args, key, int(value))
            except ValueError:
                raise ConfigError(f"{key}={value!r} must be an integer") from None
        else:
            setattr(args, key, value)
    if not args.dirs:
        raise ConfigError("pass at least one run directory, or a folder of runs")
    if args.reps < 100:
        raise ConfigError(f"reps={args.reps} must be at least 100")
    if args.metric != FINAL_RETURN:
        args.metric = _eval_metric(args.metric)
    known = ["run", "all", *flat_settings(result_settings(dataclasses.asdict(Config())))]
    if args.group_by not in known and not args.group_by.startswith("env.params."):
        close = difflib.get_close_matches(args.group_by, known, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise ConfigError(f"unknown group_by={args.group_by}: run, all, or a setting that "
                          f"shapes the result, such as ppo.lr{hint}")
    return args


def _eval_metric(metric: str) -> str:
    """`eval_return/<temperature>` spelt as metrics.jsonl keys it (`eval_return/0` ->
    `eval_return/0.0`); raises ConfigError for any other metric."""
    try:
        temperature = float(metric.removeprefix(EVAL_RETURN))
    except ValueError:
        temperature = -1.0
    if not metric.startswith(EVAL_RETURN) or temperature < 0:
        raise ConfigError(f"unknown metric={metric}: final_return, or eval_return/<temperature> "
                          "such as eval_return/0.0")
    return f"{EVAL_RETURN}{temperature}"


def make_report(args: ReportArgs) -> Dict:
    """Reads the runs, computes the statistics and writes the report's files to `args.out`.

    Args:
        args: the report's arguments (`parse_args`).

    Returns:
        report.json's content.

    Raises:
        ConfigError: no runs; raw returns of several envs; a group with 1 run of an env; an
            unknown metric; an env without a score range.
        purerl.storage.write_errors.WriteError: a file in `args.out` could not be written.
    """
    with writes_to(Path(args.out)):
        return _make_report(args)


def _make_report(args: ReportArgs) -> Dict:
    """`make_report`, its writes' failures as they come."""
    samples, skipped = read_samples([Path(d) for d in args.dirs])
    if not samples:
        raise ConfigError(f"no finished runs in {', '.join(args.dirs)} (skipped: "
                          + ", ".join(f"{d} {status}" for d, status in skipped) + ")")
    envs = sorted({s.env for s in samples})
    ranges = score_ranges(args.normalize, envs)
    groups = group_samples(samples, args.group_by, args.metric, ranges)
    target = 1.0 if ranges else raw_target(envs[0])
    report = {
        "metric": args.metric, "group_by": args.group_by, "normalized_by": ranges,
        "optimality_target": target, "reps": args.reps, "seed": args.seed, "size": SIZE,
        "runs": len({s.run_dir for s in samples}), "samples": len(samples),
        "skipped": [{"run": str(d), "status": status} for d, status in skipped],
        "groups": aggregates(groups, target, args.reps, args.seed),
        "improvement": improvements(groups, args.reps, args.seed),
        "profiles": profiles(groups, args.seed),
        "curves": curves(groups, args.metric, ranges, args.seed),
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    _draw_figures(report, out)
    (out / "report.json").write_text(json.dumps(report, indent=1) + "\n")
    (out / "report.md").write_text(markdown(report))
    return report


def _draw_figures(report: Dict, out: Path) -> None:
    """performance_profiles.png and sample_efficiency.png of report.json's numbers (the
    latter when any group has a curve) in `out`."""
    scale = "normalized " if report["normalized_by"] else ""
    metric = report["metric"]
    lines = {label: (np.asarray(g["fraction"]), np.asarray(g["interval"]))
             for label, g in report["profiles"]["groups"].items()}
    profiles = plots.profiles_figure(np.asarray(report["profiles"]["taus"]), lines,
                                     f"{scale}{metric}")
    plots.save_png(profiles, out / "performance_profiles.png")
    curve = "episode return (moving mean)" if metric == FINAL_RETURN else metric
    path = out / "sample_efficiency.png"
    if report["curves"]:
        plots.save_png(plots.sample_efficiency_figure(
            {label: tuple(np.asarray(c[k]) for k in ("env_steps", "iqm", "interval"))
             for label, c in report["curves"].items()}, f"IQM of {scale}{curve}"), path)
    else:
        path.unlink(missing_ok=True)  # an earlier report's


def main(argv: Optional[Sequence[str]] = None) -> None:
    """`python -m purerl.report`: the report's files written, report.md and the files' paths
    printed; a bad argument or input is one line on stderr and exit code 2, a failed write
    exit code 1.

    Args:
        argv: the arguments; default: the command line's.
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    if any(arg in ("-h", "--help") for arg in argv):
        print(__doc__.strip())
        return
    try:
        args = parse_args(argv)
        report = make_report(args)
    except ConfigError as error:
        print(f"purerl: error: {error}", file=sys.stderr)
        sys.exit(2)
    except WriteError as error:
        print(f"purerl: error: {error}", file=sys.stderr)
        sys.exit(1)
    print(markdown(report), end="")
    written = [name for name in FILES if (Path(args.out) / name).exists()]
    print(f"\nwrote {', '.join(str(Path(args.out) / name) for name in written)}")


if __name__ == "__main__":
    main()
