"""Which of purerl's faster paths (`purerl.plan`) pay on this platform: the whole-run CartPole
program timed with each path alone, all of them (the CPU plan) and none (the plain plan).

    python benchmarks/plans.py --num-envs 65536 --timesteps 200_000_000
    python benchmarks/plans.py --num-envs 64 --timesteps 500_000 --out /tmp/plans.json
    python benchmarks/plans.py --num-envs 65536 --variants plain index_shuffle   # two of them

Each variant is compiled, then called `--repeats` times with the variants taking turns; the best
call counts (`throughput.timed`). A path with a size threshold (`resets_ahead`,
`gather_ahead_bytes`, `packed_sort_bits`) takes effect only where the program is within it, as
in a run: above it, that variant runs the plain program. `index_shuffle` alone has no packed
sort: its Feistel network shuffles at every size. The program is purerl's CartPole
default (PureJaxRL's setting), as in `peer_driver.py`'s rows.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import jax
from throughput import timed  # this file's folder is first on sys.path

import purerl
from purerl.config import Config, EnvConfig
from purerl.parallel.program import make_train
from purerl.plan import CPU, PLAIN

RESULTS = Path(__file__).resolve().parent / "results"


def variants() -> dict:
    """The plain plan, each faster path of the CPU plan alone, and the CPU plan."""
    alone = {field: PLAIN._replace(**{field: getattr(CPU, field)})
             for field in PLAIN._fields if getattr(CPU, field) != getattr(PLAIN, field)}
    return {"plain": PLAIN, **alone, "cpu": CPU}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-envs", type=int, default=4096)
    parser.add_argument("--timesteps", type=int, default=50_000_000)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--variants", nargs="+", choices=list(variants()),
                        help="only these (default: all)")
    parser.add_argument("--out", type=Path, default=RESULTS / "plans.json")
    args = parser.parse_args()

    config = Config(total_timesteps=args.timesteps,
                    env=EnvConfig(name="CartPole-v1", num_envs=args.num_envs))
    purerl.validate(config, jax.local_device_count())
    key, env_steps = jax.random.key(0), config.num_updates * config.batch_size
    compiled, rows = {}, []
    for name, plan in variants().items():
        if args.variants and name not in args.variants:
            continue
        start = time.perf_counter()
        compiled[name] = jax.jit(make_train(config, plan=plan)).lower(key).compile()
        rows.append({"variant": name, "compile_s": round(time.perf_counter() - start, 2)})
    best, _ = timed(compiled, key, args.repeats)
    for row in rows:
        row["train_s"] = round(best[row["variant"]], 3)
        row["sps"] = round(env_steps / row["train_s"])
        print(json.dumps(row), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"backend": jax.default_backend(), "jax": jax.__version__,
                                    "num_envs": args.num_envs, "env_steps": env_steps,
                                    "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
