"""docs/architecture.md is the map of the code, kept true: every module, function and class it
names exists, every module of purerl/ has its row in the layer table, and the diagram's layers
are the table's rows, its dashed arrows every import from a layer up to a higher one.

A name is read from the page's code spans and, in its code blocks, where it begins with a
module's name. Modules are imported, nothing is compiled."""

import ast
import importlib
import inspect
import re
from graphlib import TopologicalSorter

from conftest import REPO

DOC = REPO / "docs" / "architecture.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)
SPAN = re.compile(r"`([^`]+)`")
# a dotted name, then what a call of it is given, then the attributes of what it returns
NAME = re.compile(r"([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)(?:\((.*)\))?(?:\.\w+)*")
BLOCK_NAME = re.compile(r"(?<![\w.=/-])([a-z_]\w*(?:\.[A-Za-z_]\w*)+)(?![\w=]|\.\w)")
BLOCK_PATH = re.compile(r"(?<![\w/])((?:\w+/)*\w+\.py)\b")
FILE_NAME = re.compile(r"\.(jsonl?|md|yaml|png|onnx)$")  # summary.json, report.md, ...
TOP_DIRS = ("examples/", "tests/", "benchmarks/", "docs/")  # paths from the repository's root
# Names the page uses for an instance of a class of purerl's: a `Run`, a state's normalizer,
# the `env` settings
INSTANCES = {"run": ("purerl.runs.events", "Run"),
             "normalizer": ("purerl.envs.normalization", "Normalizer"),
             "env": ("purerl.config", "EnvConfig")}
OTHER_LIBRARIES = {"jax", "optax", "typing"}  # the first part of a dotted name of theirs
# JAX's, gymnax's, a shape's; the page's placeholders for a user's functions
OTHER_NAMES = {"vmap", "scan", "shard_map", "Environment", "B", "make_fn", "term", "fn"}


def module_name(path):
    """purerl/logging/sinks.py -> purerl.logging.sinks; a package's __init__.py -> its name."""
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


PATHS = {module_name(p): p for p in sorted((REPO / "purerl").rglob("*.py"))}
TAILS = {}  # every tail of a module's dotted name (sinks, logging.sinks, ...) -> its modules
for _module in PATHS:
    _parts = _module.split(".")
    for _i in range(len(_parts)):
        TAILS.setdefault(".".join(_parts[_i:]), set()).add(_module)


def definitions():
    """(the names defined at a module's top -> their modules, the names defined in a class's
    body: methods and fields), read from purerl's source."""
    top, members = {}, set()

    def names(body):
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                yield node.name
            targets = (node.targets if isinstance(node, ast.Assign)
                       else [node.target] if isinstance(node, ast.AnnAssign) else [])
            yield from (t.id for t in targets if isinstance(t, ast.Name))

    for module, path in PATHS.items():
        tree = ast.parse(path.read_text())
        for name in names(tree.body):
            top.setdefault(name, set()).add(module)
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                members.update(names(node.body))
    return top, members


TOP, MEMBERS = definitions()


def unique(found, name):
    """The one module or file in `found`; raises LookupError saying what `name` may be."""
    if len(found) != 1:
        raise LookupError(f"{name} may be any of {', '.join(sorted(map(str, found)))}"
                          if found else f"{name}: no such module or file in purerl/")
    return next(iter(found))


def files(path):
    """The files and folders of purerl/ whose path ends with `path` (a folder's with /)."""
    return {f for p in PATHS.values() for f in (p, p.parent)
            if f"/{f.relative_to(REPO)}{'/' * f.is_dir()}".endswith(f"/{path}")}


def attribute(obj, name):
    """`obj.name`, or for a class a field it declares without a value (a dataclass's)."""
    if hasattr(obj, name):
        return getattr(obj, name)
    if inspect.isclass(obj) and any(name in vars(c).get("__annotations__", {})
                                    for c in obj.__mro__):
        return None
    raise LookupError(f"{getattr(obj, '__name__', obj)} has no {name}")


def resolve(dotted):
    """What a dotted name names: a module of purerl's by an unambiguous tail of its name, a
    class or function defined at a module's top, or an instance's class (`INSTANCES`), then
    attributes of it; None for another library's name. Raises LookupError."""
    parts = dotted.split(".")
    for k in range(len(parts), 0, -1):
        tail = ".".join(parts[:k])
        if tail in TAILS:
            obj = importlib.import_module(unique(TAILS[tail], tail))
            break
    else:
        k, first = 1, parts[0]
        if first in OTHER_LIBRARIES or dotted in OTHER_NAMES:
            return None
        if first in INSTANCES:
            module, top = INSTANCES[first]
        elif first in TOP:
            module, top = unique(TOP[first], first), first
        elif len(parts) == 1 and first in MEMBERS:
            return None  # a method or field, named without its class
        else:
            raise LookupError("no module, class, function or field of purerl's")
        obj = getattr(importlib.import_module(module), top)
    for part in parts[k:]:
        obj = attribute(obj, part)
    return obj


def check(token):
    """The problem with a code span of the page, or None where there is none or it names no
    code (a setting, a shape, a file, a metric's key); a signature's name is checked."""
    if re.search(r"\w\. \w", token):
        return f"{token}: a name broken by a line break (Markdown shows a space)"
    if token.endswith((".py", "/")) and re.fullmatch(r"[\w/.]+", token):
        if token.startswith(TOP_DIRS):
            return None if (REPO / token).exists() else f"{token}: no such file"
        try:
            unique(files(token), token)
        except LookupError as error:
            return str(error)
        return None
    match = NAME.fullmatch(token.split(" -> ")[0])
    if not match or FILE_NAME.search(token) or re.match(r"[\w.]+=", token):
        return None
    name, args = match.groups()
    try:
        obj = resolve(name)
    except ModuleNotFoundError as error:  # a suite's adapter, its optional package not here
        return None if error.name.split(".")[0] != "purerl" else f"{token}: {error}"
    except (LookupError, ImportError) as error:
        return f"{token}: {error}"
    keywords = re.findall(r"\b(\w+)=", args or "")
    if keywords and obj is not None:
        parameters = inspect.signature(obj).parameters
        if not any(p.kind is p.VAR_KEYWORD for p in parameters.values()):
            unknown = [k for k in keywords if k not in parameters]
            if unknown:
                return f"{token}: {name} takes no {', '.join(unknown)}"
    return None


def page():
    """The page's text with its code blocks apart: (text, {info string: [block, ...]})."""
    text = DOC.read_text()
    blocks = {}
    for info, block in FENCE.findall(text):
        blocks.setdefault(info, []).append(block)
    return FENCE.sub("", text), blocks


def spans(text):
    """The code spans, a line break in one read as a space (as Markdown renders it)."""
    return [" ".join(s.split()) for s in SPAN.findall(text)]


def test_every_name_on_the_page_exists():
    text, blocks = page()
    tokens = spans(text)
    for block in blocks.get("", []):
        tokens += [n for n in BLOCK_NAME.findall(block)
                   if n.split(".")[0] in TAILS and not FILE_NAME.search(n)]
        tokens += BLOCK_PATH.findall(block)
    assert len(tokens) > 200, "the page's code spans are not read"
    problems = sorted({p for p in map(check, tokens) if p})
    assert not problems, "docs/architecture.md names what does not exist:\n" + "\n".join(problems)


def layers():
    """The layer table's rows: (layer, the modules its second column names)."""
    table = re.search(r"^## Layers\n(.*?)^## ", DOC.read_text(), re.M | re.S).group(1)
    rows = []
    for line in re.findall(r"^\|(.*)\|$", table, re.M)[2:]:
        layer, modules, _job = (cell.strip() for cell in line.split("|"))
        named = set()
        for token in spans(modules):
            if token.endswith(("/", ".py")):
                found = unique(files(token), token)
                named.add(module_name(found / "__init__.py" if found.is_dir() else found))
            else:
                named.add(unique(TAILS.get(token, set()), token))
        rows.append((layer, named))
    return rows


def test_every_module_has_its_row_in_the_layer_table():
    placed = set().union(*(modules for _, modules in layers()))
    missing = [str(p.relative_to(REPO)) for m, p in PATHS.items()
               if p.name != "__init__.py" and m not in placed]
    assert not missing, ("modules the layer table of docs/architecture.md does not place: "
                         + ", ".join(missing))


def imports(module):
    """The modules of purerl's that `module` imports, at its top or in a function; not those
    imported for annotations only (under `if TYPE_CHECKING:`)."""
    tree = ast.parse(PATHS[module].read_text())
    skipped = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
               and ast.unparse(node.test).endswith("TYPE_CHECKING")
               for statement in node.body for n in ast.walk(statement)}
    found = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.update(f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in PATHS
                         else node.module for a in node.names)
    return {m for m in found if m in PATHS and m != module}


def diagram():
    """The mermaid diagram's layers, in the order of its solid arrows, and its dashed arrows:
    {(from layer, to layer): label}."""
    _, blocks = page()
    assert len(blocks.get("mermaid", [])) == 1, "docs/architecture.md has one mermaid diagram"
    block = blocks["mermaid"][0]
    labels = dict(re.findall(r'(\w+)\["([^"]+)"\]', block))
    chain = re.findall(r"(\w+)(?:\[\"[^\"]*\"\])?\s*-->", block)
    last = re.findall(r"-->\s*(\w+)", block)[-1:]
    dashed = {(labels[a], labels[b]): label
              for a, label, b in re.findall(r'(\w+)\s*-\.->\|"([^"]+)"\|\s*(\w+)', block)}
    return [labels[n] for n in chain + last], dashed


def test_the_diagram_draws_the_layers_and_every_upward_import():
    rows = layers()
    order = [layer for layer, _ in rows]
    chain, dashed = diagram()
    assert chain == order, f"the diagram's layers {chain} are not the table's {order}"
    level = {m: i for i, (_, modules) in enumerate(rows) for m in modules}
    upward = {}
    for module in level:
        for imported in imports(module):
            if imported in level and level[imported] < level[module]:
                upward.setdefault((order[level[module]], order[level[imported]]), []).append(
                    (PATHS[module], PATHS[imported]))
    assert set(dashed) == set(upward), (
        f"the diagram's dashed arrows {sorted(dashed)} are not the imports up a layer: "
        + "; ".join(f"{a.relative_to(REPO)} imports {b.relative_to(REPO)}"
                    for pairs in upward.values() for a, b in pairs))
    named = [[str(p.relative_to(REPO / "purerl")) for p in pair] + [dashed[layers]]
             for layers, pairs in upward.items() for pair in pairs]
    unnamed = [f"{a} imports {b}" for a, b, label in named if a not in label or b not in label]
    assert not unnamed, "the dashed arrows' labels do not name: " + ", ".join(unnamed)


def test_the_modules_import_no_cycle():
    TopologicalSorter({m: imports(m) for m in PATHS}).prepare()  # CycleError names one
