"""What code each end of a diff ran on: the packages' code by content (`core.installed_code`), so
that two reports of the same versions and other code (a patched or editable vLLM, a nightly, a
directory first on PYTHONPATH) are never read as the same environment, and two of the same code are
said to be."""

from __future__ import annotations

from vlcheck.core.installed_code import from_json
from vlcheck.core.versions import GATED


def _code(env: dict) -> dict:
    return env.get("code") or {}


def code_lines(old_env: dict, new_env: dict) -> list[str]:
    """One line per package whose code differs under the same version, and one naming the gated
    packages whose code is the same on both ends; what a report does not record, said so."""
    old, new = _code(old_env), _code(new_env)
    missing = [end for end, code in (("baseline", old), ("candidate", new)) if not code]
    if missing:
        return [f"the {' and '.join(missing)} report records no code digests (an older vlcheck): the same version "
                "there may be other code"]
    lines, same = [], []
    for package in [*GATED, *sorted(set(old) & set(new) - set(GATED))]:
        if package not in old or package not in new:
            continue
        a, b = from_json(old[package]), from_json(new[package])
        if a.digest == b.digest:
            same += [package] if package in GATED else []
        elif a.version == b.version:
            lines.append(f"{package} {a.version or '(absent)'}: the same version, other code: baseline {a.line()}; "
                         f"candidate {b.line()}")
    if same:
        lines.append(f"the same code on both ends: {', '.join(same)}")
    return lines


def not_its_release(env: dict) -> list[str]:
    """The packages of one report that do not run their release's files: edited since install, an
    editable source tree, or shadowed by another copy."""
    out = []
    for package, entry in _code(env).items():
        ident = from_json(entry)
        if ident.install in ("editable", "not its distribution's", "no distribution") or ident.changed_count:
            out.append(ident.line())
    return out


def mixed_runs(old_env: dict, new_env: dict) -> list[str]:
    """Reports whose run saw a package's code change while it measured: their cells are of two codes."""
    return [f"the {end} report's run saw the code of {', '.join(env['code_changed_during_run'])} change on disk while "
            "it measured: its cells mix two codes; run it again" for end, env in (("baseline", old_env),
                                                                                  ("candidate", new_env))
            if env.get("code_changed_during_run")]
