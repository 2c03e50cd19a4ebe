"""Peak memory of one training update at scale (MinAtar Breakout, 128 steps), from XLA.

    python benchmarks/memory.py                          # 4096 and 16384 envs
    python benchmarks/memory.py --num-envs 1024 4096 --out results/memory.json

For each num_envs it compiles the training program of one update of the `breakout-minatar`
preset (its CNN, 128 steps, 4 epochs x 8 minibatches) and reads XLA's own accounting of the
compiled program (`Compiled.memory_analysis()`): the arguments, the outputs and the temporary
buffers it allocates, whose sum is the most the program holds at once. Nothing is run, so
sizes a CPU could not train in reasonable time are measured too.

Two variants per size: as purerl builds it (above the CPU plan's `resets_ahead` the envs draw
their auto-resets inside each step; above its `gather_ahead_bytes` each minibatch step gathers
its own samples; `purerl.plan`), and with both CPU tricks forced on (a `[T x B]` batch of drawn
reset states, and every epoch's minibatches gathered before the steps), which is what they
would cost at that size."""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import jax
from hydra import compose, initialize_config_dir

from purerl.cli.preflight import config_dir, load_config
from purerl.parallel.program import make_train
from purerl.plan import execution_plan

RESULTS = Path(__file__).resolve().parent / "results"
PRESET = "breakout-minatar"
GIB = 2.0 ** 30


def preset_config(num_envs: int):
    """The preset's config at `num_envs` envs, for one update."""
    with initialize_config_dir(str(config_dir()), version_base="1.3"):
        cfg = compose("config", overrides=[f"+env={PRESET}", f"env.num_envs={num_envs}"])
    cfg.total_timesteps = num_envs * cfg.ppo.num_steps
    return load_config(cfg, jax.local_device_count())


def measure(num_envs: int, tricks_forced: bool) -> dict:
    """XLA's memory accounting of the one-update training program, in GiB."""
    plan = execution_plan()
    if tricks_forced:
        plan = plan._replace(resets_ahead=2**62, gather_ahead_bytes=2**62)
    start = time.perf_counter()
    compiled = jax.jit(make_train(preset_config(num_envs), plan=plan)).lower(
        jax.random.key(0)).compile()
    compile_s = time.perf_counter() - start
    stats = compiled.memory_analysis()
    sizes = {"arguments": stats.argument_size_in_bytes, "outputs": stats.output_size_in_bytes,
             "temporaries": stats.temp_size_in_bytes}
    return {"num_envs": num_envs, "cpu_tricks_forced": tricks_forced,
            "compile_s": round(compile_s, 1),
            **{f"{name}_gib": round(size / GIB, 3) for name, size in sizes.items()},
            "peak_gib": round(sum(sizes.values()) / GIB, 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-envs", type=int, nargs="+", default=[4096, 16384])
    parser.add_argument("--out", type=Path, default=RESULTS / "memory.json")
    args = parser.parse_args()
    rows = []
    for num_envs in args.num_envs:
        for forced in (False, True):
            rows.append(measure(num_envs, forced))
            print(json.dumps(rows[-1]), flush=True)
    print("\n| num_envs | batch | peak GiB | temporaries GiB "
          "| with the CPU tricks forced: peak GiB |")
    print("| ---: | ---: | ---: | ---: | ---: |")
    for plain, forced in zip(rows[::2], rows[1::2]):
        print(f"| {plain['num_envs']} | {plain['num_envs'] * 128:,} | {plain['peak_gib']:.2f} | "
              f"{plain['temporaries_gib']:.2f} | {forced['peak_gib']:.2f} |")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"preset": PRESET, "backend": jax.default_backend(),
                                    "machine": platform.processor() or platform.machine(),
                                    "jax": jax.__version__, "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
