"""Command line: `python -m purerl.report DIR [DIR ...] [key=value ...]` (`--help`: this).

Reads finished runs (run directories; folders such as Hydra's multirun directories are searched
for them), takes every member of each run (each seed, each sweep member) as a sample, groups
them, and writes report.md, report.json, performance_profiles.png and sample_efficiency.png to
`out`: per group the mean, median, interquartile mean (IQM) and optimality gap, each with a 95%
stratified bootstrap confidence interval; the probability that each group's runs score above
each other group's; performance profiles; and the IQM against env steps. The definitions are
rliable's (Agarwal et al., NeurIPS 2021), reproduced in `purerl.aggregate`.

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
import itertools
import json
import os
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from purerl import aggregate
from purerl.config import Config, ConfigError, flat_settings, result_settings
from purerl.results import EVAL_RETURN, FINAL_RETURN, Sample, read_samples
from purerl.settings_help import config_dir
from purerl.write_errors import WriteError, writes_to

CURVE_POINTS = 50  # env-step points of a sample-efficiency curve
PROFILE_POINTS = 101  # thresholds of a performance profile
CURVE_REPS = 2000  # replicates of the profiles' and curves' bands (rliable's profile default)
SIZE = 0.95  # the intervals' coverage
FILES = ("report.md", "report.json", "performance_profiles.png", "sample_efficiency.png")
AGGREGATES = ("mean", "median", "iqm", "optimality_gap")
HEADINGS = {"mean": "mean", "median": "median", "iqm": "IQM", "optimality_gap": "optimality gap"}


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


@dataclasses.dataclass
class Group:
    """One group's samples as a score matrix.

    Attributes:
        label: how the report names it (`ppo.lr=0.001`, a run's path).
        envs: the envs, the matrix's columns, sorted.
        scores: `[N, M]`: N runs of each of the M envs, normalized when the report is.
        samples: `[N][M]`, the sample behind each score.
    """

    label: str
    envs: List[str]
    scores: np.ndarray
    samples: List[List[Sample]]


def parse_args(argv: Sequence[str]) -> ReportArgs:
    """The command line's arguments: DIRs, and `key=value` for the other fields of
    `ReportArgs`; checks all but what needs the runs.

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


def score_ranges(normalize: str, envs: List[str]) -> Optional[Dict[str, Dict[str, float]]]:
    """The `{env: {"random": R, "target": T}}` that returns are normalized by, None for raw
    returns.

    Args:
        normalize: auto, presets, none, or a YAML file of ranges.
        envs: the envs of the runs.

    Raises:
        ConfigError: raw returns of several envs; an env without a range; a bad file.
    """
    if normalize == "auto":
        normalize = "presets" if len(envs) > 1 else "none"
    if normalize == "none":
        if len(envs) > 1:
            raise ConfigError(f"the runs are of {len(envs)} envs ({', '.join(envs)}) and "
                              "normalize=none: returns of different envs do not compare; "
                              "normalize=presets divides each by its env's range")
        return None
    path = config_dir() / "score_ranges.yaml" if normalize == "presets" else Path(normalize)
    table = _read_ranges(path)
    for env in envs:
        entry = table.get(env)
        if not isinstance(entry, dict) or not {"random", "target"} <= set(entry):
            raise ConfigError(f"normalize={normalize}: {path} has no score range (random and "
                              f"target) of {env}; give normalize=<file.yaml> with a line "
                              f"`{env}: {{random: R, target: T}}`")
        if not entry["target"] > entry["random"]:
            raise ConfigError(f"{path}: {env}'s target {entry['target']} is not above its "
                              f"random return {entry['random']}")
    return {env: {"random": float(table[env]["random"]), "target": float(table[env]["target"])}
            for env in envs}


def _read_ranges(path: Path) -> Dict:
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    if not path.is_file():
        raise ConfigError(f"normalize={path}: no such file")
    try:
        return OmegaConf.to_container(OmegaConf.load(path))
    except (OmegaConfBaseException, ValueError) as error:
        raise ConfigError(f"cannot read {path}: {str(error).splitlines()[0]}") from None


def group_samples(samples: List[Sample], group_by: str, metric: str,
                  ranges: Optional[Dict[str, Dict[str, float]]]) -> List[Group]:
    """The samples grouped, as score matrices.

    Args:
        samples: every sample read.
        group_by: "run" (each run directory and grid point), "all" (one group), or a dotted
            setting.
        metric: the score taken of each sample.
        ranges: per env `{"random", "target"}` to normalize by, or None.

    Returns:
        The groups: by run in the runs' order, by a setting in the order of its values.

    Raises:
        ConfigError: a sample without the metric; a group with fewer than 2 runs of an env,
            or with unequal numbers of runs of its envs.
    """
    labels = _labels(samples, group_by)
    groups = []
    for label in dict.fromkeys(labels[s.run_dir, s.member] for s in samples):
        members = [s for s in samples if labels[s.run_dir, s.member] == label]
        envs = sorted({s.env for s in members})
        columns = [[s for s in members if s.env == env] for env in envs]
        runs = {env: len(column) for env, column in zip(envs, columns)}
        if min(runs.values()) < 2:
            env = min(runs, key=runs.get)
            raise ConfigError(
                f"group {label!r} has 1 run of {env} ({columns[envs.index(env)][0].run_dir}): "
                "a confidence interval needs at least 2; train more seeds (num_seeds=N) or "
                "group_by a setting that pools runs")
        if len(set(runs.values())) > 1:
            counts = ", ".join(f"{n} of {env}" for env, n in runs.items())
            raise ConfigError(f"group {label!r} has {counts} runs: the stratified bootstrap "
                              "needs as many runs of each env")
        scores = np.array([[_score(s, metric, ranges) for s in row] for row in zip(*columns)])
        groups.append(Group(label, envs, scores, [list(row) for row in zip(*columns)]))
    if group_by not in ("run", "all"):  # by the setting's value, numbers numerically
        groups.sort(key=lambda g: _value_order(g.samples[0][0].settings.get(group_by)))
    return groups


def _labels(samples: List[Sample], group_by: str) -> Dict[Tuple[Path, int], str]:
    """Each sample's group label, by `(run_dir, member)`: `ppo.lr=0.001`; by run, the run's
    path below the runs' common folder (a single run's as given) and its grid point."""
    if group_by == "all":
        return {(s.run_dir, s.member): "all" for s in samples}
    if group_by != "run":
        return {(s.run_dir, s.member): f"{group_by}={_format(s.settings.get(group_by))}"
                for s in samples}
    runs = list(dict.fromkeys(s.run_dir for s in samples))
    root = os.path.commonpath([r.resolve() for r in runs])
    names = {r: os.path.relpath(r.resolve(), root) if len(runs) > 1 else str(r) for r in runs}
    return {(s.run_dir, s.member): " ".join(filter(None, (names[s.run_dir], s.point)))
            for s in samples}


def _value_order(value) -> Tuple:
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    return (0, value, "") if number else (1, 0, str(value))


def _format(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _score(sample: Sample, metric: str, ranges: Optional[Dict]) -> float:
    if metric not in sample.scores:
        have = ", ".join(sample.scores)
        raise ConfigError(f"metric={metric}: {sample.run_dir} has no such metric (it has "
                          f"{have})")
    value = sample.scores[metric]
    if value is None:
        raise ConfigError(f"{sample.run_dir}: member {sample.member} has no {metric} (no "
                          "episode ended)")
    return normalized(value, ranges[sample.env]) if ranges else value


def normalized(value, score_range: Dict[str, float]):
    """`(value - random) / (target - random)`: 0 at a uniform-random policy's return, 1 at
    the target."""
    return (value - score_range["random"]) / (score_range["target"] - score_range["random"])


def make_report(args: ReportArgs) -> Dict:
    """Reads the runs, computes the statistics and writes the report's files to `args.out`.

    Returns:
        report.json's content.

    Raises:
        ConfigError: no runs; raw returns of several envs; a group with 1 run of an env; an
            unknown metric; an env without a score range.
        purerl.write_errors.WriteError: a file in `args.out` could not be written.
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
    target = 1.0 if ranges else _raw_target(envs[0])
    report = {
        "metric": args.metric, "group_by": args.group_by, "normalized_by": ranges,
        "optimality_target": target, "reps": args.reps, "seed": args.seed, "size": SIZE,
        "runs": len({s.run_dir for s in samples}), "samples": len(samples),
        "skipped": [{"run": str(d), "status": status} for d, status in skipped],
        "groups": _aggregates(groups, target, args),
        "improvement": _improvements(groups, args),
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    scale = "normalized " if ranges else ""
    report["profiles"] = _profiles(groups, out / "performance_profiles.png",
                                   f"{scale}{args.metric}", args.seed)
    curve = "episode return (moving mean)" if args.metric == FINAL_RETURN else args.metric
    report["curves"] = _curves(groups, args.metric, ranges, out / "sample_efficiency.png",
                               f"IQM of {scale}{curve}", args.seed)
    (out / "report.json").write_text(json.dumps(report, indent=1) + "\n")
    (out / "report.md").write_text(markdown(report))
    return report


def _raw_target(env: str) -> Optional[float]:
    """The optimality gap's target for raw returns: the env's in conf/score_ranges.yaml, if
    any."""
    entry = _read_ranges(config_dir() / "score_ranges.yaml").get(env)
    return float(entry["target"]) if isinstance(entry, dict) and "target" in entry else None


def _aggregates(groups: List[Group], target: Optional[float], args: ReportArgs) -> List[Dict]:
    """Per group, each aggregate's point estimate and interval."""
    names = AGGREGATES if target is not None else AGGREGATES[:-1]

    def func(scores):
        values = [aggregate.mean(scores), aggregate.median(scores), aggregate.iqm(scores)]
        if target is not None:
            values.append(aggregate.optimality_gap(scores, target))
        return np.stack(values, axis=-1)

    points, intervals = aggregate.interval_estimates(
        {g.label: g.scores for g in groups}, func, reps=args.reps, size=SIZE, seed=args.seed)
    return [{"label": g.label, "envs": g.envs, "runs_per_env": g.scores.shape[0],
             "runs": sorted({str(s.run_dir) for row in g.samples for s in row}),
             "scores": g.scores.tolist(),
             **{name: {"point": float(points[g.label][i]),
                       "interval": intervals[g.label][:, i].tolist()}
                for i, name in enumerate(names)}}
            for g in groups]


def _improvements(groups: List[Group], args: ReportArgs) -> List[Dict]:
    """P(X > Y) with its interval for each pair of groups on the same envs, both ways (the
    reverse is 1 - P, its interval mirrored)."""
    pairs = {(x.label, y.label): (x.scores, y.scores)
             for x, y in itertools.combinations(groups, 2) if x.envs == y.envs}
    points, intervals = aggregate.interval_estimates(
        pairs, aggregate.probability_of_improvement, reps=args.reps, size=SIZE, seed=args.seed)
    rows = []
    for x, y in pairs:
        point, (low, high) = float(points[x, y]), intervals[x, y].tolist()
        rows.append({"x": x, "y": y, "point": point, "interval": [low, high]})
        rows.append({"x": y, "y": x, "point": 1 - point, "interval": [1 - high, 1 - low]})
    return rows


def _profiles(groups: List[Group], path: Path, xlabel: str, seed: int) -> Dict:
    """Each group's performance profile with its interval, drawn to `path`."""
    from purerl.logging.plots import profiles_figure, save_png

    every = np.concatenate([g.scores.ravel() for g in groups])
    taus = np.linspace(every.min(), every.max(), PROFILE_POINTS)
    points, intervals = aggregate.interval_estimates(
        {g.label: g.scores for g in groups}, lambda s: aggregate.score_distribution(s, taus),
        reps=CURVE_REPS, size=SIZE, seed=seed)
    save_png(profiles_figure(taus, {k: (points[k], intervals[k]) for k in points}, xlabel),
             path)
    return {"taus": taus.tolist(),
            "groups": {k: {"fraction": points[k].tolist(), "interval": intervals[k].tolist()}
                       for k in points}}


def _curves(groups: List[Group], metric: str, ranges: Optional[Dict], path: Path, ylabel: str,
            seed: int) -> Dict:
    """Each group's IQM against env steps with its interval, drawn to `path` (when any group
    has one); a group whose runs share no stretch of env steps has none. Episode returns per
    update are each run's moving mean over a twentieth of its updates first (as
    learning_curve.png's thick line); evaluations are taken as they are."""
    from purerl.logging.plots import sample_efficiency_figure, save_png, smooth, smoothing_window

    def own(sample):
        x, y = sample.curves[metric]
        return (x, smooth(y, smoothing_window(y.size))) if metric == FINAL_RETURN else (x, y)

    curves = {}
    for g in groups:
        grid, values = common_curve([[own(s) for s in row] for row in g.samples])
        if grid is None:
            continue
        if ranges:
            values = np.stack([normalized(values[:, m], ranges[env])
                               for m, env in enumerate(g.envs)], axis=1)
        curves[g.label] = (grid, values)
    points, intervals = aggregate.interval_estimates(
        {k: v for k, (_, v) in curves.items()},
        lambda s: aggregate.iqm(np.moveaxis(s, -1, -3)), reps=CURVE_REPS, size=SIZE, seed=seed)
    if curves:
        save_png(sample_efficiency_figure({k: (curves[k][0], points[k], intervals[k])
                                           for k in curves}, ylabel), path)
    else:
        path.unlink(missing_ok=True)  # an earlier report's
    return {k: {"env_steps": curves[k][0].tolist(), "iqm": points[k].tolist(),
                "interval": intervals[k].tolist()} for k in curves}


def common_curve(curves: List[List[Tuple[np.ndarray, np.ndarray]]]
                 ) -> Tuple[Optional[np.ndarray], Optional[np.ndarray]]:
    """Samples' curves on `CURVE_POINTS` common env steps: each sample's latest value at or
    before each step (an update without a finished episode keeps the one before), over the
    stretch where every sample has one.

    Args:
        curves: `[N][M]` `(env_steps [P], values [P])`, NaN where a sample has no value.

    Returns:
        `(env_steps [F], values [N, M, F])`, or `(None, None)` when the samples share no
            stretch of env steps.
    """
    finite = [[(x[np.isfinite(y)], y[np.isfinite(y)]) for x, y in row] for row in curves]
    if any(x.size == 0 for row in finite for x, _ in row):
        return None, None
    start = max(x[0] for row in finite for x, _ in row)
    end = min(x[-1] for row in finite for x, _ in row)
    if start >= end:
        return None, None
    grid = np.linspace(start, end, CURVE_POINTS)
    values = np.array([[y[np.searchsorted(x, grid, side="right") - 1] for x, y in row]
                       for row in finite])
    return grid, values


def markdown(report: Dict) -> str:
    """report.md: what was read, the aggregates' table, the probabilities of improvement, the
    figures."""
    metric, ranges, target = report["metric"], report["normalized_by"], report["optimality_target"]
    names = [n for n in AGGREGATES if n in report["groups"][0]]
    scale = ("normalized per env as (return - random) / (target - random): "
             + ", ".join(f"{env} [{r['random']:.4g}, {r['target']:.4g}]"
                         for env, r in ranges.items())) if ranges else "raw returns"
    lines = ["# purerl report", "",
             f"{report['samples']} samples from {report['runs']} run(s), metric `{metric}`, "
             f"{scale}, grouped by `{report['group_by']}`. Intervals: "
             f"{report['size']:.0%} stratified bootstrap (percentile), {report['reps']:,} "
             f"replicates, seed {report['seed']}, rliable's definitions.", "",
             "| group | runs x envs | " + " | ".join(HEADINGS[n] for n in names) + " |",
             "| --- | ---: |" + " --- |" * len(names)]
    for g in report["groups"]:
        cells = [f"{g[n]['point']:.4g} [{g[n]['interval'][0]:.4g}, {g[n]['interval'][1]:.4g}]"
                 for n in names]
        lines.append(f"| {g['label']} | {g['runs_per_env']} x {len(g['envs'])} | "
                     + " | ".join(cells) + " |")
    lines += ["", "Median: of the envs' means (rliable's definition; with one env, their mean).",
              ""]
    if target is not None:
        lines.append(f"Optimality gap: how far the runs stay below {target:.4g} on average (a "
                     "run above it counts as it); lower is better.")
    else:
        lines.append("No optimality gap: conf/score_ranges.yaml has no target for "
                     f"{report['groups'][0]['envs'][0]}.")
    labels = [g["label"] for g in report["groups"]]
    if report["improvement"]:
        cells = {(r["x"], r["y"]): f"{r['point']:.3f} [{r['interval'][0]:.3f}, "
                 f"{r['interval'][1]:.3f}]" for r in report["improvement"]}
        lines += ["", "## Probability of improvement", "",
                  "P(a run of the row's group scores above a run of the column's), ties half, "
                  "averaged over envs; groups on other envs are not compared.", "",
                  "| | " + " | ".join(labels) + " |", "| --- |" + " ---: |" * len(labels)]
        lines += [f"| {x} | " + " | ".join("" if x == y else cells.get((x, y), "n/a")
                                           for y in labels) + " |" for x in labels]
    lines += ["", "## Performance profiles", "",
              "![performance profiles](performance_profiles.png)", "", "## Sample efficiency", ""]
    missing = [label for label in labels if label not in report["curves"]]
    if report["curves"]:
        lines.append("![IQM against env steps](sample_efficiency.png)")
    if missing:
        lines += ["", "No curve (its runs share no stretch of env steps): " + ", ".join(missing)]
    if report["skipped"]:
        lines += ["", "Skipped (not finished): " + ", ".join(
            f"`{s['run']}` ({s['status']})" for s in report["skipped"])]
    return "\n".join(lines) + "\n"


def main(argv: Optional[Sequence[str]] = None) -> None:
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
