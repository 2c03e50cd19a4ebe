"""The benchmark tables of the docs and the README, rendered from `benchmarks/results/*.json`.

    python benchmarks/tables.py             # rewrites every table between its markers
    python benchmarks/tables.py --check     # exits 1 naming each table that differs
    python benchmarks/tables.py --figures   # and draws the figures (needs matplotlib)

A table sits in a markdown file between `<!-- table: NAME -->` and `<!-- /table -->`: NAME is a
key of TABLES, or `plans:` or `profile:` and a results file of `peers.py --plans`.
`tests/test_docs.py` fails when a committed table differs from what the results render."""

from __future__ import annotations

import argparse
import functools
import json
import re
import statistics
import sys
from typing import NamedTuple

from harness import BENCHMARKS, REPO, heading

RESULTS = BENCHMARKS / "results"
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
MARKED = re.compile(r"(<!-- table: (\S+) -->\n)(.*?)(<!-- /table -->)", re.DOTALL)
# The measures of a peer's result, by the start of their line's "what".
PROCESS, TO_RETURN, SPS = "whole process", "time to the return", "training, compile excluded"
COMMAND = "the command, start to exit"
FINAL = "final return"
# PureJaxRL's results files (`peers.py`'s default peer)
PUREJAXRL = ["peers.json", "peers_lean.json", "peers_16384envs.json", "peers_gru.json"]


@functools.cache  # a summary reads each file once per measure and side; callers only read
def load(name: str) -> dict:
    path = RESULTS / name
    if not path.is_file():
        sys.exit(f"tables.py: a table reads {path}, which does not exist")
    return json.loads(path.read_text())


def number(value: float | None, unit: str = "") -> str:
    if value is None:
        return "n/a"
    if unit == "steps/s":
        return f"{value / 1e6:.2f}M" if value >= 1e6 else f"{value / 1e3:.1f}k"
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"


def caption(result: dict, name: str) -> str:
    """When, on what and from which file a peer runner's result was measured."""
    versions = result["purerl"].get("versions", {})
    load_end = result["machine"].get("load_average_at_end") or [0]
    return (f"*{result['date'][:10]}, purerl {versions.get('purerl') or ''} (commit "
            f"{(result['purerl'].get('commit') or '?')[:7]}), jax {versions.get('jax')}, "
            f"{result['machine']['cpus']} CPU cores (load {max(load_end):.1f} at the end), "
            f"medians of {result['repeats']} turn{'s' if result['repeats'] > 1 else ''}; "
            f"`benchmarks/results/{name}`.*")


def line_of(table: dict, start: str) -> dict | None:
    return next((line for line in table["lines"] if line["what"].startswith(start)), None)


def pair(line: dict | None, theirs: str, ours: str) -> str:
    """`peer / purerl (ratio)` of one measure's medians."""
    if line is None:
        return "n/a"
    cell = " / ".join("not reached" if line.get(side) is None
                      else number(line[side]["median"], line["unit"]) for side in (theirs, ours))
    return cell + (f" ({line['ratio']:.2f})" if line["ratio"] is not None else "")


def peer_tables(result: dict) -> list[tuple[str, dict]]:
    """`(row, table)` of a result of `peers.py --peer NAME`, each table one program against
    one side of the peer."""
    return [(row, table) for row, tables in result["tables"].items() for table in tables]


def sources_line(names: list[str]) -> str:
    """The caption of a table drawn from several results files: each one's date, commit and
    turns."""
    return "*" + "; ".join(
        f"`{name}` {load(name)['date'][:10]} (commit {load(name)['purerl']['commit'][:7]}, "
        f"{load(name)['repeats']} turns)" for name in names) + ".*"


def peers_detail() -> str:
    """Every peer's results files as one table: a line per program and pair of sides, each
    cell `peer / purerl (purerl / peer)`, and the files' dates and commits below."""
    lines = ["| peer, program | sides | compile s | time to the return s | training steps/s | "
             "final return |", "| --- | --- | ---: | ---: | ---: | ---: |"]
    names = list(dict.fromkeys([*PUREJAXRL, *(setting.results for setting in SUMMARY)]))
    for name in names:
        result = load(name)
        for row, table in peer_tables(result):
            if row == "cli":  # the commands whole: the summary's
                continue
            theirs, ours = table["side"], table["purerl_side"]
            cells = [pair(line_of(table, start), theirs, ours)
                     for start in ("compile", TO_RETURN, SPS, FINAL)]
            lines.append(f"| {result['peer']}: {table['program']} | {heading(theirs)} / "
                         f"{heading(ours)} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n\n" + sources_line(names)


def plans(name: str) -> str:
    """`peers.py --plans`: each plan variant's compile and training rate against PureJaxRL's,
    medians over the turns (and the ratio's range over them)."""
    result = load(name)
    (turns,) = result["rows"].values()

    def median(side, key):
        return statistics.median(turn[0][side][key] for turn in turns)

    theirs = median("purejaxrl", "sps")
    lines = ["| purerl's plan | compile s | training steps/s | purerl / PureJaxRL |",
             "| --- | ---: | ---: | ---: |",
             f"| PureJaxRL | {median('purejaxrl', 'compile_s'):.1f} | "
             f"{number(theirs, 'steps/s')} | |"]
    for side in (side for side in turns[0][0] if side.startswith("purerl:")):
        ratios = [turn[0][side]["sps"] / turn[0]["purejaxrl"]["sps"] for turn in turns]
        spread = f" ({min(ratios):.2f}-{max(ratios):.2f})" if len(ratios) > 1 else ""
        lines.append(f"| {side.removeprefix('purerl:')} | {median(side, 'compile_s'):.1f} | "
                     f"{number(median(side, 'sps'), 'steps/s')} | "
                     f"{median(side, 'sps') / theirs:.2f}{spread} |")
    return "\n".join(lines) + "\n\n" + caption(result, name)


def profile(name: str) -> str:
    """`peers.py --profile`: each side's op time per kind of op, ms of one traced run."""
    (row, turns), = load(name)["rows"].items()
    sides = {"purejaxrl": "PureJaxRL", "purerl:plain": "purerl, plain plan",
             "purerl:purejaxrl_layout": "purerl, PureJaxRL's layout"}
    kinds = {side: turns[0][0][side]["profile"]["kinds_ms"] for side in sides}
    lines = ["| kind of op | " + " | ".join(sides.values()) + " |",
             "| --- |" + " ---: |" * len(sides)]
    for kind in sorted({k for each in kinds.values() for k in each},
                       key=lambda k: -kinds["purejaxrl"].get(k, 0)):
        lines.append(f"| {kind} | " + " | ".join(f"{kinds[side].get(kind, 0):,.0f}"
                                                  for side in sides) + " |")
    totals = [sum(each.values()) for each in kinds.values()]
    return "\n".join(lines + ["| all | " + " | ".join(f"{t:,.0f}" for t in totals) + " |"])


class Setting(NamedTuple):
    """A peer's home setting in the summary: its results file, row, seeds, envs (per seed),
    and the peer's sides lean and as shipped (None: it has one side)."""

    label: str
    results: str
    row: str
    seeds: int
    num_envs: int
    lean: str
    shipped: str | None
    shipped_against: str = "purerl"  # the purerl side the peer as shipped is compared with


SUMMARY = [
    Setting("rejax, CartPole, 1 seed (to 475)", "peers_rejax_devices.json", "cartpole", 1, 5,
            "rejax-lean", "rejax"),
    Setting("rejax, CartPole, 8 seeds, purerl's on the cores as devices (to 475)",
            "peers_rejax_devices.json", "cartpole", 8, 5, "rejax-lean", "rejax"),
    Setting("rejax, Breakout-MinAtar, 1e6 steps, 1 seed (to 10)", "peers_rejax_devices.json",
            "breakout", 1, 32, "rejax-lean", "rejax"),
    Setting("rejax, Breakout-MinAtar, 8 seeds as above (to 10)", "peers_rejax_devices.json",
            "breakout", 8, 32, "rejax-lean", "rejax"),
    Setting("Stoix `ff_ppo`, CartPole, 1,024 envs, its 256x256 relu (to 475)",
            "peers_stoix_256.json", "cartpole", 1, 1024, "stoix-lean", "stoix"),
    Setting("Stoix `ff_ppo`, CartPole, 1,024 envs, 64x64 tanh (to 475)", "peers_stoix.json",
            "cartpole-64tanh", 1, 1024, "stoix-lean", "stoix"),
    Setting("Stoix `ff_ppo`, CartPole, PureJaxRL's sizes (to 475)", "peers_stoix.json",
            "cartpole-purejaxrl", 1, 4, "stoix-lean", "stoix"),
    Setting("Brax PPO, `inverted_pendulum` (to 950; as shipped against purerl with Brax's "
            "evaluations)", "peers_brax.json", "inverted_pendulum", 1, 2048, "brax-lean", "brax",
            "purerl-eval"),
    Setting("Brax PPO, `hopper` (to 1500, as above)", "peers_brax_hopper.json", "hopper", 1, 256,
            "brax-lean", "brax", "purerl-eval"),
    Setting("Stable-Baselines3, RL Zoo CartPole (to 475)", "peers_sb3.json", "cartpole-zoo", 1,
            8, "sb3", "sb3-zoo"),
    Setting("sbx, RL Zoo CartPole (to 475)", "peers_sbx.json", "cartpole-zoo", 1, 8, "sbx",
            None),
]


def setting_line(setting: Setting, side: str, start: str,
                 ours: str = "purerl") -> dict | None:
    """A measure's line of `side` against purerl's side `ours` at a summary's setting."""
    for row, table in peer_tables(load(setting.results)):
        if (row == setting.row and table["side"] == side
                and f"{setting.seeds} seed" in table["program"]
                and table.get("purerl_side", "purerl") == ours):
            return line_of(table, start)
    return None


def time_cell(setting: Setting, side: str, ours: str) -> str:
    """purerl / peer of the time to the return; where neither side reached it, of the whole
    process (in italics); where only purerl did, its time."""
    line = setting_line(setting, side, TO_RETURN, ours)
    if line["ratio"] is not None:
        return f"{line['ratio']:.2f}"
    if line.get(ours):
        return f"peer never; purerl {line[ours]['median']:.1f} s"
    return f"_{setting_line(setting, side, PROCESS, ours)['ratio']:.2f}_"


def summary_cells(setting: Setting) -> tuple[str, str]:
    """The time and rate cells of a setting: against the peer lean, in brackets as shipped."""
    sides = [(setting.lean, "purerl")]
    sides += [(setting.shipped, setting.shipped_against)] if setting.shipped else []
    times = [time_cell(setting, side, ours) for side, ours in sides]
    rates = [f"{setting_line(setting, side, SPS, ours)['ratio']:.2f}x" for side, ours in sides]
    return tuple(cells[0] + (f" ({cells[1]})" if len(cells) > 1 else "")
                 for cells in (times, rates))


def summary() -> str:
    """Each peer at its home setting: purerl / peer of the time to the return and of the
    training rate, against the peer lean and (in brackets) as shipped."""
    tables = {(row, t["side"], t["purerl_side"]): t for name in PUREJAXRL
              for row, t in peer_tables(load(name))}

    def ratio(row, side, ours, start):
        return line_of(tables[(row, side, ours)], start)["ratio"]

    times = [" / ".join(f"{ratio('cli', side, ours, COMMAND):.2f}"
                        for ours in ("purerl", "purerl-warm"))
             for side in ("purejaxrl-lean", "purejaxrl")]
    rates = "; ".join(f"{ratio(row, 'purejaxrl', 'purerl', SPS):.2f}x at {label}"
                      for row, label in (("4envs", "4 envs"), ("1024envs", "1,024"),
                                         ("16384envs", "16,384")))
    rows = ["| peer, setting | time to the return, purerl / peer | training steps/s, purerl "
            "/ peer |", "| --- | ---: | ---: |",
            "| PureJaxRL `ppo.py`, CartPole, 4 envs (the whole command to 500, compile cache "
            f"empty / warm) | {times[0]} ({times[1]}) | {rates} |"]
    for setting in SUMMARY:
        rows.append(f"| {setting.label} | " + " | ".join(summary_cells(setting)) + " |")
    names = [*PUREJAXRL, *dict.fromkeys(setting.results for setting in SUMMARY)]
    dates = sorted(load(name)["date"][:10] for name in names)
    versions = sorted({load(name)["purerl"]["versions"].get("purerl") for name in names})
    return "\n".join(rows) + (f"\n\n*Measured {dates[0]} to {dates[-1]}, purerl "
                              f"{', '.join(versions)}; `benchmarks/results/peers*.json`.*")


def learning() -> str:
    result, chance = load("learning.json"), load("random_returns.json")
    rows = ["| preset | final return | random policy | env steps | wall s |",
            "| --- | ---: | ---: | ---: | ---: |"]
    for preset, run in sorted(result.items()):
        random_return = chance.get(preset, {}).get("random_return")
        rows.append(f"| `{preset}` | {number(run['final_return'])} | {number(random_return)} | "
                    f"{run['env_steps']:,} | {run['wall_s']:.0f} |")
    return "\n".join(rows)


def recurrent() -> str:
    rows = ["| preset, network | final return | steps/s | wall s |", "| --- | ---: | ---: | ---: |"]
    for name, run in load("recurrent.json").items():
        returns = ", ".join(number(v) for v in run["final_return_per_seed"])
        rows.append(f"| `{name}` | {returns} | {run['sps']:,.0f} | {run['wall_s']:.0f} |")
    return "\n".join(rows)


def rows_table(names: str | tuple, columns: list[tuple[str, str, str]]) -> str:
    """Results' `rows` as one table: `(heading, key, format)` per column."""
    lines = ["| " + " | ".join(h for h, _, _ in columns) + " |",
             "| " + " | ".join("---:" if f else "---" for _, _, f in columns) + " |"]
    names = (names,) if isinstance(names, str) else names
    for row in (row for name in names for row in load(name)["rows"]):
        lines.append("| " + " | ".join(format(row[key], f) for _, key, f in columns) + " |")
    return "\n".join(lines)


def population_table(rows: list[dict]) -> str:
    """A vmapped 16-member sweep against one member and one member with 16x the envs
    (`population.py`, which prints it too)."""
    lines = ["| envs per member | compile 1 / 16 members (s) | train 1 / 16 members (s) "
             "| steps/s 1 / 16 members | 16 members cost | 1 member, 16x envs, cost |",
             "|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['num_envs']} | {r['compile_s_one']:.1f} / "
                     f"{r['compile_s_population']:.1f} | {r['train_s_one']:.2f} / "
                     f"{r['train_s_population']:.2f} | {r['sps_one']:,} / "
                     f"{r['sps_population']:,} | {r['cost']:.2f}x | {r['cost_wide']:.2f}x |")
    return "\n".join(lines)


def scaling_table(rows: list[dict]) -> str:
    """Devices and processes, weak and strong scaling (`scaling.py`, which prints it too)."""
    lines = ["| mode | scaling | devices | envs | compile s | steps/s | speedup | efficiency "
             "| all-reduce share |", "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['mode']} | {r['scaling']} | {r['devices']} | {r['num_envs']} "
                     f"| {r['compile_s']:.1f} | {r['train_sps']:,} | {r['speedup']:.2f} "
                     f"| {r['efficiency']:.2f} | {r['all_reduce_share']:.2f} |")
    return "\n".join(lines)


def suites_table(rows: list[dict]) -> str:
    """Each suite's preset, training against raw stepping (`suites.py`, which prints it too)."""
    lines = ["| preset | envs | reset pool | compile train / raw (s) | training steps/s "
             "| raw env steps/s | training / raw |", "|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['preset']} | {r['num_envs']} | {r['reset_pool'] or '-'} | "
                     f"{r['compile_s_train']:.1f} / {r['compile_s_raw']:.1f} | "
                     f"{r['train_sps']:,} | {r['raw_env_sps']:,} | {r['train_over_raw']:.2f} |")
    return "\n".join(lines)


def gpu() -> str:
    """The GPU run: both sides' whole-run programs, turn by turn."""
    turns = [(load(f"gpu/purejaxrl_{i}.json"), load(f"gpu/purerl_{i}.json")) for i in (1, 2)]
    lines = ["| program | PureJaxRL steps/s | purerl steps/s | purerl / PureJaxRL |",
             "| --- | ---: | ---: | ---: |"]
    for index, program in enumerate(turns[0][1]):
        theirs = [turn[0][index]["sps"] for turn in turns]
        ours = [turn[1][index]["sps"] for turn in turns]
        seeds = f"{program['num_seeds']} seeds x " if program["num_seeds"] > 1 else ""
        ratios = [b / a for a, b in zip(theirs, ours)]
        lines.append(f"| {seeds}{program['num_envs']:,} envs | "
                     f"{' / '.join(number(v, 'steps/s') for v in theirs)} | "
                     f"{' / '.join(number(v, 'steps/s') for v in ours)} | "
                     f"{' / '.join(f'{r:.2f}' for r in ratios)} |")
    return "\n".join(lines)


TABLES = {
    "summary": summary,
    "peers-detail": peers_detail,
    "learning": learning,
    "recurrent": recurrent,
    "throughput": lambda: rows_table("throughput.json", [
        ("num_envs", "num_envs", "d"), ("compile s", "compile_s", ".1f"),
        ("from cache s", "cached_compile_s", ".1f"), ("train steps/s", "train_sps", ",d"),
        ("raw env steps/s", "raw_env_sps", ",d")]),
    "memory": lambda: rows_table("memory.json", [
        ("num_envs", "num_envs", "d"), ("CPU tricks forced", "cpu_tricks_forced", ""),
        ("temporaries GiB", "temporaries_gib", ".2f"), ("peak GiB", "peak_gib", ".2f")]),
    "population": lambda: population_table(load("population.json")["rows"]),
    "scaling": lambda: scaling_table(load("scaling.json")["rows"]),
    "suites": lambda: suites_table([row for name in ("suites.json", "suites_reset_pool.json")
                                    for row in load(name)["rows"]]),
    "gpu": gpu,
    "gpu-throughput": lambda: rows_table("gpu/throughput.json", [
        ("num_envs", "num_envs", ",d"), ("compile s", "compile_s", ".1f"),
        ("train steps/s", "train_sps", ",d"), ("raw env steps/s", "raw_env_sps", ",d")]),
    "gpu-memory": lambda: rows_table("gpu/memory.json", [
        ("Breakout-MinAtar num_envs", "num_envs", "d"),
        ("CPU tricks forced", "cpu_tricks_forced", ""), ("peak GiB", "peak_gib", ".2f")]),
    "iqm": lambda: iqm(),
    "chaos": lambda: chaos(),
}


def chaos() -> str:
    """The faulted run against the same run never stopped."""
    result = load("chaos.json")
    faults = {}
    for fault in result["faults"]:
        faults[fault["fault"]] = faults.get(fault["fault"], 0) + 1
    cost = result["checkpoint_cost"]
    return "\n".join([
        "| starts | faults | updates run again | wall s, faulted / uninterrupted | metrics and "
        "state bit-identical | checkpoints (each s) |", "| ---: | --- | ---: | ---: | --- | ---: |",
        f"| {result['starts']} | {', '.join(f'{n} {kind}' for kind, n in faults.items())} | "
        f"{result['updates_run_again']} | {result['faulted_s']} / {result['uninterrupted_s']} | "
        f"{result['identical_metrics'] and result['identical_state']} | {cost['saves']} "
        f"({cost['each_s']:.2f}) |"])


def iqm() -> str:
    """The presets over 8 seeds, as `report_presets.py` prints them."""
    from report_presets import markdown as report_markdown

    result = load("report_presets.json")
    return report_markdown(result["presets"], result["normalized"])


def render(name: str) -> str:
    """The table NAME: `plans:FILE` or `profile:FILE` of a `peers.py --plans` run,
    or a key of TABLES."""
    kind, _, file = name.rpartition(":")
    return {"plans": plans, "profile": profile}[kind](file) if kind \
        else TABLES[name]()


def rendered(text: str) -> str:
    """`text` with every marked table rendered anew."""
    return MARKED.sub(lambda m: f"{m.group(1)}{render(m.group(2))}\n{m.group(4)}", text)


def stale() -> list[str]:
    """The marked tables whose committed text differs from what the results render, as
    `page: NAME`."""
    found = []
    for page in PAGES:
        text = page.read_text()
        for match in MARKED.finditer(text):
            if match.group(3) != render(match.group(2)) + "\n":
                found.append(f"{page.relative_to(REPO)}: {match.group(2)}")
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--figures", action="store_true")
    args = parser.parse_args()
    if args.check:
        if found := stale():
            sys.exit("tables.py: differ from the results: " + ", ".join(found)
                     + "; run python benchmarks/tables.py")
        return
    for page in PAGES:
        page.write_text(rendered(page.read_text()))
    if args.figures:
        import figures

        figures.draw_all()


if __name__ == "__main__":
    main()
