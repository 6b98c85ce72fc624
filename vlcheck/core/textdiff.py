"""Readable differences between two prompts: where they first differ, and a line diff."""

from __future__ import annotations

import difflib
import json


def first_difference(expected: str, actual: str) -> int | None:
    """Index of the first differing character, or None when equal."""
    if expected == actual:
        return None
    for i, (a, b) in enumerate(zip(expected, actual)):
        if a != b:
            return i
    return min(len(expected), len(actual))


def _show(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)[1:-1]


def describe_difference(expected: str, actual: str, expected_name="expected", actual_name="actual",
                        context: int = 24) -> str:
    """Where two strings first differ, with a caret under that character, then a line diff.
    Strings are shown with JSON escapes so that whitespace changes are visible."""
    at = first_difference(expected, actual)
    if at is None:
        return "equal"
    start = max(0, at - context)
    width = max(len(expected_name), len(actual_name))
    a = _show(expected[start:at + context])
    b = _show(actual[start:at + context])
    caret = len(_show(expected[start:at]))
    lines = [
        f"first difference at character {at} "
        f"({expected_name} has {_char(expected, at)}, {actual_name} has {_char(actual, at)}):",
        f"  {expected_name:>{width}}: …{a}…",
        f"  {actual_name:>{width}}: …{b}…",
        f"  {'':>{width}}   {' ' * caret}^",
    ]
    diff = difflib.unified_diff(expected.splitlines(keepends=True), actual.splitlines(keepends=True),
                                expected_name, actual_name, lineterm="")
    lines += [_show(line) for line in diff]
    return "\n".join(lines)


def _char(text: str, i: int) -> str:
    return json.dumps(text[i], ensure_ascii=False) if i < len(text) else "the end"


TODAY_MARK = "⟦today⟧"


def without_today(text: str) -> str:
    """Today's date, which some chat templates write (`strftime_now`), as TODAY_MARK: snapshots
    and facts must not move with the calendar."""
    import datetime

    today = datetime.date.today()
    for form in ("%Y-%m-%d", "%d %b %Y", "%d %B %Y", "%B %d, %Y"):
        text = text.replace(today.strftime(form), TODAY_MARK)
    return text
