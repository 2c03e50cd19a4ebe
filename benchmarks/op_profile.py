"""The harness's `--profile`: a compiled program run once under `jax.profiler`, its ops' time
summed per kind (read from the optimized HLO; XLA:CPU's events that only enclose others left
out; the trace kept for TensorBoard or Perfetto). Only the standard library and JAX: every
side's Python runs it."""

from __future__ import annotations

import collections
import re
from pathlib import Path

# What an op is, from the opcodes it holds, most telling first.
KINDS = (
    ("matmul", {"dot", "convolution"}),
    ("gather/scatter/slice", {"gather", "scatter", "dynamic-slice", "dynamic-update-slice"}),
    ("sort", {"sort"}),
    ("reduce", {"reduce", "reduce-window", "all-reduce"}),
    ("random bits", {"rng-bit-generator", "rng"}),
    ("copy/transpose", {"copy", "transpose", "copy-start", "copy-done"}),
)
ENCLOSING = {"while", "conditional", "call"}  # on XLA:CPU their events enclose their body's
INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*.*?\s([a-z][\w\-]*)\(")
COMPUTATION = re.compile(r"^\s*(?:ENTRY\s+)?%?([\w.\-]+)\s.*\{\s*$")
CALLS = re.compile(r"(?:calls|to_apply|body|condition|branch_computations|called_computations)"
                   r"=(\{[^}]*\}|%?[\w.\-]+)")
NAME = re.compile(r"[\w.\-]+")
TARGET = re.compile(r'custom_call_target="([^"]+)"')
LIBRARY_MATMUL = re.compile(r"gemm|matmul|cublas|conv", re.IGNORECASE)


def parse_hlo(text: str) -> tuple[dict, dict]:
    """`({instruction: (opcode, [called computations], custom-call target)}, {computation:
    [its instructions]})` of an HLO module's text (`compiled.as_text()`)."""
    instructions, computations, current = {}, {}, None
    for line in text.splitlines():
        line = re.sub(r"/\*.*?\*/", "", line)  # "/*index=5*/" in long tuples
        if found := INSTRUCTION.match(line):
            target = TARGET.search(line)
            called = [n for group in CALLS.findall(line) for n in NAME.findall(group)]
            instructions[found.group(1)] = (found.group(2), called,
                                            target.group(1) if target else "")
            if current is not None:
                computations[current].append(found.group(1))
        elif header := COMPUTATION.match(line):
            current = header.group(1)
            computations[current] = []
    return instructions, computations


def kind_of(name: str, instructions: dict, computations: dict) -> str:
    """What the op that a trace's event names is: one of KINDS' names, "enclosing",
    "elementwise", or "not in the HLO"."""
    op = name.lstrip("%").split(" ")[0]
    if op.startswith("ThunkExecutor"):
        return "enclosing"
    if op not in instructions:
        return "not in the HLO"
    opcode, called, target = instructions[op]
    if opcode in ENCLOSING:
        return "enclosing"
    found = {opcode} | ({"dot"} if LIBRARY_MATMUL.search(target) else set())
    stack, seen = list(called), set()
    while stack:  # the opcodes of every computation it calls, recursively
        computation = stack.pop()
        if computation in seen or computation not in computations:
            continue
        seen.add(computation)
        for inner in computations[computation]:
            found.add(instructions[inner][0])
            stack.extend(instructions[inner][1])
    return next((kind for kind, members in KINDS if found & members), "elementwise")


def op_durations(trace_file: Path) -> tuple[collections.Counter, collections.Counter, bool]:
    """`(nanoseconds per op, events per op, whether the lines nest events: XLA:CPU's)` of a
    `*.xplane.pb` that `jax.profiler.trace` wrote."""
    from jax.profiler import ProfileData

    planes = list(ProfileData.from_file(str(trace_file)).planes)
    device = [p for p in planes if p.name.startswith(("/device:GPU", "/device:TPU"))]
    lines = []
    for plane in device:
        ops = [line for line in plane.lines if line.name == "XLA Ops"]
        lines += ops or [line for line in plane.lines if line.name.startswith("Stream")]
    if not device:
        lines = [line for plane in planes for line in plane.lines
                 if line.name.startswith("tf_XLA")]
    durations, counts = collections.Counter(), collections.Counter()
    for line in lines:
        for event in line.events:
            name = dict(event.stats).get("hlo_op", event.name)
            durations[name] += event.duration_ns
            counts[name] += 1
    return durations, counts, not device


def profiled(compiled, args: tuple, folder: Path, top: int = 12) -> dict:
    """One more call of `compiled(*args)` under `jax.profiler.trace` into `folder` (beside
    the program's HLO, `program.hlo.txt`), and its ops' time."""
    import jax

    folder.mkdir(parents=True, exist_ok=True)
    hlo = compiled.as_text()
    (folder / "program.hlo.txt").write_text(hlo)
    with jax.profiler.trace(str(folder)):
        jax.block_until_ready(compiled(*args))
    instructions, computations = parse_hlo(hlo)
    durations, counts, nested = op_durations(sorted(folder.glob("**/*.xplane.pb"))[-1])
    kinds, ranked = collections.Counter(), []
    for name, nanoseconds in durations.most_common():
        kind = kind_of(name, instructions, computations)
        if kind == "enclosing" and nested:
            continue
        kind = "control flow" if kind == "enclosing" else kind
        kinds[kind] += nanoseconds
        ranked.append({"op": name, "kind": kind, "ms": round(nanoseconds / 1e6, 3),
                       "events": counts[name]})
    return {"traced_ms": round(sum(kinds.values()) / 1e6, 3),
            "kinds_ms": {k: round(v / 1e6, 3) for k, v in kinds.most_common()},
            "top": ranked[:top]}
