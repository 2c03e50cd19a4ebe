"""Training throughput against the number of devices: weak scaling (fixed envs per device) and
strong scaling (a fixed total), on one process's devices and on processes joined by JAX's
distributed runtime.

    python benchmarks/scaling.py                           # CPU: forced devices and processes
    python benchmarks/scaling.py --modes devices --counts 1 2 4 8 --out results/scaling_gpu.json

Each point runs in fresh processes: `devices` one process of N devices (forced CPU devices or
the first N GPUs), `processes` N one-device processes on localhost. A point: the compile time,
env steps/s (the best of --repeats), the efficiency against N times 1 device's, and the share of
an update its gradient all-reduces take, timed alone. Writes the JSON and its figure beside it
(`python benchmarks/figures.py` redraws it) and prints the table."""

import argparse
import json
import os
import platform
import socket
import subprocess
import sys
import time
from pathlib import Path

from harness import BENCHMARKS, timed  # this file's folder is first on sys.path
from tables import rows_table

SCALINGS = ("weak", "strong")


def worker(args) -> None:
    """One point's process, of `args.num_processes` (joined when more than one); process 0
    prints its JSON row."""
    from purerl.config import DistributedConfig
    from purerl.parallel.distributed import initialize

    initialize(DistributedConfig(enabled=args.num_processes > 1, num_processes=args.num_processes,
                                 coordinator=f"localhost:{args.port}", process_id=args.process_id))
    import jax
    import numpy as np
    from jax.sharding import PartitionSpec as P

    from purerl.config import Config, EnvConfig
    from purerl.core.collectives import per_device, pmean
    from purerl.parallel.devices import DEVICE_AXIS, make_mesh, shard_over_devices
    from purerl.parallel.program import make_program

    config = Config(env=EnvConfig(name=args.env, num_envs=args.num_envs))
    config.total_timesteps = args.updates * config.batch_size
    program = make_program(config)
    key = jax.random.key(0)
    start = time.perf_counter()
    programs = {"train": jax.jit(program.train).lower(key).compile()}
    compile_s = time.perf_counter() - start

    params = jax.eval_shape(program.init, key).params
    size = sum(int(np.prod(p.shape[1:])) for p in jax.tree.leaves(params))
    reduces = config.ppo.num_epochs * config.ppo.num_minibatches
    devices = jax.device_count()
    if devices > 1:  # the updates' all-reduces alone

        def all_reduces(x):
            return jax.lax.scan(lambda c, _: (per_device(pmean(c, DEVICE_AXIS), DEVICE_AXIS),
                                              None), x, None, reduces * args.updates)[0]

        vector = jax.device_put(np.ones((devices, size), np.float32),
                                jax.sharding.NamedSharding(make_mesh(), P(DEVICE_AXIS)))
        reduce = jax.jit(shard_over_devices(all_reduces, mesh=make_mesh(), in_specs=P(DEVICE_AXIS),
                                            out_specs=P(DEVICE_AXIS))).lower(vector).compile()
        programs["reduce"] = lambda _: reduce(vector)
    best, _ = timed(programs, key, args.repeats)
    env_steps = args.updates * config.batch_size
    if jax.process_index() == 0:
        print(json.dumps({
            "devices": devices, "processes": jax.process_count(), "num_envs": args.num_envs,
            "env_steps": env_steps, "compile_s": round(compile_s, 3),
            "train_s": round(best["train"], 4), "train_sps": round(env_steps / best["train"]),
            "params": size, "all_reduces_per_update": reduces if devices > 1 else 0,
            "all_reduce_s_per_update": (round(best["reduce"] / args.updates, 6)
                                        if devices > 1 else 0.0),
            "update_s": round(best["train"] / args.updates, 6),
        }), flush=True)


def measure(mode: str, count: int, num_envs: int, args) -> dict:
    """One point: `count` devices of one process or `count` one-device processes, training
    `num_envs` envs in all."""
    processes = count if mode == "processes" else 1
    each = count // processes  # devices per process
    with socket.socket() as s:  # a free port for the processes' coordinator
        s.bind(("localhost", 0))
        port = s.getsockname()[1]
    procs = []
    for i in range(processes):
        point = {"env": args.env, "num_envs": num_envs, "updates": args.updates,
                 "repeats": args.repeats, "num_processes": processes, "process_id": i, "port": port}
        devices = ({"XLA_FLAGS": f"--xla_force_host_platform_device_count={each}"}
                   if args.platform == "cpu" else
                   {"CUDA_VISIBLE_DEVICES": ",".join(map(str, range(i * each, (i + 1) * each)))})
        procs.append(subprocess.Popen([sys.executable, __file__, "--worker", json.dumps(point)],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                      env={**os.environ, **devices}))
    outputs = [proc.communicate(timeout=args.timeout) for proc in procs]
    for proc, (_, stderr) in zip(procs, outputs):
        if proc.returncode != 0:
            raise RuntimeError(f"{mode}={count} failed:\n{stderr[-3000:]}")
    row = {**json.loads(outputs[0][0].strip().splitlines()[-1]), "mode": mode}
    print(json.dumps(row), flush=True)
    return row


def with_efficiency(rows: list[dict]) -> list[dict]:
    """Each row's speedup over the 1-device row of its mode and scaling, and its efficiency."""
    for row in rows:
        one = next(r for r in rows if r["mode"] == row["mode"] and r["scaling"] == row["scaling"]
                   and r["devices"] == 1)
        row["speedup"] = round(row["train_sps"] / one["train_sps"], 3)
        row["efficiency"] = round(row["speedup"] / row["devices"], 3)
        row["all_reduce_share"] = round(row["all_reduce_s_per_update"] / row["update_s"], 3)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worker", type=json.loads, help=argparse.SUPPRESS)  # a point, as JSON
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--modes", nargs="+", default=["devices", "processes"],
                        choices=["devices", "processes"])
    parser.add_argument("--counts", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--envs-per-device", type=int, default=64, help="weak scaling")
    parser.add_argument("--total-envs", type=int, default=256, help="strong scaling")
    parser.add_argument("--updates", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--platform", default="cpu", choices=["cpu", "gpu"])
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--out", type=Path, default=BENCHMARKS / "results" / "scaling.json")
    args = parser.parse_args()
    if args.worker:
        return worker(argparse.Namespace(**args.worker))
    rows = [{**measure(mode, count, args.envs_per_device * count if scaling == "weak"
                       else args.total_envs, args), "scaling": scaling}
            for mode in args.modes for count in args.counts for scaling in SCALINGS]
    result = {"machine": {"platform": args.platform, "processor": platform.processor(),
                          "cpus": os.cpu_count()},
              "settings": {"env": args.env, "updates": args.updates, "repeats": args.repeats,
                           "envs_per_device": args.envs_per_device, "total_envs": args.total_envs},
              "rows": with_efficiency(rows)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1))
    from figures import draw_scaling  # matplotlib, only now

    draw_scaling(result, args.out.with_suffix(".png"))
    print(rows_table("scaling", rows))


if __name__ == "__main__":
    main()
