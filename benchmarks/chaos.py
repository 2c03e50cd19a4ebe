"""A run through a cluster's faults, each followed by the same `resume=auto` command, against the
same run never stopped: do they end bit-identical, and what did the faults cost?

    python benchmarks/chaos.py                       # writes results/chaos.json
    python benchmarks/chaos.py --kills 12 --total 4e6

The faults, in the seed's random order: SIGKILL `--kills` times at a random moment after
training starts (some land mid-checkpoint), SIGTERM once (checkpoints, exits 143), the newest
checkpoint truncated once (it must be skipped), and a write failure (a file-size limit, as a
full disk). Reported: the faults and exit codes, the updates run again, both runs' wall time,
whether metrics.jsonl, params and optimizer state are bit-identical, and the checkpoint cost."""

from __future__ import annotations

import argparse
import json
import random
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness import REPO

TRAINING = "update "  # a progress line: the run is past compiling
DAMAGED = "skipped, it does not restore"  # what a start says of a checkpoint it skips


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=7, help="SIGKILLs at random moments")
    parser.add_argument("--total", type=float, default=2e6, help="total_timesteps of the run")
    parser.add_argument("--every", type=int, default=50, help="checkpoint.every (updates)")
    parser.add_argument("--seed", type=int, default=0, help="the faults' order and moments")
    parser.add_argument("--out", default=str(REPO / "benchmarks/results/chaos.json"))
    args = parser.parse_args()
    rng = random.Random(args.seed)
    command = ["-m", "purerl.train", "+env=cartpole", f"total_timesteps={int(args.total)}",
               f"checkpoint.every={args.every}", "log.progress=false", "resume=auto"]

    with tempfile.TemporaryDirectory() as scratch:
        whole, faulted = Path(scratch) / "whole", Path(scratch) / "faulted"
        tick = time.monotonic()
        _run(command, whole).check_returncode()
        whole_s = time.monotonic() - tick

        faults = ["kill"] * args.kills + ["term", "corrupt", "write"]
        rng.shuffle(faults)
        log, tick = [], time.monotonic()
        for fault in faults:
            log.append(_inject(fault, command, faulted, rng))
            print(json.dumps(log[-1]), flush=True)
        finished = _run(command, faulted)
        faulted_s = time.monotonic() - tick
        if finished.returncode:
            sys.exit(f"the last resume failed: {finished.stderr[-2000:]}")
        log.append({"fault": "none: to the end", "code": 0,
                    "skipped_damaged": DAMAGED in finished.stdout})
        report = {
            "command": "python " + shlex.join(command), "faults": log, "starts": len(faults) + 1,
            "identical_metrics": ((whole / "metrics.jsonl").read_bytes()
                                  == (faulted / "metrics.jsonl").read_bytes()),
            "identical_state": _same_state(whole, faulted),
            "updates_run_again": sum(f.get("lost_updates", 0) for f in log),
            "uninterrupted_s": round(whole_s, 1), "faulted_s": round(faulted_s, 1),
            "checkpoint_cost": _checkpoint_cost(whole, args.every),
        }
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({k: v for k, v in report.items() if k != "faults"}, indent=2))


def _run(command, run_dir: Path, limit_kb: int = 0) -> subprocess.CompletedProcess:
    line = shlex.join([sys.executable, *command, f"hydra.run.dir={run_dir}"])
    if limit_kb:
        line = f"ulimit -f {limit_kb} && exec {line}"
    return subprocess.run(["bash", "-c", line], cwd=REPO, capture_output=True, text=True)


def _inject(fault: str, command, run_dir: Path, rng: random.Random) -> dict:
    """One fault, then the run's state: the exit code and the newest checkpoint."""
    from purerl.storage.checkpoint import CHECKPOINTS, Checkpoints

    before = Checkpoints(run_dir / CHECKPOINTS).latest() if run_dir.exists() else None
    entry = {"fault": fault, "checkpoint_before": before}
    if fault == "corrupt":  # the next start must skip it
        if before is None:
            return {**entry, "skipped": "no checkpoint yet"}
        for path in (run_dir / CHECKPOINTS / str(before) / "state").rglob("*"):
            if path.is_file():
                path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
        return entry
    if fault == "write":
        written = sum(p.stat().st_size for p in run_dir.glob("*.jsonl")) if run_dir.exists() else 0
        result = _run(command, run_dir, limit_kb=written // 1024 + 64)
        entry["code"], said, stdout = result.returncode, result.stderr.strip()[-300:], result.stdout
    else:
        proc = subprocess.Popen([sys.executable, *command, f"hydra.run.dir={run_dir}"],
                                cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        stdout = ""
        for line in proc.stdout:  # wait until it trains, then a random moment more
            stdout += line
            if TRAINING in line:
                break
        time.sleep(rng.uniform(0.0, 3.0))
        proc.send_signal(signal.SIGKILL if fault == "kill" else signal.SIGTERM)
        rest, stderr = proc.communicate()
        stdout, said = stdout + rest, stderr.strip()[-300:] if fault == "term" else ""
        entry["code"] = proc.returncode
    metrics = run_dir / "metrics.jsonl"
    last = metrics.read_text().splitlines()[-1:] if metrics.exists() else []
    updates = [json.loads(line)["update"] for line in last if line.strip().endswith("}")]
    after = Checkpoints(run_dir / CHECKPOINTS).latest()
    return {**entry, "said": said, "skipped_damaged": DAMAGED in stdout, "checkpoint_after": after,
            "lost_updates": max(0, (updates[0] if updates else 0) - (after or 0))}


def _same_state(a: Path, b: Path) -> bool:
    import jax
    import numpy as np

    from purerl.storage.restoring import restore_run

    x, y = restore_run(a).state, restore_run(b).state
    return all(np.array_equal(np.asarray(p), np.asarray(q)) for p, q in
               zip(jax.tree.leaves((x.params, x.opt_state)),
                   jax.tree.leaves((y.params, y.opt_state))))


def _checkpoint_cost(run_dir: Path, every: int) -> dict:
    """The uninterrupted run's checkpoints: their time, each one's, and the fraction of a run's
    time one takes every `checkpoint.every_s` = 600 s (the default)."""
    summary = json.loads((run_dir / "summary.json").read_text())
    saves = -(-summary["updates"] // every)  # every `every` updates and the last
    each = summary["checkpoint_s"] / saves
    return {"checkpoint_s": summary["checkpoint_s"], "train_s": summary["train_s"],
            "saves": saves, "each_s": round(each, 4), "fraction_at_600_s": round(each / 600, 6)}


if __name__ == "__main__":
    shutil.which("bash") or sys.exit("chaos.py needs bash (ulimit) on PATH")
    main()
