"""Snapshot storage and the readable text documents stored in it.

Snapshots live in the package, `vlcheck/snapshots/<test file>/<family>.txt` (so an installed vlcheck
holds the goldens and references it is checked against), one plain-text file per
family and check, so a reviewer reads a prompt change as a line diff. Prompts are written as JSON
string literals: every newline, tab and trailing space is visible and nothing is ambiguous.
"""

from __future__ import annotations

import json
from pathlib import Path

from vlcheck.prompt.render import NUM_PROMPTS, default_questions, messages, render_prompt, request_prompts
from vlcheck.spec.schema import FamilySpec, Variant

SNAPSHOT_ROOT = Path(__file__).resolve().parents[1] / "snapshots"
"""The snapshots, goldens and references shipped with this vlcheck (syrupy's storage of them:
`snapshot_files.FamilySnapshot`)."""


def quote(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _header(spec: FamilySpec, what: str) -> list[str]:
    return [f"# {what}: {spec.name} ({spec.title})", f"# spec: vlcheck/families/{Path(spec.path).name}",
            "# Strings are JSON literals: escapes show every newline and space.", ""]


def variant_sections(spec: FamilySpec, variant: Variant):
    """(modality, item count, questions) of every request shape the example can make."""
    for modality in variant.modalities:
        for count in variant.item_counts():
            yield modality, count, default_questions(variant, modality, count)


def section_title(variant: Variant, modality: str, count: int) -> str:
    items = f"{count} item" + ("s" if count > 1 else "")
    source = f"seed {variant.source.seed}:{variant.source.function}" if variant.source else "own model"
    return f"[{variant.kind} · {source} · {modality} · {items}]"


def prompt_document(spec: FamilySpec) -> str:
    """Every prompt the family's examples write by hand, and the messages of those that the
    model's chat template renders, with the request order of both prompt modes."""
    lines = _header(spec, "prompts")
    for variant in spec.variants:
        for modality, count, questions in variant_sections(spec, variant):
            lines.append(section_title(variant, modality, count))
            if variant.prompt.template is not None:
                for n, q in enumerate(questions, 1):
                    lines.append(f"prompt {n}: {quote(render_prompt(spec, variant, modality, q, count))}")
            else:
                lines.append(f"rendered by the {variant.prompt.chat_template} chat template of {variant.model}"
                             + (" (the example's own template)" if variant.prompt.explicit_chat_template else ""))
                for n, q in enumerate(questions, 1):
                    lines.append(f"messages {n}: {json.dumps(messages(variant, modality, q, count), ensure_ascii=False)}")
            numbers = list(range(1, len(questions) + 1))
            lines.append(f"requests of --num-prompts {NUM_PROMPTS}, same prompt: "
                         f"{request_prompts(numbers, NUM_PROMPTS, False)}")
            lines.append(f"requests of --num-prompts {NUM_PROMPTS}, different prompt per request: "
                         f"{request_prompts(numbers, NUM_PROMPTS, True)}")
            lines.append("")
    return "\n".join(lines)

