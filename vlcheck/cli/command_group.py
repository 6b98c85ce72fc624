"""A command with subcommands (`vlcheck store verify`, `vlcheck pr template`): one way to make one."""

from __future__ import annotations

import argparse


def add_group(sub, name: str, help: str, description: str):
    """The group's parser under `sub`; returns what its subcommands are added to."""
    p = sub.add_parser(name, help=f"{help}: `vlcheck {name} SUBCOMMAND --help`", description=description,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    return p.add_subparsers(dest="action", required=True, metavar="SUBCOMMAND", title="subcommands",
                            help=f"each with its own options (`vlcheck {name} SUBCOMMAND --help`)")
