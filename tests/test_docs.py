"""The examples in README.md and docs/: every `python -m purerl.train`, `python -m
purerl.evaluate`, `python -m purerl.export` and `python -m purerl.report` command is checked as
the command line would check it, without training, and every Python block runs, at a tiny
budget. A renamed key, a bad value, a missing preset or a changed API breaks the suite, not a
user."""

import dataclasses
import re
import shlex

import pytest
from conftest import REPO

from purerl.cli.preflight import compose_jobs
from purerl.config import Config, ConfigError, EnvConfig, LogConfig
from purerl.evaluate import parse_args as evaluate_args
from purerl.export import parse_args as export_args
from purerl.report import parse_args as parse_report_args

PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
SHELL_BLOCK = re.compile(r"^```(?:bash|sh|shell|console)\n(.*?)^```", re.M | re.S)
COMMAND_ENDS = {"&", "&&", ";", "|", "||"}
# A command whose environment or launcher needs an extra that is not installed is still valid
NOT_INSTALLED = re.compile(r"not installed: pip install")
ENTRY_POINTS = {"purerl.train": "train", "purerl-train": "train",
                "purerl.evaluate": "evaluate", "purerl-evaluate": "evaluate",
                "purerl.export": "export", "purerl-export": "export",
                "purerl.report": "report", "purerl-report": "report"}


def documented_commands():
    """(page:line, entry point, its arguments) of every purerl command in a shell block."""
    commands = []
    for page in PAGES:
        text = page.read_text()
        for block in SHELL_BLOCK.finditer(text):
            first_line = text[:block.start(1)].count("\n") + 1
            joined = re.sub(r"\\\n", " ", block.group(1))
            offset = 0
            for line in joined.splitlines():
                offset += 1
                if not any(name in line for name in ENTRY_POINTS):
                    continue
                words = shlex.split(line.removeprefix("$ "), comments=True)
                for i, word in enumerate(words):
                    entry = ENTRY_POINTS.get(word)
                    if entry and (word.startswith("purerl-") or words[i - 1] == "-m"):
                        where = f"{page.relative_to(REPO)}:{first_line + offset - 1}"
                        args = words[i + 1:]
                        ends = [j for j, w in enumerate(args) if w in COMMAND_ENDS]
                        args = args[:ends[0]] if ends else args
                        # a value that is a shell variable (a loop's, SLURM's): a number
                        args = [re.sub(r"=\$\{?\w+\}?$", "=0", a) for a in args]
                        commands.append(pytest.param(entry, args, id=where))
                        break
    return commands


COMMANDS = documented_commands()


def test_the_docs_have_commands_to_check():
    assert len([c for c in COMMANDS if c.values[0] == "train"]) >= 20
    assert any(c.values[0] == "evaluate" for c in COMMANDS)
    assert any(c.values[0] == "export" for c in COMMANDS)
    assert any(c.values[0] == "report" for c in COMMANDS)


@pytest.mark.parametrize("entry, args", COMMANDS)
def test_a_documented_command_is_valid(entry, args, tmp_path):
    """Checked as the command line checks it before anything runs; `run=` of an evaluation
    or an export names a run of the reader's, here an empty directory; a report's arguments are
    checked without its runs."""
    if any(a in ("--help", "-h", "--version", "--hydra-help") for a in args):
        return  # no settings to check
    try:
        if entry in ("evaluate", "export"):
            parse = evaluate_args if entry == "evaluate" else export_args
            parse([f"run={tmp_path}" if a.startswith("run=") else a for a in args])
        elif entry == "report":
            parse_report_args(args)
        else:
            assert compose_jobs(args)
    except ConfigError as error:
        if not NOT_INSTALLED.search(str(error)):
            raise


PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", re.M | re.S)
LOADED_RUN = re.compile(r"""purerl\.load\(["']([^"']+)["']""")


def documented_python():
    """(page, its Python blocks in order) of every page that has any."""
    pages = []
    for page in PAGES:
        blocks = [m.group(1) for m in PYTHON_BLOCK.finditer(page.read_text())]
        if blocks:
            pages.append(pytest.param(blocks, id=str(page.relative_to(REPO))))
    return pages


@dataclasses.dataclass
class TinyConfig(Config):
    """A `Config` that trains two updates at most: the docs' blocks at a tiny budget."""

    def __post_init__(self):
        self.total_timesteps = min(self.total_timesteps,
                                   2 * self.env.num_envs * self.ppo.num_steps)


@pytest.fixture
def tiny_budgets(monkeypatch, tmp_path):
    """Runs a page's Python blocks as a reader would, at tiny budgets: every `Config` trains
    two updates at most (`TinyConfig`), the working directory is `tmp_path`, and the run
    directories the blocks `purerl.load` are tiny CartPole runs there."""
    import purerl
    import purerl.config

    monkeypatch.setattr(purerl, "Config", TinyConfig)
    monkeypatch.setattr(purerl.config, "Config", TinyConfig)
    monkeypatch.chdir(tmp_path)

    def prepare(blocks):
        for run_dir in {m for block in blocks for m in LOADED_RUN.findall(block)}:
            purerl.run(TinyConfig(env=EnvConfig(name="CartPole-v1"), log=LogConfig(
                tensorboard=False, progress=False)), tmp_path / run_dir)

    return prepare


@pytest.mark.parametrize("blocks", documented_python())
def test_a_pages_python_blocks_run(blocks, tiny_budgets):
    """Each page's Python blocks run in order, in one namespace, without an error."""
    tiny_budgets(blocks)
    namespace = {"__name__": "__docs__"}
    for block in blocks:
        exec(compile(block, "<docs>", "exec"), namespace)


BENCHMARK_COMMAND = re.compile(r"python3? benchmarks/(\w+\.py)([^\n#]*)")


def test_the_benchmark_tables_are_rendered_from_the_results():
    """Every table between `<!-- table: NAME -->` markers in the README and docs/ is what
    `benchmarks/tables.py` renders from `benchmarks/results/` now: a changed result or a table
    edited by hand fails here (`python benchmarks/tables.py` renders them again)."""
    import sys

    sys.path.insert(0, str(REPO / "benchmarks"))
    import tables

    marked = [m.group(2) for page in tables.PAGES for m in tables.MARKED.finditer(page.read_text())]
    assert "summary" in marked and len(marked) >= 15
    assert tables.stale() == []


def test_a_documented_benchmark_command_names_a_script_and_its_flags():
    """Each `python benchmarks/<script>.py` in a shell block of the README, the docs or
    benchmarks/README.md names a script there, and each `--flag` it passes is one the script
    (or the harness it imports) declares."""
    found = 0
    for page in [*PAGES, REPO / "benchmarks" / "README.md"]:
        for block in SHELL_BLOCK.finditer(page.read_text()):
            for script, rest in BENCHMARK_COMMAND.findall(re.sub(r"\\\n", " ", block.group(1))):
                source = REPO / "benchmarks" / script
                assert source.is_file(), f"{page.name}: benchmarks/{script} does not exist"
                text = source.read_text()
                for flag in re.findall(r"(?<!\S)(--[\w-]+)", rest):
                    assert f'"{flag}"' in text, f"{page.name}: {script} has no {flag}"
                found += 1
    assert found >= 20
