"""The benchmark tables of the docs and the README, rendered from `benchmarks/results/*.json`.

    python benchmarks/tables.py             # rewrites every table between its markers
    python benchmarks/tables.py --check     # exits 1 naming each table that differs

A table sits in a markdown file between `<!-- table: NAME -->` and `<!-- /table -->`: NAME is a
key of TABLES or ROWS, or `plans:` or `profile:` and a results file of `peers.py --plans`.
`tests/test_docs.py` fails when a committed table differs from what the results render."""

from __future__ import annotations

import argparse
import functools
import json
import re
import sys
from collections import Counter
from typing import NamedTuple

from harness import BENCHMARKS, REPO, detail, line_of, number

RESULTS = BENCHMARKS / "results"
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
MARKED = re.compile(r"(<!-- table: (\S+) -->\n)(.*?)(<!-- /table -->)", re.DOTALL)
# The measures of a peer's result, by the start of their line's "what"
PROCESS, TO_RETURN, SPS = "whole process", "time to the return", "training, compile excluded"
COMMAND, FINAL = "the command", "final return"
# PureJaxRL's results files (`peers.py`'s default peer)
PUREJAXRL = ["peers.json"]


@functools.cache  # a summary reads each file once per measure and side; callers only read
def load(name: str) -> dict:
    path = RESULTS / name
    if not path.is_file():
        sys.exit(f"tables.py: a table reads {path}, which does not exist")
    return json.loads(path.read_text())


def peer_tables(result: dict) -> list[tuple[str, dict]]:
    """`(row, table)` of a `peers.py` result, each table one program against one peer side."""
    return [(row, table) for row, tables in result["tables"].items() for table in tables]


def plans(name: str) -> str:
    """`peers.py --plans`: each plan's compile and training rate against PureJaxRL's (medians
    over the turns, and the ratio's range over them), and when and on what they were measured."""
    result = load(name)
    (tables,) = result["tables"].values()
    rate, compile_s = line_of(tables[0], SPS), line_of(tables[0], "compile")
    lines = ["| purerl's plan | compile s | training steps/s | purerl / PureJaxRL |",
             "| --- | ---: | ---: | ---: |",
             f"| PureJaxRL | {compile_s['purejaxrl']['median']:.1f} | "
             f"{number(rate['purejaxrl']['median'], 'steps/s')} | |"]
    for table in tables:
        side, rate, compile_s = table["purerl_side"], line_of(table, SPS), line_of(table, "compile")
        spread = rate["turn_ratios"] if len(rate["turn_ratios"] or []) > 1 else None
        lines.append(f"| {side.removeprefix('purerl:')} | {compile_s[side]['median']:.1f} | "
                     f"{number(rate[side]['median'], 'steps/s')} | {rate['ratio']:.2f}"
                     + (f" ({min(spread):.2f}-{max(spread):.2f})" if spread else "") + " |")
    versions = result["purerl"].get("versions", {})
    load_end = result["machine"].get("load_average_at_end") or [0]
    return "\n".join(lines) + (
        f"\n\n*{result['date'][:10]}, purerl {versions.get('purerl') or ''} (commit "
        f"{(result['purerl'].get('commit') or '?')[:7]}), jax {versions.get('jax')}, "
        f"{result['machine']['cpus']} CPU cores (load {max(load_end):.1f} at the end), "
        f"medians of {result['repeats']} turn{'s' if result['repeats'] > 1 else ''}; "
        f"`benchmarks/results/{name}`.*")


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
    """A peer's home setting in the summary (envs per seed; `shipped` None: it has one side)."""

    label: str
    row: str
    seeds: int
    num_envs: int
    results: str
    lean: str
    shipped: str | None
    shipped_against: str = "purerl"  # purerl's side against the peer as shipped


REJAX = ("peers_rejax_devices.json", "rejax-lean", "rejax")  # one results file for its four
STOIX, BRAX = ("stoix-lean", "stoix"), ("brax-lean", "brax", "purerl-eval")
SUMMARY = [Setting(*fields) for fields in (
    ("rejax, CartPole, 1 seed (to 475)", "cartpole", 1, 5, *REJAX),
    ("rejax, CartPole, 8 seeds, purerl's on the cores as devices (to 475)", "cartpole", 8, 5,
     *REJAX),
    ("rejax, Breakout-MinAtar, 1e6 steps, 1 seed (to 10)", "breakout", 1, 32, *REJAX),
    ("rejax, Breakout-MinAtar, 8 seeds as above (to 10)", "breakout", 8, 32, *REJAX),
    ("Stoix `ff_ppo`, CartPole, 1,024 envs, its 256x256 relu (to 475)", "cartpole", 1, 1024,
     "peers_stoix_256.json", *STOIX),
    ("Stoix `ff_ppo`, CartPole, 1,024 envs, 64x64 tanh (to 475)", "cartpole-64tanh", 1, 1024,
     "peers_stoix.json", *STOIX),
    ("Stoix `ff_ppo`, CartPole, PureJaxRL's sizes (to 475)", "cartpole-purejaxrl", 1, 4,
     "peers_stoix.json", *STOIX),
    ("Brax PPO, `inverted_pendulum` (to 950; as shipped against purerl with Brax's evaluations)",
     "inverted_pendulum", 1, 2048, "peers_brax.json", *BRAX),
    ("Brax PPO, `hopper` (to 1500, as above)", "hopper", 1, 256, "peers_brax_hopper.json", *BRAX),
    ("Stable-Baselines3, RL Zoo CartPole (to 475)", "cartpole-zoo", 1, 8, "peers_sb3.json", "sb3",
     "sb3-zoo"),
    ("sbx, RL Zoo CartPole (to 475)", "cartpole-zoo", 1, 8, "peers_sbx.json", "sbx", None),
    ("JaxMARL IPPO `ippo_ff_mpe.py`, MPE simple spread, 3 agents (to a team return of -50)",
     "mpe", 1, 16, "peers_jaxmarl.json", "jaxmarl-lean", "jaxmarl"))]
# `peers.py --peer jaxmarl`'s: MPE, Overcooked and SMAX (`--rows ROW --out ...`)
JAXMARL_FILES = ("peers_jaxmarl.json", "peers_jaxmarl_overcooked.json", "peers_jaxmarl_smax.json")
PEER_FILES = list(dict.fromkeys([*PUREJAXRL, *(setting.results for setting in SUMMARY),
                                 *JAXMARL_FILES]))


def setting_line(setting: Setting, side: str, start: str, ours: str = "purerl") -> dict | None:
    """A measure's line of `side` against purerl's side `ours` at a summary's setting."""
    return next((line_of(table, start) for row, table in peer_tables(load(setting.results))
                 if row == setting.row and table["side"] == side
                 and f"{setting.seeds} seed" in table["program"]
                 and table.get("purerl_side", "purerl") == ours), None)


def time_cell(setting: Setting, side: str, ours: str) -> str:
    """purerl / peer of the time to the return; where neither side reached it, of the whole
    process (in italics); where only purerl did, its time."""
    line = setting_line(setting, side, TO_RETURN, ours)
    if line["ratio"] is not None:
        return f"{line['ratio']:.2f}"
    if line.get(ours):
        return f"peer never; purerl {line[ours]['median']:.1f} s"
    return f"_{setting_line(setting, side, PROCESS, ours)['ratio']:.2f}_"


def summary_row(setting: Setting) -> str:
    """A setting's row: time and rate cells against the peer lean and, in brackets, as shipped."""
    sides = [(setting.lean, "purerl")]
    sides += [(setting.shipped, setting.shipped_against)] if setting.shipped else []
    times = [time_cell(setting, side, ours) for side, ours in sides]
    rates = [f"{setting_line(setting, side, SPS, ours)['ratio']:.2f}x" for side, ours in sides]
    cells = (cells[0] + (f" ({cells[1]})" if len(cells) > 1 else "") for cells in (times, rates))
    return f"| {setting.label} | " + " | ".join(cells) + " |"


def summary() -> str:
    """Each peer at its home setting: purerl / peer of the time to the return and training rate."""
    tables = {(row, t["side"], t["purerl_side"]): t for name in PUREJAXRL
              for row, t in peer_tables(load(name))}
    times = [" / ".join(f"{line_of(tables['cli', side, ours], COMMAND)['ratio']:.2f}"
                        for ours in ("purerl", "purerl-warm"))
             for side in ("purejaxrl-lean", "purejaxrl")]
    rates = "; ".join(f"{line_of(tables[row, 'purejaxrl', 'purerl'], SPS)['ratio']:.2f}x at "
                      f"{label}" for row, label in (("4envs", "4 envs"), ("1024envs", "1,024"),
                                                    ("16384envs", "16,384")))
    rows = ["| peer, setting | time to the return, purerl / peer | training steps/s, purerl "
            "/ peer |", "| --- | ---: | ---: |",
            "| PureJaxRL `ppo.py`, CartPole, 4 envs (the whole command to 500, compile cache "
            f"empty / warm) | {times[0]} ({times[1]}) | {rates} |", *map(summary_row, SUMMARY)]
    dates = sorted(load(name)["date"][:10] for name in PEER_FILES)
    versions = sorted({load(name)["purerl"]["versions"].get("purerl") for name in PEER_FILES})
    return "\n".join(rows) + (f"\n\n*Measured {dates[0]} to {dates[-1]}, purerl "
                              f"{', '.join(versions)}; `benchmarks/results/peers*.json`.*")


def peers_detail() -> str:
    """Every peer's programs, a line per program and pair of sides (the command line's row is
    the summary's), and each results file's date, commit and turns below."""
    tables = [(load(name)["peer"], table) for name in PEER_FILES
              for row, table in peer_tables(load(name)) if row != "cli"]
    sources = "; ".join(f"`{name}` {load(name)['date'][:10]} (commit "
                        f"{load(name)['purerl']['commit'][:7]}, {load(name)['repeats']} turns)"
                        for name in PEER_FILES)
    return detail(tables, ("compile", TO_RETURN, SPS, FINAL)) + f"\n\n*{sources}.*"


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


# Tables of results' `rows`: a heading and a row's template (`str.format` of the row)
ROWS = {
    "throughput": ("| num_envs | compile s | from cache s | train steps/s | raw env steps/s |\n"
                   "| ---: | ---: | ---: | ---: | ---: |", "| {num_envs:d} | {compile_s:.1f} | "
                   "{cached_compile_s:.1f} | {train_sps:,d} | {raw_env_sps:,d} |"),
    "memory": ("| num_envs | CPU tricks forced | temporaries GiB | peak GiB |\n"
               "| ---: | --- | ---: | ---: |",
               "| {num_envs:d} | {cpu_tricks_forced} | {temporaries_gib:.2f} | {peak_gib:.2f} |"),
    "population": ("| envs per member | compile 1 / 16 members (s) | train 1 / 16 members (s) | "
                   "steps/s 1 / 16 members | 16 members cost | 1 member, 16x envs, cost |\n"
                   "|---:|---:|---:|---:|---:|---:|",
                   "| {num_envs} | {compile_s_one:.1f} / {compile_s_population:.1f} | "
                   "{train_s_one:.2f} / {train_s_population:.2f} | {sps_one:,} / "
                   "{sps_population:,} | {cost:.2f}x | {cost_wide:.2f}x |"),
    "scaling": ("| mode | scaling | devices | envs | compile s | steps/s | speedup | efficiency "
                "| all-reduce share |\n|---|---|---:|---:|---:|---:|---:|---:|---:|",
                "| {mode} | {scaling} | {devices} | {num_envs} | {compile_s:.1f} | {train_sps:,} "
                "| {speedup:.2f} | {efficiency:.2f} | {all_reduce_share:.2f} |"),
    "suites": ("| preset | envs | reset pool | compile train / raw (s) | training steps/s "
               "| raw env steps/s | training / raw |\n|---|---:|---:|---:|---:|---:|---:|",
               "| {preset} | {num_envs} | {pool} | {compile_s_train:.1f} / {compile_s_raw:.1f} | "
               "{train_sps:,} | {raw_env_sps:,} | {train_over_raw:.2f} |"),
    "gpu-throughput": ("| num_envs | compile s | train steps/s | raw env steps/s |\n"
                       "| ---: | ---: | ---: | ---: |", "| {num_envs:,d} | {compile_s:.1f} | "
                       "{train_sps:,d} | {raw_env_sps:,d} |"),
}


def rows_table(name: str, rows: list[dict]) -> str:
    """`rows` as the table ROWS[name] (the scripts print theirs with it too)."""
    heading, template = ROWS[name]
    return "\n".join([heading, *(template.format(**row, pool=row.get("reset_pool") or "-")
                                  for row in rows)])


def gpu() -> str:
    """The GPU run of `peers.py`'s accelerator rows: both sides' training rates, turn by turn."""
    lines = ["| program | PureJaxRL steps/s | purerl steps/s | purerl / PureJaxRL |",
             "| --- | ---: | ---: | ---: |"]
    for turns in load("gpu/peers.json")["rows"].values():
        runs = [turn[0] for turn in turns]
        theirs, ours = ([run[side]["sps"] for run in runs] for side in ("purejaxrl", "purerl"))
        program = runs[0]["purerl"]
        seeds = f"{program['num_seeds']} seeds x " if program["num_seeds"] > 1 else ""
        rates = [" / ".join(number(v, "steps/s") for v in sps) for sps in (theirs, ours)]
        ratios = " / ".join(f"{b / a:.2f}" for a, b in zip(theirs, ours))
        lines.append(f"| {seeds}{program['num_envs']:,} envs | {' | '.join(rates)} | {ratios} |")
    return "\n".join(lines)


def chaos() -> str:
    """The faulted run against the same run never stopped."""
    result = load("chaos.json")
    faults = Counter(fault["fault"] for fault in result["faults"])
    return "\n".join([
        "| starts | faults | updates run again | wall s, faulted / uninterrupted | metrics and "
        "state bit-identical | checkpoints (each s) |", "| ---: | --- | ---: | ---: | --- | ---: |",
        f"| {result['starts']} | {', '.join(f'{n} {kind}' for kind, n in faults.items())} | "
        f"{result['updates_run_again']} | {result['faulted_s']} / {result['uninterrupted_s']} | "
        f"{result['identical_metrics'] and result['identical_state']} | "
        f"{result['checkpoint_cost']['saves']} ({result['checkpoint_cost']['each_s']:.2f}) |"])


def interval(stat: dict) -> str:
    return f"{stat['point']:.4g} [{stat['interval'][0]:.4g}, {stat['interval'][1]:.4g}]"


def iqm_table(presets: dict, normalized: dict | None) -> str:
    """The table of each preset's report, and a line of the normalized one."""
    lines = ["| preset | env | seeds | env steps | IQM [95% CI] | mean [95% CI] | "
             "optimality gap [95% CI] | wall s |",
             "| --- | --- | ---: | ---: | --- | --- | --- | ---: |"]
    for preset, r in presets.items():
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


def iqm() -> str:
    """The presets over 8 seeds (`learning.py --report`, which prints it too)."""
    return iqm_table(**load("report_presets.json"))


def jaxmarl() -> str:
    """JaxMARL's baselines against purerl at their settings (`peers.py --peer jaxmarl`): MPE,
    then Overcooked and SMAX, each results file with its caption."""
    parts = []
    for name in JAXMARL_FILES:
        result = load(name)
        ours, theirs = result["purerl"], result["jaxmarl"]
        tables = [("JaxMARL", table) for _, table in peer_tables(result)]
        turns = f"{result['repeats']} turn{'s' if result['repeats'] > 1 else ''}"
        parts.append(
            detail(tables, (PROCESS, "compile", SPS, TO_RETURN, FINAL))
            + f"\n\n*Measured {result['date'][:10]} on {result['machine']['cpus']} CPU "
            f"cores, purerl {ours['versions']['purerl']} (commit {ours['commit'][:7]}), "
            f"jaxmarl {theirs['versions']['jaxmarl']} (baselines at {theirs['commit'][:7]}), "
            f"{turns}; `benchmarks/results/{name}`"
            + (", assembled from the turn's per-side results" if "assembled" in result else "")
            + ".*")
    return "\n\n".join(parts)


TABLES = {"summary": summary, "peers-detail": peers_detail, "learning": learning,
          "recurrent": recurrent, "gpu": gpu, "chaos": chaos, "iqm": iqm, "jaxmarl": jaxmarl}


def render(name: str) -> str:
    """The table NAME: a key of TABLES or ROWS, or `plans:FILE` or `profile:FILE`."""
    kind, _, file = name.rpartition(":")
    if kind:
        return {"plans": plans, "profile": profile}[kind](file)
    if name in ROWS:  # its results files: NAME.json but for these
        files = {"suites": ["suites.json", "suites_reset_pool.json"],
                 "gpu-throughput": ["gpu/throughput.json"]}.get(name, [f"{name}.json"])
        return rows_table(name, [row for file in files for row in load(file)["rows"]])
    return TABLES[name]()


def stale() -> list[str]:
    """The marked tables that differ from what the results render, as `page: NAME`."""
    return [f"{page.relative_to(REPO)}: {match.group(2)}" for page in PAGES
            for match in MARKED.finditer(page.read_text())
            if match.group(3) != render(match.group(2)) + "\n"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true")
    if not parser.parse_args().check:
        for page in PAGES:
            page.write_text(MARKED.sub(lambda m: f"{m.group(1)}{render(m.group(2))}\n{m.group(4)}",
                                       page.read_text()))
    elif found := stale():
        sys.exit("tables.py: differ from the results: " + ", ".join(found)
                 + "; run python benchmarks/tables.py")


if __name__ == "__main__":
    main()
