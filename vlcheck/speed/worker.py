"""One environment's side of an A/B run: a process of that environment's vlcheck that times the
family-configs it is asked for, a round at a time, over stdin and stdout (JSON lines), so that the
two environments alternate round by round without importing vLLM again.

    -> {"family": "qwen2_vl", "variant": "single", "repeats": 5}
    <- {"family": "qwen2_vl", "variant": "single", "timings": {"processor": [s, ...], ...}}
    <- {"family": ..., "variant": ..., "skip": "why"}

Its first line says what it is: versions, the code's digests and the machine.
"""

from __future__ import annotations

import json
import sys

from vlcheck.speed.measure import NotMeasurable, measure, prepare


def hello() -> dict:
    """Which code answers, by content (the packages' digests, as a report's environment records them),
    not only by version, and on which machine."""
    from vlcheck.core.devices import machine
    from vlcheck.core.installed_code import digests
    from vlcheck.core.versions import installed, vllm_build

    return {"versions": installed(), "vllm_build": vllm_build(), "code": digests(), "machine": machine()}


def serve(stdin=sys.stdin, stdout=sys.stdout, served: bool = False) -> int:
    """`served`: each family-config's render server is started and timed too (`measure.prepare`)."""
    from vlcheck.spec.registry import all_families

    families = all_families()
    prepared: dict[tuple[str, str], object] = {}

    def say(obj: dict) -> None:
        stdout.write(json.dumps(obj) + "\n")
        stdout.flush()

    say(hello())
    for line in stdin:
        ask = json.loads(line)
        key = (ask["family"], ask["variant"])
        spec = families.get(key[0])
        variant = next((v for v in spec.variants if v.kind == key[1]), None) if spec else None
        if variant is None:
            say({"family": key[0], "variant": key[1], "skip": "no such family-config in this environment's vlcheck"})
            continue
        if key not in prepared:
            try:
                prepared[key] = prepare(spec, variant, served)
            except NotMeasurable as err:
                prepared[key] = str(err)  # asked again each round: said again, not tried again
        if isinstance(prepared[key], str):
            say({"family": key[0], "variant": key[1], "skip": prepared[key]})
        else:
            say({"family": key[0], "variant": key[1], "timings": measure(prepared[key], ask["repeats"]),
                 "not_timed": prepared[key].not_timed})
    return 0
