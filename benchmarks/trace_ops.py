"""Where a traced program's time goes, op by op, from the traces `peer_driver.py --trace` writes.

    python benchmarks/trace_ops.py DIR [DIR ...] [--top 20] [--out FILE]

Each DIR holds one program's `jax.profiler` trace (`**/*.xplane.pb`) and its compiled HLO
(`program.hlo.txt`). From the trace, the events of XLA's ops, their durations summed per op: on
a GPU or TPU the "XLA Ops" line of each device plane (when a device plane has none, its stream
lines, each kernel by the op of its "hlo_op" stat); on XLA:CPU the host's `tf_XLA...` thread
lines, where its thunks run, leaving out the events that only enclose others (loops,
conditionals, calls and the thunk executor). From the HLO, what each op is: a matmul (a dot or
convolution, alone, inside a fusion or as a library call), a gather, scatter or dynamic slice (a
loop's stacked outputs among them), a sort, a reduction, random bits (an RngBitGenerator, as
purerl's `unsafe_rbg` keys draw them; threefry keys' bits are plain integer ops, so
elementwise), a copy or transpose, control flow (on a GPU), or elementwise. Prints, per folder,
the traced time, its share per kind and the top ops; `--out` writes the same as JSON. The raw
traces stay where they are for TensorBoard's profile plugin or Perfetto.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
from pathlib import Path

# What an op is, from the opcodes it holds, most telling first.
KINDS = (
    ("matmul", {"dot", "convolution"}),
    # Also a loop's stacked outputs and carried buffers (dynamic-update-slice).
    ("gather/scatter/slice", {"gather", "scatter", "dynamic-slice", "dynamic-update-slice"}),
    ("sort", {"sort"}),
    ("reduce", {"reduce", "reduce-window", "all-reduce"}),
    ("random bits", {"rng-bit-generator", "rng"}),
    ("copy/transpose", {"copy", "transpose", "copy-start", "copy-done"}),
)
# Ops whose CPU events only enclose those of the ops they run (on a GPU stream, what carries
# their name is their own work: a loop's condition, "control flow").
ENCLOSING = {"while", "conditional", "call"}
INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*.*?\s([a-z][\w\-]*)\(")
COMPUTATION = re.compile(r"^\s*(?:ENTRY\s+)?%?([\w.\-]+)\s.*\{\s*$")
CALLS = re.compile(r"(?:calls|to_apply|body|condition|branch_computations|called_computations)"
                   r"=(\{[^}]*\}|%?[\w.\-]+)")
NAME = re.compile(r"[\w.\-]+")
TARGET = re.compile(r'custom_call_target="([^"]+)"')
COMMENT = re.compile(r"/\*.*?\*/")


def parse_hlo(text: str) -> tuple[dict, dict]:
    """The instructions and computations of an HLO module's text.

    Args:
        text: `compiled.as_text()` of a program.

    Returns:
        `(instructions, computations)`: `{name: (opcode, [called computations], custom-call
        target or "")}` and `{computation: [names of its instructions]}`.
    """
    instructions, computations, current = {}, {}, None
    for line in text.splitlines():
        line = COMMENT.sub("", line)  # "/*index=5*/" in long tuples
        found = INSTRUCTION.match(line)
        if found:
            name, opcode = found.groups()
            target = TARGET.search(line)
            called = [n for group in CALLS.findall(line) for n in NAME.findall(group)]
            instructions[name] = (opcode, called, target.group(1) if target else "")
            if current is not None:
                computations[current].append(name)
        elif header := COMPUTATION.match(line):
            current = header.group(1)
            computations[current] = []
    return instructions, computations


def opcodes_within(name: str, instructions: dict, computations: dict) -> set:
    """The opcodes of an instruction and of every computation it calls, recursively."""
    opcode, called, target = instructions[name]
    found = {opcode}
    if opcode == "custom-call" and re.search(r"gemm|matmul|cublas|conv", target, re.IGNORECASE):
        found.add("dot")
    stack, seen = list(called), set()
    while stack:
        computation = stack.pop()
        if computation in seen or computation not in computations:
            continue
        seen.add(computation)
        for inner in computations[computation]:
            inner_opcode, inner_called, _ = instructions[inner]
            found.add(inner_opcode)
            stack.extend(inner_called)
    return found


def kind_of(name: str, instructions: dict, computations: dict) -> str:
    """What an op is (KINDS' names, "enclosing", "elementwise", or "not in the HLO"), from the
    name of its events (XLA:CPU's thunk executor's enclose the ops it runs)."""
    op = name.lstrip("%").split(" ")[0]
    if op.startswith("ThunkExecutor"):
        return "enclosing"
    if op not in instructions:
        return "not in the HLO"
    if instructions[op][0] in ENCLOSING:
        return "enclosing"
    opcodes = opcodes_within(op, instructions, computations)
    for kind, members in KINDS:
        if opcodes & members:
            return kind
    return "elementwise"


def op_events(trace_file: Path) -> tuple[collections.Counter, collections.Counter, dict, dict,
                                         bool]:
    """Every XLA op's summed event durations in one trace.

    Args:
        trace_file: a `*.xplane.pb` that `jax.profiler.trace` wrote.

    Returns:
        `(nanoseconds per op name, events per op name, nanoseconds per "plane/line" read,
        {plane: [its lines' names]} of the whole trace, whether the lines read nest events:
        XLA:CPU's host threads, where a loop's event encloses its body's)`.
    """
    from jax.profiler import ProfileData

    data = ProfileData.from_file(str(trace_file))
    planes = list(data.planes)
    device = [p for p in planes if p.name.startswith(("/device:GPU", "/device:TPU"))]
    chosen = []
    for plane in device:
        lines = list(plane.lines)
        ops = [line for line in lines if line.name == "XLA Ops"]
        chosen += [(plane, line) for line in ops or [x for x in lines
                                                     if x.name.startswith("Stream")]]
    if not device:
        chosen = [(plane, line) for plane in planes for line in plane.lines
                  if line.name.startswith("tf_XLA")]
    durations, counts, per_line = collections.Counter(), collections.Counter(), {}
    for plane, line in chosen:
        total = 0
        for event in line.events:
            # A GPU stream's kernels are named after their op in the "hlo_op" stat.
            name = dict(event.stats).get("hlo_op", event.name)
            durations[name] += event.duration_ns
            counts[name] += 1
            total += event.duration_ns
        per_line[f"{plane.name}/{line.name}"] = total
    layout = {plane.name: [line.name for line in plane.lines] for plane in planes}
    return durations, counts, per_line, layout, not device


def summarize(folder: Path, top: int) -> dict:
    """One traced program's time per kind of op and its top ops.

    Args:
        folder: what `peer_driver.py --trace` wrote for one program.
        top: how many ops to list.

    Returns:
        `{"folder", "traced_ms", "lines_ms", "kinds_ms", "top", "planes"}`: the ops' time in
        all (on XLA:CPU, events that enclose others left out), the time on each line read,
        the time per kind, the `top` ops by time as `{"op", "kind", "ms", "events"}`, and the
        trace's planes with their lines' names (what there was to read, should no line hold
        XLA's ops).
    """
    traces = sorted(folder.glob("**/*.xplane.pb"))
    hlo = folder / "program.hlo.txt"
    instructions, computations = (parse_hlo(hlo.read_text()) if hlo.exists() else ({}, {}))
    durations, counts, per_line, layout, nested = op_events(traces[-1])
    kinds = collections.Counter()
    ranked = []
    for name, nanoseconds in durations.most_common():
        kind = kind_of(name, instructions, computations)
        if kind == "enclosing" and nested:
            continue
        kind = "control flow" if kind == "enclosing" else kind
        kinds[kind] += nanoseconds
        ranked.append({"op": name, "kind": kind, "ms": round(nanoseconds / 1e6, 3),
                       "events": counts[name]})
    return {"folder": str(folder), "traced_ms": round(sum(kinds.values()) / 1e6, 3),
            "lines_ms": {k: round(v / 1e6, 3) for k, v in per_line.items()},
            "kinds_ms": {k: round(v / 1e6, 3) for k, v in kinds.most_common()},
            "top": ranked[:top], "planes": layout}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", type=Path, nargs="+")
    parser.add_argument("--top", type=int, default=20)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    traced = [f for f in args.folders if any(f.glob("**/*.xplane.pb"))]
    for folder in sorted(set(args.folders) - set(traced)):
        print(f"trace_ops.py: no *.xplane.pb under {folder}; left out")
    if not traced:
        raise SystemExit("trace_ops.py: no traces to read")
    summaries = [summarize(folder, args.top) for folder in traced]
    for summary in summaries:
        total = summary["traced_ms"] or 1.0
        print(f"{summary['folder']}: {summary['traced_ms']:.1f} ms of ops")
        if not summary["lines_ms"]:
            print(f"  no line of XLA's ops; the trace's planes: {summary['planes']}")
        for kind, ms in summary["kinds_ms"].items():
            print(f"  {kind:20s} {ms:10.1f} ms  {ms / total:6.1%}")
        for op in summary["top"]:
            print(f"    {op['ms']:10.2f} ms  {op['events']:7d}x  {op['kind']:20s} {op['op']}")
    if args.out:
        args.out.write_text(json.dumps(summaries, indent=2) + "\n")


if __name__ == "__main__":
    main()
