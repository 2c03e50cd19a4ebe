"""MkDocs hook: the configuration reference, generated at build time so it cannot drift.

`configuration-reference.md` is built from `purerl.cli.settings_help.settings_reference()`, the
same rows as `python -m purerl.train --help`: every key of the typed schema
(`purerl.config.Config`) with its type, its default and the comment beside it in
`conf/config.yaml` (else in `purerl/config.py`), grouped as the schema groups them; then the
presets: each `conf/env/*.yaml`, its description (its header comment) and its overrides, and
each network of `conf/network/` by what it changes from `mlp`. Nothing imports JAX. The hook
also publishes the benchmark plots of `benchmarks/results/`.
"""

from __future__ import annotations

import sys
from itertools import groupby
from pathlib import Path

import yaml
from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parents[2]
PAGE = "configuration-reference.md"
PLOTS = ("learning.png", "scaling.png", "peers_rates.png",
         "peers_time_to_return.png")  # benchmarks/results/ -> assets/


def _settings_help():
    """`purerl.cli.settings_help` of this checkout (not of another installed copy)."""
    sys.path.insert(0, str(ROOT))
    try:
        import purerl.cli.settings_help as settings_help
    finally:
        sys.path.remove(str(ROOT))
    return settings_help


def cell(text: str) -> str:
    """`text` for a Markdown table cell."""
    return text.replace("|", "\\|").replace("<", "&lt;")


def group_table(rows) -> list:
    lines = ["| key | type | default | meaning |", "| --- | --- | --- | --- |"]
    lines += [f"| `{r.key}` | {cell(r.type)} | `{r.default}` | {cell(r.comment)} |" for r in rows]
    return lines + [""]


def flatten(tree: dict, prefix: str = "") -> list:
    """A preset's settings as `key=value` overrides."""
    out = []
    for key, value in tree.items():
        if isinstance(value, dict) and value:
            out += flatten(value, f"{prefix}{key}.")
        else:
            text = yaml.safe_dump(value, default_flow_style=True)
            text = text.strip().removesuffix("...").strip()
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
             "`+env=<preset>` applies one file of `conf/env/` over the defaults; any key set on",
             "the command line after it overrides it again.", "",
             "| preset | overrides | what it is |", "| --- | --- | --- |"]
    for path in sorted((ROOT / "conf" / "env").glob("*.yaml")):
        tree = yaml.safe_load(path.read_text()) or {}
        overrides = [f"network={d['override /network']}" for d in tree.pop("defaults", [])
                     if isinstance(d, dict) and "override /network" in d]
        overrides += flatten(tree)
        shown = "<br>".join(f"`{o}`" for o in overrides)
        lines.append(f"| `{path.stem}` | {shown} | {cell(header_comment(path))} |")
    lines += ["", "## Network presets", "",
              "`network=<name>` chooses one file of `conf/network/` (the default is `mlp`);",
              "each sets every `network.*` key. Below, each one's keys that differ from `mlp`.",
              "",
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
    settings_help = _settings_help()
    about = settings_help.group_comments()
    lines = ["# Configuration reference", "",
             "Generated when the site is built from the typed schema (`purerl/config.py`), the",
             "comments of `conf/config.yaml` and the presets of `conf/env/` and `conf/network/`:",
             "the same rows as `python -m purerl.train --help`. Any key can be set on the command",
             "line (`python -m purerl.train +env=cartpole ppo.lr=1e-3`); a key or value the schema",
             "does not accept is a one-line error before anything compiles.",
             "[Configuration](configuration.md) explains the groups.", ""]
    rows = sorted(settings_help.settings_reference(), key=lambda r: r.group != "")
    for group, members in groupby(rows, key=lambda r: r.group):
        lines += [f"## `{group}`" if group else "## Top-level settings", ""]
        if group in about:
            lines += [cell(about[group]), ""]
        lines += group_table(list(members))
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
