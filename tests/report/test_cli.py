"""The `vlcheck` command explains itself: help that leads with the gate, every flag explained,
--specs on every command, --version (user specs through the command: tests/prompt_format/test_user_specs.py)."""

import json
import re

import pytest

import vlcheck
from vlcheck.cli import main as cli
from vlcheck.cli.main import build_parser, main
from vlcheck.spec.registry import SPEC_PATH_ENV


@pytest.fixture(autouse=True)
def own_spec_path(monkeypatch):
    monkeypatch.setenv(SPEC_PATH_ENV, "")  # --specs writes it; undone after each test


def test_help_leads_with_the_gate_and_every_flag_is_explained(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out
    assert text.index("vlcheck check --json before.json") < text.index("vlcheck diff before.json after.json")
    commands = re.findall(r"^    (\w+) ", text, re.M)
    assert commands[:3] == ["check", "diff", "merge"] and "init" in commands, commands
    parser = build_parser()
    for name, sub in parser._subparsers._group_actions[0].choices.items():  # `matrix` too: its subcommands explained
        unexplained = [a.dest for a in sub._actions if not a.help]
        assert not unexplained, f"vlcheck {name}: flags without help: {unexplained}"
    for name, sub, _ in cli.commands(parser):  # every command that runs (`matrix run`, not `matrix`)
        unexplained = [a.dest for a in sub._actions if not a.help]
        assert not unexplained, f"vlcheck {name}: flags without help: {unexplained}"
        assert any("--specs" in a.option_strings for a in sub._actions), f"vlcheck {name} takes no --specs"


def test_version(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0 and capsys.readouterr().out.strip() == f"vlcheck {vlcheck.__version__}"
