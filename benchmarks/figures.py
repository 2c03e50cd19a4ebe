"""The benchmark figures, drawn from `benchmarks/results/*.json` (`python benchmarks/figures.py`):
training steps/s against num_envs for purerl and PureJaxRL (CPU and GPU) with each other peer
at its home setting, and the time to a return of each peer setting against purerl's. Scaling
over devices and processes is `scaling.py`'s figure."""

from __future__ import annotations

from harness import heading
from tables import PUREJAXRL, RESULTS, SPS, SUMMARY, TO_RETURN, load, setting_line


def pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def purejaxrl_rates() -> dict:
    """`{(side, platform): [(num_envs, median steps/s)]}` of the PureJaxRL rows (one seed)."""
    rates = {}
    for row, turns in (item for name in PUREJAXRL for item in load(name)["rows"].items()):
        if row.endswith("envs"):
            for side in ("purerl", "purejaxrl"):
                runs = sorted(turn[0][side]["sps"] for turn in turns)
                rates.setdefault((side, "CPU"), []).append(
                    (turns[0][0][side]["num_envs"], runs[len(runs) // 2]))
    for turns in load("gpu/peers.json")["rows"].values():
        for side, run in turns[0][0].items():
            if run["num_seeds"] == 1:
                rates.setdefault((side, "GPU"), []).append((run["num_envs"], run["sps"]))
    return rates


def draw_rates(path) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 6.5), layout="constrained")
    for (side, platform), points in sorted(purejaxrl_rates().items()):
        envs, sps = zip(*sorted(points))
        ax.plot(envs, sps, "o-" if side == "purerl" else "s--",
                label=f"{'purerl' if side == 'purerl' else 'PureJaxRL'}, {platform}")
    # Each other peer at its home setting (one seed), lean, and purerl matching it
    for number, setting in enumerate(s for s in SUMMARY if s.seeds == 1):
        line = setting_line(setting, setting.lean, SPS)
        ax.plot([setting.num_envs] * 2, [line[setting.lean]["median"], line["purerl"]["median"]],
                ":", color="grey", lw=0.8)
        ax.plot(setting.num_envs, line[setting.lean]["median"], "x", color=f"C{4 + number % 6}",
                label=setting.label.split(" (")[0])
        ax.plot(setting.num_envs, line["purerl"]["median"], ".", color=f"C{4 + number % 6}")
    ax.set(xscale="log", yscale="log", xlabel="num_envs (one seed)", ylabel="training env steps/s",
           title="purerl (lines, dots) and each peer (lines, crosses), CPU and GPU")
    ax.grid(True, which="both", alpha=0.3)
    fig.legend(loc="outside lower center", ncols=2, fontsize="x-small")
    fig.savefig(path, dpi=120)
    plt.close(fig)


def draw_time_to_return(path) -> None:
    """Seconds from the process's start to the return, each setting's peer (lean and as
    shipped) against purerl."""
    plt = pyplot()
    bars = []
    for setting in SUMMARY:
        for side, ours in ((setting.lean, "purerl"), (setting.shipped, setting.shipped_against)):
            line = setting_line(setting, side, TO_RETURN, ours) if side else None
            if line and line.get(ours) and line.get(side):
                bars.append((f"{setting.label.split(' (')[0]}: {heading(side)}",
                             line[side]["median"], line[ours]["median"]))
    fig, ax = plt.subplots(figsize=(9, 0.4 * len(bars) + 1.2), layout="constrained")
    positions = range(len(bars))
    ax.barh([p - 0.2 for p in positions], [b[1] for b in bars], 0.4, label="peer")
    ax.barh([p + 0.2 for p in positions], [b[2] for b in bars], 0.4, label="purerl")
    ax.set_yticks(list(positions), [b[0] for b in bars], fontsize="small")
    ax.invert_yaxis()
    ax.set(xlabel="seconds from the process's start to the return", xscale="log")
    ax.legend(fontsize="small")
    fig.savefig(path, dpi=120)
    plt.close(fig)


def draw_all() -> None:
    draw_rates(RESULTS / "peers_rates.png")
    draw_time_to_return(RESULTS / "peers_time_to_return.png")


if __name__ == "__main__":
    draw_all()
