"""The command line's grammar, one for every command: real subcommands with their own help
(`vlcheck matrix run --help`), BASELINE CANDIDATE wherever two reports are taken, the same output
flags, every exit code in the help's epilog and in docs/cli.md (scripts/cli-reference writes it from
the parser), and 1 only ever for a crash: the ordinary outcomes of `same-source`, `env`, `run`,
`bisect` and `matrix` driven through `main` with their expensive insides replaced."""

from __future__ import annotations

import ast
import importlib.machinery
import importlib.util
import inspect
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from vlcheck.cli import main as cli
from vlcheck.versions import bisect, envs, matrix, same_source
from vlcheck.cli.main import build_parser, commands, exit_codes, main
from vlcheck.versions.points import ToolFailure
from vlcheck.spec.registry import SPEC_PATH_ENV

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def own_spec_path(monkeypatch):
    monkeypatch.setenv(SPEC_PATH_ENV, "")  # --specs writes it; undone after each test


def _help(capsys, *argv: str) -> str:
    with pytest.raises(SystemExit) as info:
        main([*argv, "--help"])
    assert info.value.code == 0
    return capsys.readouterr().out


def _options(text: str) -> set[str]:
    return set(re.findall(r"^  (--[\w-]+)", text, re.M))


# --- docs/cli.md ----------------------------------------------------------------------------------

def _generator():
    path = ROOT / "scripts" / "cli-reference"
    loader = importlib.machinery.SourceFileLoader("cli_reference", str(path))
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader("cli_reference", loader))
    loader.exec_module(module)
    return module


def test_docs_cli_md_is_what_the_generator_writes():
    page = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    made_with = re.search(r"Python (\d+\.\d+)'s argparse", page.splitlines()[0])
    assert made_with, "docs/cli.md has no generator header: run scripts/cli-reference"
    running = f"{sys.version_info.major}.{sys.version_info.minor}"
    if made_with.group(1) != running:
        pytest.skip(f"docs/cli.md was written with Python {made_with.group(1)}'s argparse, whose help layout "
                    f"differs from {running}'s")
    assert _generator().render() == page, "docs/cli.md is out of date: run scripts/cli-reference"


def test_docs_cli_md_holds_every_command_and_its_exit_codes():
    page = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    for name, _, _ in commands(build_parser()):
        assert re.search(rf"^#+ vlcheck {re.escape(name)}$", page, re.M), f"docs/cli.md: no section for {name}"
        assert re.search(rf"^\| `vlcheck {re.escape(name)}` \|", page, re.M), f"docs/cli.md: {name} not in the table"


# --- subcommands ----------------------------------------------------------------------------------

def test_matrix_has_real_subcommands_each_with_only_its_own_options(capsys):
    group = _help(capsys, "matrix")
    helps = {name: _help(capsys, "matrix", name) for name in matrix.SUBCOMMANDS}
    assert helps["run"] != group and helps["run"].startswith("usage: vlcheck matrix run ")
    assert all(name in group for name in matrix.SUBCOMMANDS), group
    assert "--budget" in _options(helps["run"]) and "--budget" not in _options(helps["report"])
    only = {"--budget": {"run"}, "--write": {"declarations"}, "--vllm-range": {"run"}, "--html": {"run", "report"}}
    for option, where in only.items():
        assert {n for n, text in helps.items() if option in _options(text)} == where, option
    assert _options(helps["redigest"]) == {"--matrix-data", "--specs"}  # (-h, --help: every parser)
    assert "REPORT [REPORT ...]" in helps["add"]


def test_the_old_matrix_spellings_still_parse():
    parser = build_parser()
    for argv, data in ((["matrix", "report", "--data", "X"], "X"), (["matrix", "--data", "X", "report"], "X"),
                       (["matrix", "report"], "compat"), (["matrix", "run", "--budget", "60"], "compat")):
        args = parser.parse_args(argv)
        assert args.data == data and args.func is matrix.COMMANDS[argv[-1] if argv[-1] in matrix.COMMANDS
                                                                  else argv[1]], argv
    args = parser.parse_args(["matrix", "report", "--readme", "README.md"])  # the former name of --markdown
    assert args.readme == "README.md"


def test_a_matrix_without_its_subcommand_is_usage(capsys):
    with pytest.raises(SystemExit) as info:
        main(["matrix"])
    assert info.value.code == 2 and "SUBCOMMAND" in capsys.readouterr().err


def test_two_reports_are_baseline_and_candidate_everywhere(capsys):
    for command in ("diff", "bisect"):
        text = _help(capsys, command)
        assert re.search(r"\n\s+BASELINE CANDIDATE\n", text) or " BASELINE CANDIDATE\n" in text, text
        assert "the baseline" in text and "candidate" in text


def test_the_same_output_flags_take_a_file():
    """--json, --markdown, --html FILE wherever a command writes that output; `list` and `render`,
    whose JSON replaces their table, print it where no FILE (or `-`) is given."""
    printing = {"list", "render"}
    writes = {}
    for name, sub, _ in commands(build_parser()):
        for action in sub._actions:
            for flag in set(action.option_strings) & {"--json", "--markdown", "--html"}:
                assert action.metavar == "FILE", f"vlcheck {name} {flag} takes {action.metavar}"
                if name in printing:
                    assert (action.nargs, action.const) == ("?", "-"), name
                writes.setdefault(name, set()).add(flag)
    assert writes["check"] == writes["diff"] == writes["merge"] == {"--json", "--markdown", "--html"}
    assert writes["matrix report"] == writes["matrix run"] == {"--markdown", "--html"}
    assert writes["bisect"] == writes["same-source"] == {"--json"}


# --- exit codes -----------------------------------------------------------------------------------

def test_every_command_names_its_exit_codes_in_its_help(capsys):
    codes = exit_codes()
    names = [name for name, _, _ in commands(build_parser())]
    assert sorted(codes) == sorted(names)
    for name in names:
        text = _help(capsys, *name.split())
        epilog = text.split("\nexit codes:\n", 1)
        assert len(epilog) == 2, f"vlcheck {name} --help: no exit codes"
        listed = [int(n) for n in re.findall(r"^\s{1,3}(\d)  ", epilog[1], re.M)]
        assert listed == [code for code, _, _ in codes[name][0]], (name, listed)
        assert 1 in listed and 2 in listed and 0 in listed
    assert "exit codes" in _help(capsys, "matrix") and "exit codes" in _help(capsys)


def test_one_means_a_crash_and_only_that():
    """Every command's 1 is the crash, and no command handler returns 1 itself (a literal or a
    constant worth 1): Python's code for an uncaught exception is the only way to it."""
    for name, (codes, _) in exit_codes().items():
        assert [label for code, label, _ in codes if code == 1] == ["crash"], name
        assert all(label != "crash" for code, label, _ in codes if code != 1), name
    from vlcheck.cli import (check_command, diff_command, plant_command, pr_command, spec_commands, store_command,
                             tier_command)

    modules = (cli, check_command, diff_command, spec_commands, store_command, pr_command, tier_command, plant_command,
               bisect, envs, matrix, same_source)
    handlers = [f for module in modules for n, f in vars(module).items()
                if n.startswith("cmd_") and inspect.isfunction(f) and f.__module__ == module.__name__]
    assert len(handlers) >= 14, [f.__name__ for f in handlers]
    for f in handlers:
        tree = ast.parse(inspect.getsource(f).lstrip())
        ones = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Return)
                and isinstance(node.value, ast.Constant) and node.value.value == 1]
        assert not ones, f"{f.__module__}.{f.__name__} returns 1 (line {ones})"
    assert {envs.NOT_MADE, envs.NO_SOLUTION, same_source.DIFFERS, same_source.NOT_DOWNLOADED, bisect.NOT_PLACED,
            cli.RUN_FAIL}.isdisjoint({1, 2})


def test_same_source_differs_is_an_answer_not_a_crash(monkeypatch, capsys):
    def compare(version, folder=None):
        differing = ["vllm/platforms/cpu.py"] if version == "0.32.0" else []
        return same_source.SourceEquality(version, 10, differing=differing)

    monkeypatch.setattr(same_source, "compare", compare)
    assert main(["same-source", "0.24.0"]) == 0
    assert main(["same-source", "0.24.0", "0.32.0"]) == same_source.DIFFERS == 8
    assert "1 of 10 Python files differ" in capsys.readouterr().out

    def no_wheel(version, folder=None):
        raise subprocess.CalledProcessError(1, ["pip", "download"])

    monkeypatch.setattr(same_source, "compare", no_wheel)
    assert main(["same-source", "9.9.9"]) == 3


def test_env_outcomes(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("VLCHECK_ENVS", str(tmp_path))
    assert main(["env"]) == 2  # no --vllm, no --list

    def fails(message):
        def ensure(request, refresh=False, log=print):
            raise envs.EnvError(message)
        return ensure

    monkeypatch.setattr(envs, "ensure", fails("vllm==0.32.0, transformers==5.16.1: uv pip install failed (exit 1):\n"
                                              "  x No solution found when resolving dependencies"))
    assert main(["env", "--vllm", "0.32.0", "--transformers", "5.16.1"]) == envs.NO_SOLUTION == 9
    monkeypatch.setattr(envs, "ensure", fails("uv is not installed: `pip install uv`"))
    assert main(["env", "--vllm", "0.32.0"]) == envs.NOT_MADE == 3

    made = envs.Env(tmp_path / "e", envs.EnvRequest("0.32.0"), {"vllm": "0.32.0"}, None, 0.1)
    monkeypatch.setattr(envs, "ensure", lambda request, refresh=False, log=print: made)
    assert main(["env", "--vllm", "0.32.0"]) == 0 and capsys.readouterr().out.strip() == str(made.python)
    ran = []
    monkeypatch.setattr(envs, "run_vlcheck", lambda env, argv: ran.append(argv) or subprocess.CompletedProcess(argv, 5))
    assert main(["env", "--vllm", "0.32.0", "--", "diff", "a.json", "b.json"]) == 5  # the command's own code
    assert ran == [["diff", "a.json", "b.json"]]
    assert main(["env", "--list"]) == 0


def test_run_findings_are_four_and_a_machine_that_cannot_run_it_is_two(monkeypatch, capsys):
    from vlcheck.engine import run_example
    from vlcheck.engine.engines import EngineUnavailable

    pytest.importorskip("vllm")

    def cache(skip):
        class Engines:
            def get(self, *args, **kwargs):
                raise EngineUnavailable("llava: the engine failed to start: ValueError: no" if not skip else
                                        "no GPU here", skip)

            def close(self):
                pass
        return Engines

    monkeypatch.setattr(run_example, "EngineCache", cache(skip=False))
    assert main(["run", "llava"]) == cli.RUN_FAIL == 4
    monkeypatch.setattr(run_example, "EngineCache", cache(skip=True))
    assert main(["run", "llava"]) == 2
    assert main(["run", "no-such-family"]) == 2


def _report(tmp_path: Path, name: str, vllm: str, **env) -> str:
    path = tmp_path / name
    path.write_text(json.dumps({"schema": 1, "environment": {"vllm": vllm, "transformers": "5.16.1", **env},
                                "checks": [], "families": {}, "summary": {}}))
    return str(path)


def test_bisect_and_matrix_outcomes(monkeypatch, tmp_path, capsys):
    base, cand = _report(tmp_path, "base.json", "0.24.0"), _report(tmp_path, "cand.json", "0.25.0")
    argv = ["bisect", base, cand, "--vllm-releases", "0.24.0,0.25.0", "--transformers-releases", "5.16.1",
            "--store", str(tmp_path / "store")]
    assert main(argv) == 0  # nothing to place
    unplaced = bisect.Finding("llava", "processor", "regressed", "x", note="time budget spent")
    monkeypatch.setattr(bisect, "bisect", lambda *a, **k: [unplaced])
    assert main(argv) == bisect.NOT_PLACED == 3

    def stopped(*args, **kwargs):
        raise ToolFailure("uv is not installed")

    monkeypatch.setattr(bisect, "bisect", stopped)
    assert main(argv) == 3 and "stopped, nothing recorded" in capsys.readouterr().err
    (tmp_path / "bad.json").write_text("{")
    assert main(["bisect", str(tmp_path / "bad.json"), cand]) == 2
    assert main(["bisect", _report(tmp_path, "noversion.json", ""), cand]) == 2

    data = str(tmp_path / "matrix")
    assert main(["matrix", "report", "--data", data]) == 2  # no matrix there
    assert main(["matrix", "declarations", "--data", data]) == 2
    monkeypatch.setattr(matrix, "run", stopped)
    assert main(["matrix", "run", "--data", data, "--vllm-releases", "0.24.0,0.25.0",
                 "--transformers-releases", "5.16.1"]) == 3
    assert main(["matrix", "add", "--data", data, str(tmp_path / "bad.json")]) == 2
    assert main(["matrix", "redigest", "--data", data]) == 0


# --- docs/tests.md and docs/environment.md: what the code reads and offers, every item ----------------

def test_docs_tests_md_lists_the_plugins_pytest_options_as_the_generator_writes():
    page = (ROOT / "docs" / "tests.md").read_text(encoding="utf-8")
    assert _generator().tests_page() == page, "docs/tests.md's pytest options are out of date: run scripts/cli-reference"


def test_docs_tests_md_names_every_test_folder():
    page = (ROOT / "docs" / "tests.md").read_text(encoding="utf-8")
    folders = sorted(p.name for p in (ROOT / "tests").iterdir() if p.is_dir() and not p.name.startswith((".", "__")))
    assert [f for f in folders if f"`tests/{f}/`" not in page] == []


def test_docs_environment_md_names_every_variable_vlcheck_reads():
    """Every `VLCHECK_*` name in vlcheck's code, its scripts, conftest.py and CI, and every other variable
    vlcheck's own modules read with os.environ or os.getenv that a user sets (not a library's own)."""
    page = (ROOT / "docs" / "environment.md").read_text(encoding="utf-8")
    sources = [*(ROOT / "vlcheck").rglob("*.py"), *(ROOT / "scripts").iterdir(), ROOT / "conftest.py",
               ROOT / ".ci" / "run", *(ROOT / "vlcheck" / "pr_gate" / "templates").iterdir()]
    names = {m for path in sources if path.is_file() for m in re.findall(r"\bVLCHECK_[A-Z0-9_]+", path.read_text("utf-8"))}
    assert names, "no VLCHECK_ variable found: the scan is broken"
    assert sorted(n for n in names if n not in page) == []


def test_docs_performance_md_has_one_row_per_target_each_with_its_command():
    page = (ROOT / "docs" / "performance.md").read_text(encoding="utf-8")
    table = page.split("## Today, one row per target", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1:-1] for line in table.splitlines() if line.startswith("| ") and "---" not in line][1:]
    targets = [r[0].strip() for r in rows]
    assert rows and len(targets) == len(set(targets)), f"a target with two rows: {targets}"
    assert all("`" in r[2] and r[3].strip().startswith("20") for r in rows), "each row: a command and when it was measured"


def test_docs_concepts_md_worked_example_is_what_vlcheck_makes_of_the_kept_reports():
    path = ROOT / "scripts" / "worked-example"
    loader = importlib.machinery.SourceFileLoader("worked_example", str(path))
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader("worked_example", loader))
    loader.exec_module(module)
    assert module.page() == (ROOT / "docs" / "concepts.md").read_text(encoding="utf-8"), \
        "docs/concepts.md's worked example is out of date: run scripts/worked-example"



def test_the_matrix_data_folder_has_one_flag_name_and_the_former_ones_still_parse(tmp_path, capsys):
    for command in ("diff", "bisect", "matrix report"):
        text = _help(capsys, *command.split())
        assert "--matrix-data DIR" in text and "--points" not in text and "--data " not in text, command
    parser = build_parser()
    old = ["diff", "a.json", "b.json", "--points", "X"]
    assert parser.parse_args(old).points == parser.parse_args([*old[:3], "--matrix-data", "X"]).points == "X"
    assert parser.parse_args(["bisect", "a.json", "b.json", "--store", "X"]).store == "X"
    assert parser.parse_args(["matrix", "--data", "X", "report"]).data == "X"
    assert parser.parse_args(["matrix", "report", "--matrix-data", "X"]).data == "X"


def test_list_and_render_write_their_json_to_a_file_or_print_it(tmp_path, capsys):
    assert main(["list", "--json", str(tmp_path / "families.json")]) == 0
    written = json.loads((tmp_path / "families.json").read_text())
    assert main(["list", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == written and any(f["name"] == "qwen2_vl" for f in written)


def test_serve_means_which_family_configs_are_served_and_a_launch_line_has_its_own_flag(capsys):
    """"serve" names the family-configs an engine tier also serves (`--vlcheck-serve`, `tier gpu --serve`);
    a user's launch line to check is `--launch-line` / `--launch-lines` (the former `--serve`, `--serve-file`
    still parse, hidden)."""
    text = _help(capsys, "check")
    assert "--launch-line" in text and "--launch-lines FILE" in text and "--serve" not in text
    parser = build_parser()
    line = "vllm serve Qwen/Qwen2-VL-2B-Instruct"
    new = parser.parse_args(["check", "--launch-line", line, "--launch-lines", "f.txt"])
    old = parser.parse_args(["check", "--serve", line, "--serve-file", "f.txt"])
    assert (new.serve, new.serve_file) == (old.serve, old.serve_file) == ([line], ["f.txt"])
    assert "--serve FAMILY" in _help(capsys, "tier", "gpu")
