"""Training throughput against the number of devices: weak scaling (fixed envs per device) and
strong scaling (a fixed total), on one process's devices and on processes joined by JAX's
distributed runtime.

    python benchmarks/scaling.py                           # CPU: forced devices and processes
    python benchmarks/scaling.py --modes devices --counts 1 2 4 8 --out results/scaling_gpu.json
    python benchmarks/scaling.py --plot-only                # redraw the PNG from the JSON

Each point runs in fresh processes: `devices` one process of N devices (forced CPU devices or
the first N GPUs), `processes` N one-device processes on localhost. A point: the compile time,
env steps/s (the best of --repeats), the efficiency against N times 1 device's, and the share of
an update its gradient all-reduces take, timed alone. Writes JSON and PNG, prints the table."""

from __future__ import annotations

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
    """One point in this process (one of --num-processes); process 0 prints its JSON row."""
    from purerl.config import DistributedConfig
    from purerl.parallel.distributed import initialize

    if args.num_processes > 1:
        initialize(DistributedConfig(enabled=True, coordinator=f"localhost:{args.port}",
                                     num_processes=args.num_processes,
                                     process_id=args.process_id))
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
    base = [sys.executable, __file__, "--worker", "--env", args.env, "--num-envs", str(num_envs),
            "--updates", str(args.updates), "--repeats", str(args.repeats)]
    env = dict(os.environ)
    if args.platform == "cpu":
        env["XLA_FLAGS"] = ("--xla_force_host_platform_device_count="
                            f"{count if mode == 'devices' else 1}")
    if mode == "devices":
        commands, visible = [base], [range(count)]
    else:
        with socket.socket() as s:
            s.bind(("localhost", 0))
            port = s.getsockname()[1]
        commands = [base + ["--num-processes", str(count), "--process-id", str(i),
                            "--port", str(port)] for i in range(count)]
        visible = [[i] for i in range(count)]
    procs = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=env if args.platform == "cpu"
                              else {**env, "CUDA_VISIBLE_DEVICES": ",".join(map(str, ids))})
             for command, ids in zip(commands, visible)]
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


def plot(rows: list[dict], path: Path) -> None:
    """Training steps/s against devices, a panel per scaling, a line per mode and the ideal
    one from the first mode's single device."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4.4), layout="constrained")
    for ax, scaling in zip(axes, SCALINGS):
        for mode in sorted({r["mode"] for r in rows}):
            points = sorted((r["devices"], r["train_sps"]) for r in rows
                            if r["mode"] == mode and r["scaling"] == scaling)
            if not points:
                continue
            counts, sps = zip(*points)
            ax.plot(counts, sps, marker="o", label=mode)
            if mode == rows[0]["mode"]:
                ax.plot(counts, [sps[0] * c / counts[0] for c in counts], ls="--", color="grey",
                        label=f"ideal (linear from 1 of {mode})")
        ax.set(title=f"{scaling} scaling", xlabel="devices", ylabel="training env steps/s",
               xscale="log", yscale="log")
        ax.set_xticks(sorted({r["devices"] for r in rows}))
        ax.xaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.grid(True, which="major", alpha=0.3)
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncols=3)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for hidden, default in (("--num-processes", 1), ("--process-id", 0), ("--port", 0),
                            ("--num-envs", 0)):  # a worker's
        parser.add_argument(hidden, type=int, default=default, help=argparse.SUPPRESS)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
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
    parser.add_argument("--plot-only", action="store_true",
                        help="redraw the PNG from the JSON at --out, measuring nothing")
    args = parser.parse_args()
    if args.plot_only:
        return plot(json.loads(args.out.read_text())["rows"], args.out.with_suffix(".png"))
    if args.worker:
        return worker(args)
    rows = [{**measure(mode, count, args.envs_per_device * count if scaling == "weak"
                       else args.total_envs, args), "scaling": scaling}
            for mode in args.modes for count in args.counts for scaling in SCALINGS]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "machine": {"platform": args.platform, "processor": platform.processor(),
                    "cpus": os.cpu_count()},
        "settings": {"env": args.env, "updates": args.updates, "repeats": args.repeats,
                     "envs_per_device": args.envs_per_device, "total_envs": args.total_envs},
        "rows": with_efficiency(rows),
    }, indent=1))
    plot(rows, args.out.with_suffix(".png"))
    print(rows_table("scaling", rows))


if __name__ == "__main__":
    main()
