"""Accepted changes: what a person reviewed in a `vlcheck diff` and accepts, applied like a
declaration. A TOML file of entries, each naming one change exactly as the diff found it:

    [[accepted]]
    family = "qwen3_vl"
    check = "processor [single]"          # the diff's label: check, and [family-config] where split
    fact = 'single.token_counts["video x1"]'
    from = {prompt_tokens = 167, item_tokens = [136]}
    to = {prompt_tokens = 105, item_tokens = [72]}
    reason = "0.32 sizes video frames by the example's min/max_pixels; reviewed in PR 123"

An accepted change is listed under "accepted" with its reason and no longer decides the verdict;
one that moves further (another `to`) is a change again. `vlcheck diff --draft-accepted FILE`
writes every change of a diff in this form, each with an empty reason to fill in: an entry
without a reason is refused.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass
from typing import Any

from vlcheck.gate.diff import Change, ReportError

FIELDS = ("family", "check", "fact", "from", "to", "reason")


@dataclass(frozen=True)
class Accepted:
    family: str
    check: str
    fact: str
    old: Any
    new: Any
    reason: str

    def matches(self, change: Change) -> bool:
        return ((self.family, self.check, self.fact) == (change.family, change.check, change.fact)
                and _same(self.old, change.old) and _same(self.new, change.new))

    def describe(self) -> str:
        return f"{self.family} {self.check}: {self.fact}: {json.dumps(self.old)[:120]} -> {json.dumps(self.new)[:120]}"


def _same(a: Any, b: Any) -> bool:
    return json.loads(json.dumps(a)) == json.loads(json.dumps(b))


def load(path: str) -> list[Accepted]:
    """The entries of an accepted-changes file; ReportError names the file, entry and field."""
    try:
        with open(path, "rb") as f:
            doc = tomllib.load(f)
    except OSError as err:
        raise ReportError(f"{path}: cannot read it: {err.strerror or err}") from None
    except tomllib.TOMLDecodeError as err:
        raise ReportError(f"{path}: not valid TOML: {err}") from None
    unknown = sorted(set(doc) - {"accepted"})
    if unknown:
        raise ReportError(f"{path}: unknown table {', '.join(unknown)} (entries go in [[accepted]])")
    entries = doc.get("accepted", [])
    if not isinstance(entries, list):
        raise ReportError(f"{path}: accepted: expected [[accepted]] entries")
    out = []
    for i, entry in enumerate(entries, 1):
        where = f"{path}: accepted entry {i}"
        missing = [k for k in FIELDS if k not in entry]
        if missing:
            raise ReportError(f"{where}: missing {', '.join(missing)} (an entry names {', '.join(FIELDS)})")
        extra = sorted(set(entry) - set(FIELDS))
        if extra:
            raise ReportError(f"{where}: unknown key {', '.join(extra)} (an entry names {', '.join(FIELDS)})")
        if not isinstance(entry["reason"], str) or not entry["reason"].strip():
            raise ReportError(f"{where} ({entry['family']} {entry['check']} {entry['fact']}): reason is empty: "
                              "say why the change is right")
        out.append(Accepted(entry["family"], entry["check"], entry["fact"], entry["from"], entry["to"],
                            entry["reason"].strip()))
    return out


def draft(changes: list[Change]) -> str:
    """A file accepting `changes`, each with an empty reason for the reviewer to fill in."""
    blocks = ["# Accepted changes (vlcheck diff --accepted FILE). Fill in each reason after reviewing the change;",
              "# delete the entries you do not accept. Values that are not known (null) cannot be accepted."]
    for c in changes:
        if c.old is None or c.new is None:
            continue
        blocks.append("\n".join(["", "[[accepted]]", f"family = {_toml(c.family)}", f"check = {_toml(c.check)}",
                                 f"fact = {_toml(c.fact)}", f"from = {_toml(c.old)}", f"to = {_toml(c.new)}",
                                 'reason = ""']))
    return "\n".join(blocks) + "\n"


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return json.dumps(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # a JSON string is a TOML basic string
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(str(k), ensure_ascii=False)} = {_toml(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"cannot write {value!r} as TOML")
