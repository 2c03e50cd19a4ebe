"""The benchmark figures, drawn from `benchmarks/results/*.json` (`python benchmarks/figures.py`
draws them all): training steps/s against num_envs of purerl and PureJaxRL (CPU and GPU) with
each other peer at its home setting; the time to a return of each peer setting against
purerl's; scaling over devices and processes (which `scaling.py` also draws beside its JSON)."""

from __future__ import annotations

import contextlib

from harness import heading
from tables import PUREJAXRL, RESULTS, SPS, SUMMARY, TO_RETURN, load, setting_line


@contextlib.contextmanager
def figure(path, dpi: int = 120, **subplots):
    """`(fig, axes)` of pyplot's `subplots(**subplots)`, saved to `path` at the end."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(layout="constrained", **subplots)
    yield fig, axes
    fig.savefig(path, dpi=dpi)
    plt.close(fig)


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
    with figure(path, figsize=(8, 6.5)) as (fig, ax):
        for (side, platform), points in sorted(purejaxrl_rates().items()):
            ax.plot(*zip(*sorted(points)), "o-" if side == "purerl" else "s--",
                    label=f"{heading(side)}, {platform}")
        # Each other peer at its home setting (one seed), lean, and purerl matching it
        for number, setting in enumerate(s for s in SUMMARY if s.seeds == 1):
            line, color = setting_line(setting, setting.lean, SPS), f"C{4 + number % 6}"
            ours, theirs = line["purerl"]["median"], line[setting.lean]["median"]
            ax.plot([setting.num_envs] * 2, [theirs, ours], ":", color="grey", lw=0.8)
            ax.plot(setting.num_envs, theirs, "x", color=color, label=setting.label.split(" (")[0])
            ax.plot(setting.num_envs, ours, ".", color=color)
        ax.set(xscale="log", yscale="log", xlabel="num_envs (one seed)",
               ylabel="training env steps/s",
               title="purerl (lines, dots) and each peer (lines, crosses), CPU and GPU")
        ax.grid(True, which="both", alpha=0.3)
        fig.legend(loc="outside lower center", ncols=2, fontsize="x-small")


def draw_time_to_return(path) -> None:
    """Seconds to the return of each setting's peer (lean and as shipped) and of purerl."""
    bars = []
    for setting in SUMMARY:
        for side, ours in ((setting.lean, "purerl"), (setting.shipped, setting.shipped_against)):
            line = setting_line(setting, side, TO_RETURN, ours) if side else None
            if line and line.get(ours) and line.get(side):
                bars.append((f"{setting.label.split(' (')[0]}: {heading(side)}",
                             line[side]["median"], line[ours]["median"]))
    with figure(path, figsize=(9, 0.4 * len(bars) + 1.2)) as (_, ax):
        positions = range(len(bars))
        ax.barh([p - 0.2 for p in positions], [b[1] for b in bars], 0.4, label="peer")
        ax.barh([p + 0.2 for p in positions], [b[2] for b in bars], 0.4, label="purerl")
        ax.set_yticks(list(positions), [b[0] for b in bars], fontsize="small")
        ax.invert_yaxis()
        ax.set(xlabel="seconds from the process's start to the return", xscale="log")
        ax.legend(fontsize="small")


def draw_scaling(result: dict, path) -> None:
    """`scaling.py`'s result: steps/s against devices, a panel per scaling, a line per mode."""
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    rows = result["rows"]
    with figure(path, dpi=100, ncols=2, figsize=(10, 4.4)) as (fig, axes):
        for ax, scaling in zip(axes, ("weak", "strong")):
            for mode in sorted({r["mode"] for r in rows if r["scaling"] == scaling}):
                counts, sps = zip(*sorted((r["devices"], r["train_sps"]) for r in rows
                                          if r["mode"] == mode and r["scaling"] == scaling))
                ax.plot(counts, sps, marker="o", label=mode)
                if mode == rows[0]["mode"]:
                    ax.plot(counts, [sps[0] * c / counts[0] for c in counts], ls="--",
                            color="grey", label=f"ideal (linear from 1 of {mode})")
            ax.set(title=f"{scaling} scaling", xlabel="devices", ylabel="training env steps/s",
                   xscale="log", yscale="log")
            ax.set_xticks(sorted({r["devices"] for r in rows}))
            ax.xaxis.set_major_formatter(ScalarFormatter())
            ax.xaxis.set_minor_formatter(NullFormatter())
            ax.grid(True, which="major", alpha=0.3)
        fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncols=3)


if __name__ == "__main__":
    draw_rates(RESULTS / "peers_rates.png")
    draw_time_to_return(RESULTS / "peers_time_to_return.png")
    draw_scaling(load("scaling.json"), RESULTS / "scaling.png")
