"""The settings reference: every key of the typed schema (`purerl.config.Config`) with its type,
its default (the schema merged with `conf/config.yaml` and its default network) and the comment
beside it in `conf/config.yaml` (else in `purerl/config.py`); the presets of `conf/env/` and
`conf/network/`; and the command line's `--help` text made of them. Imports neither JAX nor
Hydra, so that `--help` answers at once and a documentation build can reuse it."""

from __future__ import annotations

import inspect
import re
import shutil
import textwrap
import typing
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Any, List, NamedTuple, Optional, Tuple

from omegaconf import OmegaConf

from purerl.config import Config, config_dir

DOCS = "docs/ in the repository, or the site built with mkdocs (mkdocs serve)"

# `key: value  # comment` (YAML) or `name: type = default  # comment` (a dataclass field)
_KEY_LINE = re.compile(r"^(\s*)(\w+):\s*(.*?)(?:\s+#\s?(.*))?$")


class Setting(NamedTuple):
    """One row of the reference."""

    group: str  # the key's first part ("ppo" for ppo.lr), "" for a top-level key
    key: str  # dotted, as written on the command line; `<name>` stands for each of a family
    type: str  # e.g. "float", "int | null", "list[int]"
    default: str  # as written on the command line, e.g. "2.5e-4" -> "0.00025", "null"
    comment: str  # the comment beside the key, "" where it has none


def preset_descriptions(group: str = "env") -> List[Tuple[str, str]]:
    """The presets of one config group.

    Args:
      group: "env" (`+env=<name>`) or "network" (`network=<name>`).

    Returns:
      (name, description) per file of `conf/<group>/`, sorted by name; the description is the
        first comment line of the file up to its first colon (for an env, its id).
    """
    out = []
    for path in sorted((config_dir() / group).glob("*.yaml")):
        lines = [line[1:].strip() for line in path.read_text().splitlines()
                 if line.startswith("#") and "@package" not in line]
        first = lines[0] if lines else ""
        out.append((path.stem, re.split(r":\s|:$", first, maxsplit=1)[0].rstrip(".")))
    return out


def _comments(lines: List[str]) -> dict:
    """Comments by dotted key in YAML-like `lines`: the one beside a key, else the block of
    comment lines right above it."""
    comments, stack, block = {}, [], []
    for line in lines:
        stripped = line.strip()
        if stripped.startswith("#"):
            block.append(stripped.lstrip("#").strip())
            continue
        match = _KEY_LINE.match(line)
        if not match:
            block = []
            continue
        indent, name, _, beside = match.groups()
        stack = [(i, n) for i, n in stack if i < len(indent)] + [(len(indent), name)]
        comment = beside or " ".join(block)
        if comment:
            comments[".".join(n for _, n in stack)] = comment
        block = []
    return comments


def _schema_comments(cls, prefix: str = "") -> dict:
    """Comments by dotted key beside the fields of dataclass `cls` and those nested in it."""
    names = {f.name for f in fields(cls)}
    source = inspect.getsource(cls).splitlines()[1:]
    body = []
    for line in source:
        if line.strip().startswith("def "):
            break
        body.append(line)
    comments = {f"{prefix}{key}": text for key, text in _comments(body).items() if key in names}
    hints = typing.get_type_hints(cls)
    for f in fields(cls):
        if is_dataclass(hints[f.name]):
            comments.update(_schema_comments(hints[f.name], f"{prefix}{f.name}."))
    return comments


def _type_name(hint: Any) -> str:
    """`Optional[List[int]]` -> "list[int] | null"."""
    if hint is Any:
        return "any"
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Union:
        names = [_type_name(a) for a in args if a is not type(None)]
        return " | ".join(names + (["null"] if type(None) in args else []))
    if origin in (list, List):
        return f"list[{_type_name(args[0])}]"
    if origin is dict:
        return "dict"
    return getattr(hint, "__name__", str(hint))


def _value_text(value: Any) -> str:
    """A default as written on the command line: null, true, 500_000, [64, 64], ""."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int) and abs(value) >= 10_000:
        return f"{value:_}"
    if isinstance(value, str):
        return value if value else '""'
    if isinstance(value, list):
        return "[" + ", ".join(_value_text(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_value_text(v)}" for k, v in value.items()) + "}"
    return str(value)


def _default_network() -> Path:
    """The file of the network preset in `conf/config.yaml`'s defaults list."""
    top = OmegaConf.load(config_dir() / "config.yaml")
    name = next(e["network"] for e in top.defaults if not isinstance(e, str) and "network" in e)
    return config_dir() / "network" / f"{name}.yaml"


def _defaults() -> dict:
    """The composed defaults: the schema, its default network, `conf/config.yaml`."""
    top = OmegaConf.load(config_dir() / "config.yaml")
    top.pop("defaults")
    network = {"network": OmegaConf.load(_default_network())}
    merged = OmegaConf.merge(OmegaConf.structured(Config), network, top)
    return OmegaConf.to_container(merged, resolve=True)


def _family(cls) -> Optional[type]:
    """The dataclass every field of `cls` has (a family such as ppo.schedule.<name>), or None."""
    hints = typing.get_type_hints(cls)
    kinds = {hints[f.name] for f in fields(cls)}
    kind = kinds.pop() if len(kinds) == 1 else None
    return kind if kind is not None and is_dataclass(kind) else None


def settings_reference() -> List[Setting]:
    """Every setting of the command line, in the schema's order.

    A dataclass whose fields all share one dataclass (`ppo.schedule`: one `ScheduleConfig`
    per hyperparameter) is listed once, as `ppo.schedule.<name>.kind` and so on.

    Returns:
      One `Setting` per key: its group, dotted key, type, default and comment.
    """
    top = _comments((config_dir() / "config.yaml").read_text().splitlines())
    network = _comments(_default_network().read_text().splitlines())
    comments = {f"network.{key}": text for key, text in network.items()}
    comments.update(_schema_comments(Config))  # the schema's before the default network's
    comments.update(top)
    defaults = _defaults()
    rows: List[Setting] = []

    def walk(cls, prefix: str, values: Any) -> None:
        hints = typing.get_type_hints(cls)
        for f in fields(cls):
            key, hint = prefix + f.name, hints[f.name]
            group = key.split(".")[0] if "." in key else ""
            family = _family(hint) if is_dataclass(hint) else None
            if family is not None:  # listed once, `<name>` standing for each member
                names = [x.name for x in fields(hint)]
                member_hints = typing.get_type_hints(family)
                for i, m in enumerate(fields(family)):
                    comment = comments.get(f"{key}.{names[0]}.{m.name}", "")
                    if i == 0:
                        comment = f"<name>: {', '.join(names)}; {m.name}: {comment}"
                    rows.append(Setting(
                        group, f"{key}.<name>.{m.name}", _type_name(member_hints[m.name]),
                        _value_text(getattr(family(), m.name)), comment))
            elif is_dataclass(hint):
                walk(hint, key + ".", values[f.name])
            else:
                rows.append(Setting(group, key, _type_name(hint), _value_text(values[f.name]),
                                    comments.get(key, "")))

    walk(Config, "", defaults)
    return rows


def group_comments() -> dict:
    """The comment above each group of `conf/config.yaml` (e.g. sweep, pbt), by group.

    Returns:
        `{group: comment}` of the groups that have one.
    """
    comments = _comments((config_dir() / "config.yaml").read_text().splitlines())
    groups = {f.name for f in fields(Config) if is_dataclass(typing.get_type_hints(Config)[f.name])}
    return {g: comments[g] for g in groups if g in comments}


def help_text(width: Optional[int] = None) -> str:
    """The command line's `--help`: usage, options, presets, every setting, where the docs are.

    Args:
      width: the columns to wrap at; None: the terminal's, between 80 and 120.

    Returns:
      The text, ending in a newline.
    """
    width = width or min(max(shutil.get_terminal_size((100, 24)).columns, 80), 120)

    def wrap(text: str, indent: str = "  ", hang: str = "      ") -> List[str]:
        return textwrap.wrap(text, width, initial_indent=indent, subsequent_indent=hang,
                             break_on_hyphens=False) or [indent.rstrip()]

    out = ["usage: python -m purerl.train +env=<preset> [key=value ...]",
           "       purerl-train +env=<preset> [key=value ...]", ""]
    out += wrap("Trains PPO on an environment preset. Every setting below can be given as "
                "key=value (e.g. ppo.lr=1e-3 total_timesteps=1_000_000); with -m, "
                "comma-separated values (ppo.lr=1e-3,3e-4) run one job each.", "", "")
    out += ["", "options:",
            "  -h, --help        this help",
            "  --version         print purerl's version",
            "  -m, --multirun    run every combination of the comma-separated values",
            "  --hydra-help      Hydra's own help (--cfg job, --info, tab completion, ...)",
            "", "presets (+env=<name>, conf/env/):"]
    for name, text in preset_descriptions("env"):
        out += wrap(f"{name:<30} {text}", "  ", " " * 33)
    out += ["", "networks (network=<name>, conf/network/; default mlp):"]
    for name, text in preset_descriptions("network"):
        out += wrap(f"{name:<30} {text}", "  ", " " * 33)
    out += ["", "settings (key=default [type] comment; defaults before the preset's overrides):"]
    rows = settings_reference()
    order = list(dict.fromkeys(row.group for row in rows))  # the top-level keys together
    above, current = group_comments(), None
    for row in sorted(rows, key=lambda r: order.index(r.group)):
        if row.group != current:
            current = row.group
            out += [""] + wrap(current + ": " + above.get(current, "") if current else "top level:",
                               "", "  ")
        out += wrap(f"{row.key}={row.default} [{row.type}] {row.comment}".rstrip())
    out += ["", f"documentation: {DOCS}"]
    return "\n".join(out) + "\n"
