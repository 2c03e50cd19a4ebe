"""What a vmapped population costs: a 16-member sweep (4 lr x 4 ent_coef, one seed each)
against 1 member, in one process, at the same settings.

    python benchmarks/population.py                  # 4 and 64 envs per member
    python benchmarks/population.py --num-envs 1024 --out results/population_gpu.json

For each num_envs: the compile time of each whole-run program (`jax.jit(make_train(config))`)
and its steady-state training time (the best of --repeats runs, the programs taking turns),
and the population's cost: its train time over the single member's (16 sequential runs would
cost 16x; the issue's bound is 8x), beside the cost of one member with 16x the envs (the
population's arithmetic without a member axis: what this machine needs for it). Writes a JSON
file and prints a markdown table. Other settings are PureJaxRL's CartPole ones."""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import jax
from harness import timed
from tables import population_table

from purerl.config import Config, EnvConfig, SweepConfig
from purerl.parallel.program import make_train

RESULTS = Path(__file__).resolve().parent / "results"
LRS = [1e-3, 5e-4, 2.5e-4, 1e-4]
ENT_COEFS = [0.0, 0.003, 0.01, 0.03]


def config(num_envs: int, updates: int, population: bool) -> Config:
    sweep = SweepConfig(lr=LRS, ent_coef=ENT_COEFS) if population else SweepConfig()
    cfg = Config(env=EnvConfig(name="CartPole-v1", num_envs=num_envs), sweep=sweep)
    cfg.total_timesteps = updates * cfg.batch_size
    return cfg


def measure(num_envs: int, updates: int, repeats: int) -> dict:
    key = jax.random.key(0)
    programs, compile_s, members = {}, {}, {}
    members_in_sweep = len(LRS) * len(ENT_COEFS)
    # "wide": one member with the population's envs, the same arithmetic without a member axis
    for name, envs, population in (("one", num_envs, False), ("population", num_envs, True),
                                   ("wide", num_envs * members_in_sweep, False)):
        cfg = config(envs, updates, population)
        members[name] = cfg.num_members
        tick = time.perf_counter()
        programs[name] = jax.jit(make_train(cfg)).lower(key).compile()
        compile_s[name] = time.perf_counter() - tick
    best, _ = timed(programs, key, repeats)
    steps = updates * num_envs * config(num_envs, updates, False).ppo.num_steps
    row = {
        "num_envs": num_envs, "updates": updates, "members": members["population"],
        "compile_s_one": round(compile_s["one"], 3),
        "compile_s_population": round(compile_s["population"], 3),
        "compile_s_wide": round(compile_s["wide"], 3),
        "train_s_one": round(best["one"], 4), "train_s_population": round(best["population"], 4),
        "train_s_wide": round(best["wide"], 4),
        "sps_one": round(steps / best["one"]),
        "sps_population": round(steps * members["population"] / best["population"]),
        "cost": round(best["population"] / best["one"], 3),
        "cost_wide": round(best["wide"] / best["one"], 3),
    }
    print(json.dumps(row), flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--num-envs", type=int, nargs="+", default=[4, 64])
    parser.add_argument("--updates", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS / "population.json")
    args = parser.parse_args()
    rows = [measure(n, args.updates, args.repeats) for n in args.num_envs]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "machine": {"backend": jax.default_backend(), "processor": platform.processor(),
                    "cpus": os.cpu_count()},
        "sweep": {"lr": LRS, "ent_coef": ENT_COEFS}, "rows": rows}, indent=1))
    print(population_table(rows))


if __name__ == "__main__":
    main()
