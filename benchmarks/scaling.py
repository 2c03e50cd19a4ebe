"""Training throughput against the number of devices: weak scaling (a fixed number of envs per
device) and strong scaling (a fixed total), on one process's devices and on processes joined by
JAX's distributed runtime.

    python benchmarks/scaling.py                           # CPU: forced devices and processes
    python benchmarks/scaling.py --modes devices --counts 1 2 4 8 --out results/scaling_gpu.json
    python benchmarks/scaling.py --plot-only                # redraw the PNG from the JSON

Each point runs in fresh processes (the device count of a process is fixed when JAX starts):
`devices` gives one process N devices (forced CPU devices on a CPU, the first N of
CUDA_VISIBLE_DEVICES on GPUs), `processes` starts N processes of one device each on localhost
(collectives over gloo on a CPU). Every point reports the compile time of the whole-run program
apart from its steady-state env steps/s (the best of --repeats runs), the efficiency against
ideal (steps/s over N times the 1-device steps/s of the same scaling), and what the all-reduces
cost: the same number of gradient all-reduces as one update makes (epochs x minibatches, each of
the whole parameter vector), timed alone, per update. Writes a JSON file, a PNG plot beside it,
and prints a markdown table. Other settings are PureJaxRL's CartPole ones."""

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

from tables import scaling_table  # this file's folder is first on sys.path

RESULTS = Path(__file__).resolve().parent / "results"
SCALINGS = ("weak", "strong")


def worker(args) -> None:
    """One point, in this process (one of several with --num-processes): prints its JSON row
    from process 0."""
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
    train = jax.jit(program.train).lower(key).compile()
    compile_s = time.perf_counter() - start

    # The update's all-reduces alone: epochs x minibatches means of the parameter vector.
    params = jax.eval_shape(program.init, key).params
    size = sum(int(np.prod(p.shape[1:])) for p in jax.tree.leaves(params))
    reduces = config.ppo.num_epochs * config.ppo.num_minibatches
    devices = jax.device_count()

    def all_reduces(x):
        return jax.lax.scan(lambda c, _: (per_device(pmean(c, DEVICE_AXIS), DEVICE_AXIS), None),
                            x, None,
                            reduces * args.updates)[0]

    vector = jax.device_put(np.ones((devices, size), np.float32),
                            jax.sharding.NamedSharding(make_mesh(), P(DEVICE_AXIS)))
    reduce = None
    if devices > 1:
        reduce = jax.jit(shard_over_devices(all_reduces, mesh=make_mesh(), in_specs=P(DEVICE_AXIS),
                                            out_specs=P(DEVICE_AXIS))).lower(vector).compile()
    best_train = best_reduce = float("inf")
    for i in range(args.repeats):
        tick = time.perf_counter()
        jax.block_until_ready(train(jax.random.fold_in(key, i)))
        best_train = min(best_train, time.perf_counter() - tick)
        if reduce is not None:
            tick = time.perf_counter()
            jax.block_until_ready(reduce(vector))
            best_reduce = min(best_reduce, time.perf_counter() - tick)
    env_steps = args.updates * config.batch_size
    if jax.process_index() == 0:
        print(json.dumps({
            "devices": devices, "processes": jax.process_count(), "num_envs": args.num_envs,
            "env_steps": env_steps, "compile_s": round(compile_s, 3),
            "train_s": round(best_train, 4), "train_sps": round(env_steps / best_train),
            "params": size, "all_reduces_per_update": reduces if devices > 1 else 0,
            "all_reduce_s_per_update": (round(best_reduce / args.updates, 6)
                                        if reduce is not None else 0.0),
            "update_s": round(best_train / args.updates, 6),
        }), flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def measure(mode: str, count: int, num_envs: int, args) -> dict:
    """One point: `count` devices of one process (`devices`) or `count` one-device processes
    (`processes`), training `num_envs` envs in all."""
    base = [sys.executable, __file__, "--worker", "--env", args.env, "--num-envs", str(num_envs),
            "--updates", str(args.updates), "--repeats", str(args.repeats)]
    env = dict(os.environ)
    if mode == "devices":
        if args.platform == "cpu":
            env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={count}"
        else:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(map(str, range(count)))
        commands = [base]
    else:
        port = free_port()
        if args.platform == "cpu":
            env["XLA_FLAGS"] = "--xla_force_host_platform_device_count=1"
        commands = [base + ["--num-processes", str(count), "--process-id", str(i),
                            "--port", str(port)] for i in range(count)]
    procs = []
    for i, command in enumerate(commands):
        own = dict(env)
        if mode == "processes" and args.platform != "cpu":
            own["CUDA_VISIBLE_DEVICES"] = str(i)
        procs.append(subprocess.Popen(command, env=own, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    outputs = [proc.communicate(timeout=args.timeout) for proc in procs]
    for proc, (_, stderr) in zip(procs, outputs):
        if proc.returncode != 0:
            raise RuntimeError(f"{mode}={count} failed:\n{stderr[-3000:]}")
    row = json.loads(outputs[0][0].strip().splitlines()[-1])
    row["mode"] = mode
    print(json.dumps(row), flush=True)
    return row


def with_efficiency(rows: list[dict]) -> list[dict]:
    """Each row's efficiency: its steps/s over `devices` times the 1-device steps/s of the same
    mode and scaling."""
    for row in rows:
        one = next(r for r in rows if r["mode"] == row["mode"] and r["scaling"] == row["scaling"]
                   and r["devices"] == 1)
        row["speedup"] = round(row["train_sps"] / one["train_sps"], 3)
        row["efficiency"] = round(row["speedup"] / row["devices"], 3)
        row["all_reduce_share"] = round(row["all_reduce_s_per_update"] / row["update_s"], 3)
    return rows


def plot(rows: list[dict], path: Path) -> None:
    """Training steps/s against devices, a panel per scaling, a line per mode and the ideal
    line from the first mode's single device; one legend below the panels."""
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
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--num-processes", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--process-id", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--num-envs", type=int, default=0, help=argparse.SUPPRESS)
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
    parser.add_argument("--out", type=Path, default=RESULTS / "scaling.json")
    parser.add_argument("--plot-only", action="store_true",
                        help="redraw the PNG from the JSON at --out, measuring nothing")
    args = parser.parse_args()
    if args.plot_only:
        return plot(json.loads(args.out.read_text())["rows"], args.out.with_suffix(".png"))
    if args.worker:
        return worker(args)
    rows = []
    for mode in args.modes:
        for count in args.counts:
            for scaling in SCALINGS:
                num_envs = args.envs_per_device * count if scaling == "weak" else args.total_envs
                rows.append({**measure(mode, count, num_envs, args), "scaling": scaling})
    rows = with_efficiency(rows)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "machine": {"platform": args.platform, "processor": platform.processor(),
                    "cpus": os.cpu_count()},
        "settings": {"env": args.env, "updates": args.updates, "repeats": args.repeats,
                     "envs_per_device": args.envs_per_device, "total_envs": args.total_envs},
        "rows": rows,
    }, indent=1))
    plot(rows, args.out.with_suffix(".png"))
    print(scaling_table(rows))


if __name__ == "__main__":
    main()
