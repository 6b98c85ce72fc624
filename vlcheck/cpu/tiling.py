"""Images that tile: sizes past every family's tile, any-res grid, pan-and-scan and dynamic-resolution
bounds, through vLLM's processor as an engine runs it (processor cache off; on, first and hit) and
through transformers' processor on the same prompt.

The engine images of the other checks are at most 333x197 px: no family tiles them. Bugs of this
class live where the grid is computed twice: once when the processor expands the prompt, once again
(by vLLM's own code, from the cached item) when the processor cache serves the item; or once in
transformers and once in vLLM's port. So every path must give the same tokens and placements.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from vlcheck.core import media
from vlcheck.core.textdiff import first_difference
from vlcheck.core.results import CheckResult, Status, from_exception, raised_by
from vlcheck.spec.schema import FamilySpec, Variant

TILING_SIZES: dict[str, tuple[int, int]] = {
    # 3:1 at 1536 px is past every family's base tile (224-896 px): llava-next's 1008x336 pinpoint,
    # InternVL's 3x1 tiles, Idefics3's image splitting, Gemma 3's pan-and-scan crops (where the example
    # turns it on), MiniCPM-V's slices, Phi-3-vision's HD crops, Qwen-VL's dynamic resolution.
    "wide": (1536, 512),
    # the same transposed: code that swaps width and height computes the wide grid for it.
    "tall": (512, 1536),
    # below Qwen-VL's min_pixels (3136) and every base tile: the bound that scales an image up.
    "small": (60, 40),
}
"""The sizes every family's image requests are sent at; a multi-image request sends them together."""

FIRST_INDEX = 7000
"""Image contents of this check's items (`core.media.image(index)`): apart from every other check's."""


@dataclass(frozen=True)
class TilingRequest:
    """One prompt and its images at tiling sizes."""

    label: str
    """`wide 1536x512`, or the sizes of a multi-image request joined by ` + `."""

    prompt: str
    images: list[Any]

    @property
    def mm_data(self) -> dict[str, Any]:
        return {"image": self.images[0] if len(self.images) == 1 else list(self.images)}


def size_label(name: str) -> str:
    width, height = TILING_SIZES[name]
    return f"{name} {width}x{height}"


def tiling_requests(spec: FamilySpec, variant: Variant) -> list[TilingRequest]:
    """A single-image variant: one request per size. A multi-image one: one request with as many of
    the sizes as the example sends images (every item tiled differently in one prompt)."""
    from vlcheck.prompt.render import default_questions
    from vlcheck.prompt.requests import example_prompt

    question = default_questions(variant, "image")[0]
    names = list(TILING_SIZES)
    if (variant.max_images or 1) > 1:
        names = names[:variant.max_images]
        prompt = example_prompt(spec, variant, "image", question, len(names))
        images = [media.image(FIRST_INDEX + i, TILING_SIZES[n]) for i, n in enumerate(names)]
        return [TilingRequest(" + ".join(size_label(n) for n in names), prompt, images)]
    prompt = example_prompt(spec, variant, "image", question, 1)
    return [TilingRequest(size_label(n), prompt, [media.image(FIRST_INDEX + i, TILING_SIZES[n])])
            for i, n in enumerate(names)]


@dataclass
class Paths:
    """One request through every path: what each gave, and whether they agree."""

    request: TilingRequest
    uncached: dict[str, Any]
    first: dict[str, Any]
    hit: dict[str, Any]
    hits: int | None
    """Items the processor cache served on the second pass (its own counter); None where the
    installed vLLM's cache has no counter."""
    transformers: list[int] | str
    """transformers' processor's input ids for the same prompt and images, or why they were not compared."""

    def problems(self, family: str) -> list[str]:
        found = []
        for name, out in (("cache on, first", self.first), ("cache on, served from the cache", self.hit)):
            if out["prompt_token_ids"] != self.uncached["prompt_token_ids"]:
                found.append(f"{family}: {self.request.label}: {name}: {len(out['prompt_token_ids'])} prompt tokens, "
                             f"cache off: {len(self.uncached['prompt_token_ids'])}"
                             f"{_first_difference(out['prompt_token_ids'], self.uncached['prompt_token_ids'])}")
            elif out["placeholders"] != self.uncached["placeholders"]:
                found.append(f"{family}: {self.request.label}: {name}: placeholders {out['placeholders']['image']}, "
                             f"cache off: {self.uncached['placeholders']['image']}")
        if self.hits is not None and self.hits < len(self.request.images):
            found.append(f"{family}: {self.request.label}: the processor cache served {self.hits} of "
                         f"{len(self.request.images)} image(s) on the resend: the cached path did not run")
        ours = self.uncached["prompt_token_ids"]
        if isinstance(self.transformers, list) and self.transformers != ours:
            found.append(f"{family}: {self.request.label}: vLLM's processor {len(ours)} prompt tokens, transformers' "
                         f"{len(self.transformers)}{_first_difference(ours, self.transformers)}")
        ranges = self.uncached["placeholders"].get("image", [])
        if len(ranges) != len(self.request.images):
            found.append(f"{family}: {self.request.label}: {len(ranges)} placeholder range(s) for "
                         f"{len(self.request.images)} image(s)")
        return found

    def line(self) -> str:
        ranges = self.uncached["placeholders"].get("image", [])
        alike = all(out[k] == self.uncached[k] for out in (self.first, self.hit)
                    for k in ("prompt_token_ids", "placeholders"))
        cached = (("cache on: same" if alike else "cache on: differs") +
                  (f", {self.hits} served from the cache" if self.hits is not None else ", no hit counter"))
        theirs = (f"transformers: not compared ({self.transformers})" if isinstance(self.transformers, str) else
                  "transformers: same" if self.transformers == self.uncached["prompt_token_ids"] else
                  f"transformers: {len(self.transformers)} prompt tokens")
        return (f"image {self.request.label}: {len(self.uncached['prompt_token_ids'])} prompt tokens, items at "
                f"{[offset for offset, _ in ranges]} of {[length for _, length in ranges]} tokens; {cached}; {theirs}")


def _first_difference(a: list[int], b: list[int]) -> str:
    return f" (first difference at token {first_difference(a, b)})"


def run_paths(request: TilingRequest, uncached, cached, hf) -> Paths:
    """`uncached`/`cached`: `adapter.Processor`s without and with the processor cache; `hf`:
    `transformers_ids`' function."""
    from vlcheck import adapter

    plain = adapter.apply_processor(uncached, request.prompt, request.mm_data)
    cached.clear_cache()
    first = adapter.apply_processor(cached, request.prompt, request.mm_data)
    before = cached.cache_hits()
    hit = adapter.apply_processor(cached, request.prompt, request.mm_data)
    after = cached.cache_hits()
    hits = None if before is None or after is None else after - before
    return Paths(request, plain, first, hit, hits, hf(request))


def transformers_ids(local: str, spec: FamilySpec, variant: Variant):
    """A function of a request giving transformers' input ids for it, or why they cannot be had. The
    reference is the checkpoint's own processor (its remote code where the example trusts it): where
    that fails, the comparison is not made and says why; it never fails the check, which is vLLM's."""
    from vlcheck.adapter import numerics

    try:
        processor = numerics.hf_processor(local, spec.synthetic.processor_class,
                                          trust_remote_code=bool(variant.engine_args.get("trust_remote_code")))
    except Exception as err:  # noqa: BLE001 - see the docstring
        return _not_compared(f"its processor does not load here: {_head(err)}")
    if not hasattr(processor, "image_processor"):
        return _not_compared(f"{type(processor).__name__} has no image processor")
    kwargs = dict(variant.engine_args.get("mm_processor_kwargs") or {})

    def ids(request: TilingRequest) -> list[int] | str:
        try:
            out = numerics.hf_inputs(processor, request.prompt, "image", request.images, kwargs)
            return out["input_ids"][0].tolist()
        except Exception as err:  # noqa: BLE001 - see the docstring
            return f"{type(processor).__name__} raised {_head(err)}"

    return ids


def control_request(spec: FamilySpec, variant: Variant) -> TilingRequest:
    """The example's own image(s) at the sizes the other checks send, in the same prompt form."""
    from vlcheck.prompt.render import default_questions
    from vlcheck.prompt.requests import example_prompt

    count = min(variant.max_images or 1, len(TILING_SIZES))
    images = [media.image(FIRST_INDEX + 100 + i) for i in range(count)]
    return TilingRequest("the example's own size", example_prompt(spec, variant, "image",
                                                                  default_questions(variant, "image")[0], count), images)


def with_control(hf, control: TilingRequest, uncached):
    """transformers compared at the tiling sizes only where it agrees with vLLM at the example's own
    image size: a family whose two processors differ there (one expands the placeholder and the other
    does not, or a prompt format of its own) differs at every size, and that is not tiling's finding."""
    from vlcheck import adapter

    theirs = hf(control)
    if isinstance(theirs, str):
        return _not_compared(theirs)
    try:
        ours = adapter.apply_processor(uncached, control.prompt, control.mm_data)["prompt_token_ids"]
    except Exception as err:  # noqa: BLE001 - vLLM refusing the example's image: each request says so below
        if raised_by(err) == "vlcheck":
            raise
        return _not_compared(f"vLLM's processor refused the example's own image: {_head(err)}")
    if theirs != ours:
        return _not_compared(f"at the example's own image size too: transformers {len(theirs)} prompt tokens, "
                             f"vLLM {len(ours)}{_first_difference(ours, theirs)}")
    return hf


def _not_compared(why: str):
    return lambda request: why


_PATH = re.compile(r"(?<![\w:/])(?:/[\w.+@-]+){2,}/?")


def _head(err: BaseException) -> str:
    """The exception's first line, its file paths written `<path>`: a snapshot holds it, and the
    checkpoint cache and the HF cache lie elsewhere on every machine."""
    text = _PATH.sub("<path>", str(err).splitlines()[0])[:160] if str(err) else ""
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def tiling_check(spec: FamilySpec, variant: Variant) -> CheckResult:
    """The catalogue's `tiling` check: fact `<variant>.tiling`, one line per request; fails where a path
    gives other tokens or placements than vLLM's processor with its cache off."""
    from vlcheck import adapter
    from vlcheck.checkpoints.folders import model_files
    from vlcheck.checkpoints.synthetic import NotBuildable
    from vlcheck.prompt.conformance import template_unavailable
    from vlcheck.prompt.templates import TemplateUnavailable

    where = f"[{variant.kind}]"
    if "image" not in variant.modalities:
        return CheckResult(spec.name, "tiling", Status.SKIP, f"{where} {spec.name} takes no images here")
    try:
        local = str(model_files(spec, variant))
    except NotBuildable as err:
        return CheckResult(spec.name, "tiling", Status.SKIP, f"{where} no checkpoint: {err}")
    try:
        requests = tiling_requests(spec, variant)
    except TemplateUnavailable as err:
        return template_unavailable(spec, "tiling", variant, err)
    args = variant.engine_args_for("image", variant.max_images or 1)
    try:
        uncached = adapter.create_processor(local, args)
        cached = adapter.create_processor(local, args, cached=True)
    except ImportError as err:
        return CheckResult(spec.name, "tiling", Status.SKIP,
                           f"{where} {spec.name}: its processor needs a package that is not installed: {err}")
    except Exception as err:  # noqa: BLE001 - vLLM failing to build its processor fails; vlcheck's crash is an error
        return from_exception(spec.name, "tiling", err, where)
    hf = with_control(transformers_ids(local, spec, variant), control_request(spec, variant), uncached)
    lines, problems = [], []
    for request in requests:
        try:
            paths = run_paths(request, uncached, cached, hf)
        except Exception as err:  # noqa: BLE001 - a size vLLM or transformers refuses is a finding, named
            if raised_by(err) == "vlcheck":
                return from_exception(spec.name, "tiling", err, where)
            head = _head(err)
            lines.append(f"image {request.label}: refused: {head}")
            problems.append(f"{spec.name}: {request.label}: {head}")
            continue
        lines.append(paths.line())
        problems += paths.problems(spec.name)
    data = {f"{variant.kind}.tiling": lines}
    if problems:
        return CheckResult(spec.name, "tiling", Status.FAIL, f"{where} {problems[0]}", details=problems, data=data)
    return CheckResult(spec.name, "tiling", Status.PASS,
                       f"{where} {len(requests)} tiling request(s): every path the same", data=data)
