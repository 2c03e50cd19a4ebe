"""The harness the benchmarks share: where they live, how a side's command is run and timed,
what a result records of the machine, the packages and the checkout, and how two sides'
numbers become a table's line (each side's median and range over the turns, and their ratio).
`peers.py` and `other_peers.py` run the turns; this module runs no peer and imports no side."""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent


REPO = BENCHMARKS.parent


PURERL_PACKAGES = ["purerl", "jax", "jaxlib", "flax", "optax", "chex", "gymnax", "hydra-core",
                   "numpy"]


VERSIONS_SCRIPT = """
import importlib.metadata, json, platform, sys
def version(name):
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None
print(json.dumps({"python": platform.python_version(), **{n: version(n) for n in sys.argv[1:]}}))"""


def subprocess_env() -> dict:
    """This process's environment without JAX's cache variable: each run says where its cache
    is, or that it has none."""
    return {k: v for k, v in os.environ.items() if k != "JAX_COMPILATION_CACHE_DIR"}


# A command still running after this long has hung: jaxlib's batched LAPACK QR (PureJaxRL's
# vmapped make_train draws its orthogonal inits in one) can wait forever for XLA:CPU's pool
# threads. It is killed and run once more.
HUNG_AFTER_S = 600


def timed_run(command: list, cwd: Path, log: Path, env: dict | None = None,
              hung_after_s: float = HUNG_AFTER_S) -> float:
    """Wall seconds of `command` from start to exit; its output goes to `log`. A command still
    running after `hung_after_s` has hung: it is run again once; exits with the end of its
    output when the command fails or hangs twice."""
    name = " ".join(map(str, command))
    for attempt in (1, 2):
        with log.open("w") as out:
            start = time.perf_counter()
            try:
                returncode = subprocess.run(command, cwd=cwd, env=env or subprocess_env(),
                                            stdout=out, stderr=subprocess.STDOUT,
                                            timeout=hung_after_s).returncode
            except subprocess.TimeoutExpired:
                print(f"{name} hung: killed after {hung_after_s:g} s"
                      + ("; running it again" if attempt == 1 else ""), flush=True)
                continue
            wall_s = time.perf_counter() - start
        if returncode:
            sys.exit(f"{name} exited {returncode}; the end of its output:\n"
                     f"{log.read_text()[-3000:]}")
        return wall_s
    sys.exit(f"{name} hung twice; the end of its output:\n{log.read_text()[-3000:]}")


def timed(programs: dict, key, repeats: int = 1) -> tuple[dict, dict]:
    """The benchmarks' one timer of compiled programs: each called `repeats` times, taking
    turns (a slow spell of this shared machine then hits all of them alike), each call up to
    `jax.block_until_ready`; the first call with `key`, the others with `fold_in(key, i)`."""
    import jax

    best, outputs = {name: float("inf") for name in programs}, {}
    for i in range(repeats):
        call_key = key if i == 0 else jax.random.fold_in(key, i)
        for name, compiled in programs.items():
            start = time.perf_counter()
            outputs[name] = jax.block_until_ready(compiled(call_key))
            best[name] = min(best[name], time.perf_counter() - start)
    return best, outputs


def compile_and_run(train, key, jit: bool = True,
                    profile: Path | None = None) -> tuple[dict, object]:
    """`jax.jit(train).lower(key)`, its `.compile()` and one call (`timed`), timed apart."""
    import jax

    start = time.perf_counter()
    lowered = (jax.jit(train) if jit else train).lower(key)
    lower_s = time.perf_counter() - start
    compiled = lowered.compile()
    compile_s = time.perf_counter() - start
    best, outputs = timed({"train": compiled}, key)
    timings = {"lower_s": round(lower_s, 3), "compile_s": round(compile_s, 3),
               "train_s": round(best["train"], 3)}
    if profile is not None:
        from op_profile import profiled

        timings["profile"] = profiled(compiled, (key,), profile)
    return timings, outputs["train"]


def start_jax(compile_cache: str | None = None) -> None:
    """Turns JAX's persistent compilation cache off, so that every compile is cold (or, on a
    purerl side, points it at `compile_cache` as purerl's command line sets its cache up), and
    pays JAX's one-time start-up (backend, jit machinery) here rather than in the first
    compile."""
    import jax
    import jax.numpy as jnp

    if compile_cache is None:
        jax.config.update("jax_enable_compilation_cache", False)
    else:
        from purerl.parallel.runtime import use_compile_cache

        use_compile_cache(compile_cache)
    jax.block_until_ready(jax.jit(lambda x: x + 1)(jnp.zeros(())))


def purerl_curve(config, metrics) -> tuple[list, list]:
    """A purerl run's training curve, as the other peers' drivers read it."""
    import numpy as np

    sums = np.asarray(metrics.episode_return_sum, dtype=np.float64).reshape(
        -1, config.num_updates).sum(axis=0)
    counts = np.asarray(metrics.episode_count).reshape(-1, config.num_updates).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        returns = (sums / counts).tolist()
    return [config.batch_size * k for k in range(1, config.num_updates + 1)], returns


def cpu_devices(num_seeds: int = 8) -> int:
    """The CPU devices the command line splits `num_seeds` seeds over here (`cpu_devices=0`)."""
    from purerl.config import auto_cpu_devices

    return auto_cpu_devices([num_seeds])


def cut(programs: list, total_timesteps: int | None) -> list:
    """Programs with their budget cut, for a check."""
    if not total_timesteps:
        return programs
    return [dict(p, total_timesteps=total_timesteps) for p in programs]


def stats(values: list) -> dict | None:
    values = [v for v in values if v is not None]
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "values": values}


PEER_SIDES = ("purejaxrl", "purerl")  # the sides of a table's line: the ratio's denominator first


GRU_VS_MLP_SIDES = ("mlp", "gru")


def comparison(what: str, unit: str, purejaxrl: list, purerl: list, ratio_of: str | None,
               paired: bool = True, sides: tuple = PEER_SIDES) -> dict:
    """One line of the table: each side's values over the turns, and purerl / PureJaxRL of
    their medians where `ratio_of` ("time" or "steps/s") says what the ratio compares; with
    `paired` (the i-th values of the two sides come from the same turn), the range of that
    ratio over the turns too. `sides` names the two sides in the line (gru-vs-mlp: MLP in
    place of PureJaxRL, GRU in place of purerl)."""
    theirs, ours = sides
    line = {"what": what, "unit": unit, theirs: stats(purejaxrl), ours: stats(purerl),
            "ratio_of": ratio_of, "ratio": None, "turn_ratios": None}
    if ratio_of and line[theirs] and line[ours]:
        line["ratio"] = round(line[ours]["median"] / line[theirs]["median"], 3)
        if paired:
            line["turn_ratios"] = [round(a / b, 3) for a, b in zip(purerl, purejaxrl)]
    return line


def formatted(values: dict | None, unit: str) -> str:
    if values is None:
        return "n/a"

    def one(v):
        return {"steps/s": f"{v / 1000:.1f}k", "x": f"{v:.2f}"}.get(unit, f"{v:.1f}")

    if values["min"] == values["max"]:
        return one(values["median"])
    return f"{one(values['median'])} ({one(values['min'])}-{one(values['max'])})"


# How a table heads each side's column.
HEADINGS = {"purejaxrl": "PureJaxRL", "purerl": "purerl", "mlp": "purerl MLP",
            "gru": "purerl GRU", "rejax": "rejax", "rejax-lean": "rejax lean",
            "stoix": "Stoix", "stoix-lean": "Stoix lean",
            "sb3-zoo": "SB3 (RL Zoo)", "sb3": "SB3", "sbx": "sbx", "brax": "Brax",
            "brax-lean": "Brax lean", "purerl-eval": "purerl with evaluations",
            "purerl-warm": "purerl, compile cache warm"}


def markdown(lines: list[dict], sides: tuple = PEER_SIDES) -> str:
    """The table of `lines`, whose sides `sides` names: (the ratio's denominator, numerator),
    keys of HEADINGS."""
    theirs, ours = sides
    ratio_heading = ("GRU / MLP" if sides == GRU_VS_MLP_SIDES
                     else f"{HEADINGS[ours]} / {HEADINGS[theirs]}")
    table = [f"| what | {HEADINGS[theirs]} | {HEADINGS[ours]} | {ratio_heading} | ratio of |",
             "| --- | ---: | ---: | ---: | --- |"]
    for line in lines:
        ratio = "" if line["ratio"] is None else f"{line['ratio']:.2f}"
        if line["turn_ratios"]:
            ratio += f" ({min(line['turn_ratios']):.2f}-{max(line['turn_ratios']):.2f})"
        unit = "" if line["unit"] in ("x", "return") else f", {line['unit']}"
        table.append(f"| {line['what']}{unit} | {formatted(line[theirs], line['unit'])} | "
                     f"{formatted(line[ours], line['unit'])} | {ratio} | "
                     f"{line['ratio_of'] or ''} |")
    return "\n".join(table)


def package_versions(python: str, packages: list[str]) -> dict:
    output = subprocess.run([python, "-c", VERSIONS_SCRIPT, *packages], capture_output=True,
                            text=True, check=True).stdout
    return json.loads(output)


def git_state(path: Path) -> dict:
    def git(*args):
        return subprocess.run(["git", "-C", str(path), *args], capture_output=True,
                              text=True).stdout.strip()

    return {"commit": git("rev-parse", "HEAD") or None,
            "tracked_files_changed": bool(git("status", "--porcelain", "--untracked-files=no"))}


def machine() -> dict:
    """This machine, as a result's JSON records it."""
    return {"cpus": os.cpu_count(), "platform": platform.platform(),
            "processor": platform.processor() or platform.machine(),
            "load_average_at_start": os.getloadavg()}
