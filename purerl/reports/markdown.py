"""report.md: a report's numbers (report.json's content) as markdown, which
`python -m purerl.report` writes and prints."""

from __future__ import annotations

from typing import Dict, List

from purerl.reports.statistics import AGGREGATES

HEADINGS = {"mean": "mean", "median": "median", "iqm": "IQM", "optimality_gap": "optimality gap"}


def markdown(report: Dict) -> str:
    """report.md: what was read, the aggregates' table, the probabilities of improvement, the
    figures.

    Args:
        report: report.json's content (`python -m purerl.report`'s `make_report`).

    Returns:
        The markdown text, ending in a newline.
    """
    lines = [*_summary(report), *_aggregates_table(report), *_improvement_table(report),
             *_figures(report)]
    if report["skipped"]:
        lines += ["", "Skipped (not finished): " + ", ".join(
            f"`{s['run']}` ({s['status']})" for s in report["skipped"])]
    return "\n".join(lines) + "\n"


def _summary(report: Dict) -> List[str]:
    """The heading, and what was read and how it was scored."""
    ranges = report["normalized_by"]
    scale = ("normalized per env as (return - random) / (target - random): "
             + ", ".join(f"{env} [{r['random']:.4g}, {r['target']:.4g}]"
                         for env, r in ranges.items())) if ranges else "raw returns"
    return ["# purerl report", "",
            f"{report['samples']} samples from {report['runs']} run(s), metric "
            f"`{report['metric']}`, {scale}, grouped by `{report['group_by']}`. Intervals: "
            f"{report['size']:.0%} stratified bootstrap (percentile), {report['reps']:,} "
            f"replicates, seed {report['seed']}, rliable's definitions."]


def _aggregates_table(report: Dict) -> List[str]:
    """Per group, each aggregate with its interval; what the median and optimality gap are."""
    names = [n for n in AGGREGATES if n in report["groups"][0]]
    lines = ["", "| group | runs x envs | " + " | ".join(HEADINGS[n] for n in names) + " |",
             "| --- | ---: |" + " --- |" * len(names)]
    for g in report["groups"]:
        cells = [f"{g[n]['point']:.4g} [{g[n]['interval'][0]:.4g}, {g[n]['interval'][1]:.4g}]"
                 for n in names]
        lines.append(f"| {g['label']} | {g['runs_per_env']} x {len(g['envs'])} | "
                     + " | ".join(cells) + " |")
    lines += ["", "Median: of the envs' means (rliable's definition; with one env, their mean).",
              ""]
    target = report["optimality_target"]
    if target is not None:
        lines.append(f"Optimality gap: how far the runs stay below {target:.4g} on average (a "
                     "run above it counts as it); lower is better.")
    else:
        lines.append("No optimality gap: conf/score_ranges.yaml has no target for "
                     f"{report['groups'][0]['envs'][0]}.")
    return lines


def _improvement_table(report: Dict) -> List[str]:
    """P(row > column) for each pair of groups on the same envs; none without such pairs."""
    if not report["improvement"]:
        return []
    labels = [g["label"] for g in report["groups"]]
    cells = {(r["x"], r["y"]): f"{r['point']:.3f} [{r['interval'][0]:.3f}, "
             f"{r['interval'][1]:.3f}]" for r in report["improvement"]}
    lines = ["", "## Probability of improvement", "",
             "P(a run of the row's group scores above a run of the column's), ties half, "
             "averaged over envs; groups on other envs are not compared.", "",
             "| | " + " | ".join(labels) + " |", "| --- |" + " ---: |" * len(labels)]
    return lines + [f"| {x} | " + " | ".join("" if x == y else cells.get((x, y), "n/a")
                                              for y in labels) + " |" for x in labels]


def _figures(report: Dict) -> List[str]:
    """The two figures, and the groups without a curve."""
    lines = ["", "## Performance profiles", "",
             "![performance profiles](performance_profiles.png)", "", "## Sample efficiency", ""]
    missing = [g["label"] for g in report["groups"] if g["label"] not in report["curves"]]
    if report["curves"]:
        lines.append("![IQM against env steps](sample_efficiency.png)")
    if missing:
        lines += ["", "No curve (its runs share no stretch of env steps): " + ", ".join(missing)]
    return lines
