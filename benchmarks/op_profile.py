"""The harness's `--profile`: a compiled program run once under `jax.profiler`, its ops' time
summed per kind of op; and `--work`: what a program computes, by primitive, from its jaxpr.

The events of XLA's ops are read from the trace: on a GPU or TPU the "XLA Ops" line of each
device plane (else its stream lines, a kernel named by its "hlo_op" stat); on XLA:CPU the host's
`tf_XLA...` threads, leaving out the events that only enclose others (loops, conditionals,
calls, the thunk executor). What an op is comes from the program's optimized HLO: a matmul (a
dot or convolution, alone, fused or a library call), a gather, scatter or dynamic slice (a
loop's stacked outputs among them), a sort, a reduction, random bits, a copy or transpose,
control flow (on a GPU), or elementwise. The raw trace stays in its folder for TensorBoard or
Perfetto. Imports only the standard library and JAX: it runs under every side's Python."""

from __future__ import annotations

import collections
import math
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


def jaxpr_work(fn, *args) -> dict:
    """What `fn(*args)` computes, by primitive, from its jaxpr: the elements each writes and how
    often it runs, a scan's body counted its length times (a while loop's body and a cond's
    last branch once), and the dots' GFLOP. Static, so the same on every platform.

    Returns:
        `{"elements": {primitive: n}, "executions": {primitive: n}, "gflop": float}`, the
            primitives in descending order of elements.
    """
    import jax
    from jax.extend import core

    elements, executions, flop = collections.Counter(), collections.Counter(), 0

    def inner(value):
        if isinstance(value, core.ClosedJaxpr):
            return [value.jaxpr]
        if isinstance(value, core.Jaxpr):
            return [value]
        if isinstance(value, (tuple, list)):
            return [j for v in value for j in inner(v)]
        return []

    def walk(jaxpr, times):
        nonlocal flop
        for eqn in jaxpr.eqns:
            params = eqn.params
            if eqn.primitive.name == "scan":
                walk(params["jaxpr"].jaxpr, times * params["length"])
            elif eqn.primitive.name == "cond":
                walk(params["branches"][-1].jaxpr, times)
            elif subs := [j for value in params.values() for j in inner(value)]:
                for sub in subs:  # a while loop's cond and body, a pjit's or a custom rule's
                    walk(sub, times)
            else:
                written = sum(math.prod(getattr(v.aval, "shape", ())) for v in eqn.outvars)
                elements[eqn.primitive.name] += written * times
                executions[eqn.primitive.name] += times
                if eqn.primitive.name == "dot_general":
                    (contracted, _), _ = params["dimension_numbers"]
                    flop += 2 * written * times * math.prod(
                        eqn.invars[0].aval.shape[d] for d in contracted)

    walk(jax.make_jaxpr(fn)(*args).jaxpr, 1)
    return {"elements": dict(elements.most_common()),
            "executions": {k: executions[k] for k, _ in elements.most_common()},
            "gflop": round(flop / 1e9, 3)}
