"""Peak memory of one training update at scale (MinAtar Breakout, 128 steps), from XLA.

    python benchmarks/memory.py                          # 4096 and 16384 envs
    python benchmarks/memory.py --num-envs 1024 4096 --out results/memory.json

Per num_envs: XLA's accounting (`memory_analysis()`) of the preset's one-update program,
compiled and not run, as `purerl.plan` builds it and with the CPU plan's tricks forced on."""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import jax
from harness import BENCHMARKS
from hydra import compose, initialize_config_dir
from tables import rows_table

from purerl.cli.preflight import config_dir, load_config
from purerl.parallel.program import make_train
from purerl.plan import execution_plan

PRESET = "breakout-minatar"
GIB = 2.0 ** 30


def measure(num_envs: int, tricks_forced: bool) -> dict:
    """XLA's memory accounting of the preset's one-update training program, in GiB."""
    with initialize_config_dir(str(config_dir()), version_base="1.3"):
        cfg = compose("config", overrides=[f"+env={PRESET}", f"env.num_envs={num_envs}"])
    cfg.total_timesteps = num_envs * cfg.ppo.num_steps
    plan = execution_plan()
    if tricks_forced:
        plan = plan._replace(resets_ahead=2**62, gather_ahead_bytes=2**62)
    start = time.perf_counter()
    compiled = jax.jit(make_train(load_config(cfg, jax.local_device_count()), plan=plan)).lower(
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
    parser.add_argument("--out", type=Path, default=BENCHMARKS / "results" / "memory.json")
    args = parser.parse_args()
    rows = []
    for num_envs in args.num_envs:
        for forced in (False, True):
            rows.append(measure(num_envs, forced))
            print(json.dumps(rows[-1]), flush=True)
    print(rows_table("memory", rows))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"preset": PRESET, "backend": jax.default_backend(),
                                    "machine": platform.processor() or platform.machine(),
                                    "jax": jax.__version__, "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
