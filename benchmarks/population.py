"""What a vmapped population costs: a 16-member sweep (4 lr x 4 ent_coef) against 1 member.

    python benchmarks/population.py                  # 4 and 64 envs per member
    python benchmarks/population.py --num-envs 1024 --out results/population_gpu.json

Per num_envs: compile and training time (the best of --repeats, taking turns) of one member, the
population and one member with 16x the envs; the cost is a train time over one member's (16
sequential runs: 16x). Writes a JSON file and prints the table."""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import jax
from harness import BENCHMARKS, timed
from tables import rows_table

from purerl.config import Config, EnvConfig, SweepConfig
from purerl.parallel.program import make_train

LRS = [1e-3, 5e-4, 2.5e-4, 1e-4]
ENT_COEFS = [0.0, 0.003, 0.01, 0.03]


def measure(num_envs: int, updates: int, repeats: int) -> dict:
    key = jax.random.key(0)
    programs, compile_s, members, steps = {}, {}, {}, {}
    for name, envs, sweep in (
            ("one", num_envs, SweepConfig()),
            ("population", num_envs, SweepConfig(lr=LRS, ent_coef=ENT_COEFS)),
            ("wide", num_envs * len(LRS) * len(ENT_COEFS), SweepConfig())):
        config = Config(env=EnvConfig(name="CartPole-v1", num_envs=envs), sweep=sweep)
        config.total_timesteps = steps[name] = updates * config.batch_size
        members[name] = config.num_members
        start = time.perf_counter()
        programs[name] = jax.jit(make_train(config)).lower(key).compile()
        compile_s[name] = time.perf_counter() - start
    best, _ = timed(programs, key, repeats)
    row = {"num_envs": num_envs, "updates": updates, "members": members["population"],
           **{f"compile_s_{name}": round(s, 3) for name, s in compile_s.items()},
           **{f"train_s_{name}": round(s, 4) for name, s in best.items()},
           "sps_one": round(steps["one"] / best["one"]),
           "sps_population": round(steps["population"] * members["population"]
                                   / best["population"]),
           "cost": round(best["population"] / best["one"], 3),
           "cost_wide": round(best["wide"] / best["one"], 3)}
    print(json.dumps(row), flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--num-envs", type=int, nargs="+", default=[4, 64])
    parser.add_argument("--updates", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=BENCHMARKS / "results" / "population.json")
    args = parser.parse_args()
    rows = [measure(n, args.updates, args.repeats) for n in args.num_envs]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "machine": {"backend": jax.default_backend(), "processor": platform.processor(),
                    "cpus": os.cpu_count()},
        "sweep": {"lr": LRS, "ent_coef": ENT_COEFS}, "rows": rows}, indent=1))
    print(rows_table("population", rows))


if __name__ == "__main__":
    main()
