"""MkDocs hook: the configuration reference, generated at build time so it cannot drift.

`configuration-reference.md` is built from three sources:

- the typed schema, `purerl.config.Config` and its dataclasses: every key, its type and its
  default (the schema is authoritative: every field is listed);
- the comment beside each key in `conf/config.yaml` (the network's in `conf/network/mlp.yaml`),
  read by a small line parser, with the keys grouped as that file groups them; a key without
  one there takes the comment beside its field in `purerl/config.py`;
- the presets: each `conf/env/*.yaml`, its description (its header comment) and its overrides,
  and each network of `conf/network/`.

A key in `conf/config.yaml` that the schema lacks stops the build. Only `purerl.config` is
imported (no JAX). The hook also publishes the benchmark plots of `benchmarks/results/`.
"""

from __future__ import annotations

import dataclasses
import re
import sys
import typing
from pathlib import Path

import yaml
from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parents[2]
PAGE = "configuration-reference.md"
PLOTS = ("learning.png", "throughput.png", "scaling.png")  # benchmarks/results/ -> assets/

KEY_LINE = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z_]\w*):(?P<value>[^#]*?)\s*(#\s*(?P<comment>.*))?$")
FIELD_LINE = re.compile(r"^    (?P<key>\w+): [^=]+=.*?#\s*(?P<comment>.*)$")


def _config_module():
    """`purerl.config` of this checkout (not of another installed copy)."""
    sys.path.insert(0, str(ROOT))
    try:
        import purerl.config as config
    finally:
        sys.path.remove(str(ROOT))
    return config


def parse_yaml_comments(path: Path):
    """[(group, group comment, [(key, comment)])] in the file's order; group "" is a run of
    top-level keys. A comment block above a key or group is its comment when the line itself
    has none. The `defaults:` list is skipped."""
    sections, block, skipping = [], [], False
    for line in path.read_text().splitlines():
        stripped = line.strip()
        if not stripped:
            block = []
            continue
        if stripped.startswith("#"):
            block.append(stripped.lstrip("#").strip())
            continue
        if skipping and (line.startswith(" ") or stripped.startswith("-")):
            continue
        match = KEY_LINE.match(line)
        if match is None:
            continue
        skipping = False
        key, value = match["key"], match["value"].strip()
        comment = match["comment"] or " ".join(block)
        block = []
        if not match["indent"]:
            if key == "defaults":
                skipping = True
            elif value:  # a top-level key
                if not sections or sections[-1][0]:
                    sections.append(("", "", []))
                sections[-1][2].append((key, comment))
            else:  # a group
                sections.append((key, comment, []))
        else:
            sections[-1][2].append((key, comment))
    return sections


def source_comments(module) -> dict:
    """{class name: {field: the comment beside it}} from the schema's source."""
    comments, current = {}, None
    for line in Path(module.__file__).read_text().splitlines():
        if line.startswith("class "):
            current = comments.setdefault(line[6:].split("(")[0].split(":")[0], {})
        elif current is not None and (match := FIELD_LINE.match(line)):
            current[match["key"]] = match["comment"]
    return comments


def type_name(hint) -> str:
    """`Optional[List[float]]` -> `list[float] | None`."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Union:
        names = [type_name(a) for a in args if a is not type(None)]
        return " | ".join(names) + (" | None" if type(None) in args else "")
    if origin is not None:
        return f"{origin.__name__}[{', '.join(type_name(a) for a in args)}]"
    return "any" if hint is typing.Any else getattr(hint, "__name__", str(hint))


def default_of(field) -> object:
    if field.default is not dataclasses.MISSING:
        return field.default
    return field.default_factory()


def show(value) -> str:
    if value is None:
        return "`null`"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, int) and value >= 10_000:
        return f"`{value:_}`"
    if value == "":
        return '`""`'
    return f"`{value}`"


def cell(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace("|", "\\|")


def leaf_rows(prefix: str, schema_class, comments: dict, py_comments: dict):
    """(key, type, default, comment) for every field of `schema_class`, nested ones expanded."""
    hints = typing.get_type_hints(schema_class)
    for field in dataclasses.fields(schema_class):
        hint, key = hints[field.name], f"{prefix}{field.name}"
        if dataclasses.is_dataclass(hint):
            inner = {h for h in typing.get_type_hints(hint).values()}
            if len(inner) == 1 and dataclasses.is_dataclass(next(iter(inner))):
                # one schema per name (the schedules): listed once, as <name>
                names = ", ".join(f.name for f in dataclasses.fields(hint))
                if comments.get(field.name):
                    yield key, "", "", f"{comments[field.name]} <name>: one of {names}."
                yield from leaf_rows(f"{key}.<name>.", next(iter(inner)), {}, py_comments)
            else:
                yield from leaf_rows(f"{key}.", hint, {}, py_comments)
            continue
        comment = comments.get(field.name) or py_comments.get(schema_class.__name__, {}).get(field.name, "")
        yield key, type_name(hint), show(default_of(field)), comment


def group_table(rows) -> list:
    lines = ["| key | type | default | meaning |", "| --- | --- | --- | --- |"]
    lines += [f"| `{k}` | {cell(t)} | {d} | {cell(c)} |" for k, t, d, c in rows]
    return lines + [""]


def flatten(tree: dict, prefix: str = "") -> list:
    """A preset's settings as `key=value` overrides."""
    out = []
    for key, value in tree.items():
        if isinstance(value, dict) and value:
            out += flatten(value, f"{prefix}{key}.")
        else:
            text = yaml.safe_dump(value, default_flow_style=True).strip().removesuffix("...").strip()
            if isinstance(value, int) and not isinstance(value, bool) and value >= 10_000:
                text = f"{value:_}"
            out.append(f"{prefix}{key}={text}")
    return out


def header_comment(path: Path) -> str:
    lines = []
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        if "@package" not in line:
            lines.append(line.lstrip("#").strip())
    return " ".join(lines)


def presets_section() -> list:
    lines = ["## Environment presets", "",
             "`+env=<preset>` applies one file of `conf/env/` over the defaults; any key set on the",
             "command line after it overrides it again.", "",
             "| preset | overrides | what it is |", "| --- | --- | --- |"]
    for path in sorted((ROOT / "conf" / "env").glob("*.yaml")):
        tree = yaml.safe_load(path.read_text()) or {}
        overrides = [f"network={d['override /network']}" for d in tree.pop("defaults", [])
                     if isinstance(d, dict) and "override /network" in d]
        overrides += flatten(tree)
        shown = "<br>".join(f"`{o}`" for o in overrides)
        lines.append(f"| `{path.stem}` | {shown} | {cell(header_comment(path))} |")
    lines += ["", "## Network presets", "",
              "`network=<name>` chooses one file of `conf/network/` (the default is `mlp`); each sets",
              "every `network.*` key. Below, each one's keys that differ from `mlp`.", "",
              "| network | differs from `mlp` | what it is |", "| --- | --- | --- |"]
    base = yaml.safe_load((ROOT / "conf" / "network" / "mlp.yaml").read_text())
    for path in sorted((ROOT / "conf" / "network").glob("*.yaml")):
        tree = yaml.safe_load(path.read_text())
        diff = flatten({k: v for k, v in tree.items() if base.get(k) != v}, "network.")
        shown = "<br>".join(f"`{o}`" for o in diff) or "-"
        lines.append(f"| `{path.stem}` | {shown} | {cell(header_comment(path))} |")
    return lines + [""]


def reference_page() -> str:
    """The page's Markdown."""
    config = _config_module()
    py_comments = source_comments(config)
    sections = parse_yaml_comments(ROOT / "conf" / "config.yaml")
    network = parse_yaml_comments(ROOT / "conf" / "network" / "mlp.yaml")
    top_fields = {f.name: f for f in dataclasses.fields(config.Config)}
    hints = typing.get_type_hints(config.Config)
    lines = ["# Configuration reference", "",
             "Generated when the site is built from the typed schema (`purerl/config.py`), the",
             "comments of `conf/config.yaml` and the presets of `conf/env/` and `conf/network/`.",
             "Any key can be set on the command line (`python -m purerl.train +env=cartpole",
             "ppo.lr=1e-3`); a key or value the schema does not accept is a one-line error before",
             "anything compiles. [Configuration](configuration.md) explains the groups.", ""]
    listed = set()
    for group, comment, keys in sections:
        if group:
            if group not in top_fields:
                raise KeyError(f"conf/config.yaml: group {group!r} is not in purerl.config.Config")
            schema_class, prefix, title = hints[group], f"{group}.", f"`{group}`"
            listed.add(group)
        else:
            schema_class, prefix, title = config.Config, "", "Top-level settings"
        comments = dict(keys)
        fields = {f.name for f in dataclasses.fields(schema_class)}
        for key in comments:
            if key not in fields:
                raise KeyError(f"conf/config.yaml: {prefix}{key} is not in purerl.config")
        lines += [f"## {title}", ""] + ([cell(comment), ""] if comment else [])
        if group:
            rows = list(leaf_rows(prefix, schema_class, comments, py_comments))
        else:
            rows = [row for name in comments for row in leaf_rows("", config.Config, comments, py_comments)
                    if row[0] == name]
            listed.update(comments)
        lines += group_table(rows)
    for name, field in top_fields.items():  # schema keys conf/config.yaml does not list
        if name in listed:
            continue
        if dataclasses.is_dataclass(hints[name]):
            if name == "network":
                comment = network[0][2] if network else []
                lines += ["## `network`", "", "The defaults of `conf/network/mlp.yaml` (`network=mlp`);",
                          "[network presets](#network-presets) below.", ""]
                lines += group_table(leaf_rows("network.", hints[name], dict(comment), py_comments))
            else:
                lines += [f"## `{name}`", ""] + group_table(leaf_rows(f"{name}.", hints[name], {}, py_comments))
        else:
            lines += ["## Other settings", ""] + group_table(
                [row for row in leaf_rows("", config.Config, {}, py_comments) if row[0] == name])
    return "\n".join(lines + presets_section())


def on_files(files, config):
    """Adds the generated reference page and the benchmark plots to the site's files."""
    files.append(File.generated(config, PAGE, content=reference_page()))
    for name in PLOTS:
        files.append(File.generated(config, f"assets/benchmarks/{name}",
                                    abs_src_path=str(ROOT / "benchmarks" / "results" / name)))
    return files


if __name__ == "__main__":  # python docs/hooks/config_reference.py: print the page
    print(reference_page())
