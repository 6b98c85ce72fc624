"""Plant a known defect in the installed vLLM, to show which tests catch it; then undo it.

    vlcheck plant projector             # every family's projector output x 1.01
    vlcheck plant projector:gemma3      # one family's
    vlcheck plant compiled-only         # Qwen2's decoder layers x 1.01 under torch.compile only
    vlcheck plant graphs-drop-media     # image prefills replayed by a CUDA graph lose their image
    vlcheck plant slow-processor:qwen2_vl  # one family's multimodal processing 30% slower
    vlcheck plant slow-render:qwen2_vl  # one family's chat rendering 30% slower
    vlcheck plant lora-skips-language-model:llava  # one wrapper's adapters never reach its language model
    vlcheck plant quant-ignore-unmapped:llava  # one wrapper's quantized checkpoint: its ignore list not renamed
    vlcheck plant video-frames:qwen2_vl  # one video loader takes the frame after each it should
    vlcheck plant image-size-swapped    # vLLM's own reading of an image's size gives (height, width)
    vlcheck plant merge-size-confused   # Qwen2-VL's prompt updates read temporal_patch_size for merge_size
    vlcheck plant mrope-merge-confused  # Qwen2-VL's M-RoPE grid reads temporal_patch_size for merge_size
    vlcheck plant --undo                # restore every planted file
    vlcheck plant --list

A test suite's claim to catch a regression is measured, not assumed: plant, run the tier, read
which tests failed, undo. Each plant edits one line of vLLM's source (the original is kept beside
it as `<file>.vlcheck-orig`) and fails, naming the file and line, where the installed vLLM no
longer has that line: the plants are written against vLLM 0.24.0 (the reference).
- `projector:<family>`: the vision features x 1.01 after the family's projector (qwen2_vl's and
  qwen2_5_vl's merger, llava's and gemma3's multi_modal_projector, idefics3's connector): the size
  of change a release that touches a projector makes, which the goldens must not let through.
- `compiled-only`: Qwen2's decoder layer output x 1.01 where torch.compile traces it
  (`torch.compiler.is_compiling()`), so an eager engine never runs it: only the `compiled`
  configuration can catch it (qwen2_vl, qwen2_5_vl, llava-onevision: Qwen2 language models).
- `graphs-drop-media`: in vLLM's model runner, a step that a CUDA graph replays and that carries
  encoder inputs (an image prefill) gets its input embeddings made from the token ids alone, so the
  image's embeddings are dropped: the class of "a model runner whose CUDA graphs dropped image
  embeddings". Eager engines never replay a graph: only `defaults` (and `compiled`) can catch it.
- `slow-processor:<family>`: vLLM's multimodal processor, for the family's model type only, sleeps
  30% of the time its HF-processor step took (cache hit or miss): the class of "a release made one
  family's preprocessing slower", which only `vlcheck speed ab` can catch.
- `slow-render:<family>`: vLLM's chat renderer (the messages parsed, their media decoded, the chat
  template applied), for the family's model type only, sleeps 30% of the time it took: "a release
  made one family's chat rendering slower", caught by `speed ab`'s `chat_render` metric.
- `lora-skips-language-model:<family>`: vLLM's LoRA manager, for the family's architecture only,
  loads no adapter weights into the language model's layers when it activates an adapter: the
  class of "a text LoRA that silently does nothing on a wrapper VLM". Only `lora` can catch it.
- `quant-ignore-unmapped:<family>`: where vLLM maps a quantized checkpoint's config onto its own
  module names (the model's `hf_to_vllm_mapper`), the family's architecture is skipped, so the
  checkpoint's ignore list keeps transformers' names and its vision tower and projector are taken
  for quantized layers: the class of "a wrapper model's quantized checkpoint broken by its weight-name
  mapping". Only the `quant_*` configurations load a quantized checkpoint: only they can catch it.
- `video-frames:<loader>`: vLLM's video loader registered as `<loader>` (opencv, qwen2_vl, qwen3_vl,
  opencv_dynamic, ...; `vllm.multimodal.video`) takes the frame after each one its sampling picks, with
  every codec, labelled as taken: the class of "a loader's frame selection off by one". Its subclasses
  keep theirs. `video_loaders` catches it on every family-config whose loader it is.
- `image-size-swapped`: vLLM's `ImageProcessorItems.get_image_size` gives a PIL image's size as
  (height, width): the class of "a grid computed with width and height swapped", which only non-square
  images that tile show. vLLM's own prompt updates read it (the cached path, the families whose
  placeholders vLLM expands itself): `tiling` catches it at its wide and tall sizes.
- `merge-size-confused`: Qwen2-VL's multimodal processor counts an item's tokens with
  `temporal_patch_size` where `merge_size` belongs: the class of "code that reads one config field for
  another", which every checkpoint with both at their default 2 hides. Only `confusable` can catch it.
- `mrope-merge-confused`: Qwen2-VL's model computes each image's and video's M-RoPE grid with
  `temporal_patch_size` where `spatial_merge_size` belongs: the same class on the engine's path (the
  prompt's token counts stay right, its positions do not). Only `confusable_build` can catch it.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

ORIG = ".vlcheck-orig"
PROJECTOR = {
    "qwen2_vl": ("qwen2_vl.py", ["        x = self.merger(x)\n"]),
    "qwen2_5_vl": ("qwen2_5_vl.py", ["        hidden_states = self.merger(hidden_states)\n"]),
    "llava": ("llava.py", ["            return self.multi_modal_projector(image_features)\n",
                           "        image_embeds = self.multi_modal_projector(torch.cat(image_features))\n"]),
    "gemma3": ("gemma3_mm.py", ["        image_embeds = self.multi_modal_projector(image_features)\n"]),
    "idefics3": ("idefics3.py", ["        image_features = self.model.connector(image_features)\n"]),
}
COMPILED_ONLY = ("qwen2.py", "        hidden_states = self.mlp(hidden_states)\n        return hidden_states, residual\n",
                 "        hidden_states = self.mlp(hidden_states)\n"
                 "        if torch.compiler.is_compiling():  # vlcheck plant: compiled only\n"
                 "            hidden_states = hidden_states * 1.01\n"
                 "        return hidden_states, residual\n")


RUNNER = ("v1/worker/gpu_model_runner.py",
          "            ) = self._preprocess(\n"
          "                scheduler_output, num_tokens_padded, intermediate_tensors\n"
          "            )\n",
          "            ) = self._preprocess(\n"
          "                scheduler_output, num_tokens_padded, intermediate_tensors\n"
          "            )\n"
          "            if (cudagraph_mode != CUDAGraphMode.NONE and scheduler_output.scheduled_encoder_inputs\n"
          "                    and inputs_embeds is not None):  # vlcheck plant: graphs drop media\n"
          "                inputs_embeds[:num_tokens_unpadded] = self.model.embed_input_ids(\n"
          "                    self.input_ids.gpu[:num_tokens_unpadded])\n")
"""(file under vllm/, the lines there, the lines planted)."""

SLOW_PROCESSOR = ("multimodal/processing/processor.py",
                  "        (\n"
                  "            prompt_ids,\n"
                  "            mm_info,\n"
                  "            is_update_applied,\n"
                  "        ) = self._cached_apply_hf_processor(inputs, timing_ctx)\n",
                  "        _planted_start = __import__(\"time\").perf_counter()  # vlcheck plant: slow processor\n"
                  "        (\n"
                  "            prompt_ids,\n"
                  "            mm_info,\n"
                  "            is_update_applied,\n"
                  "        ) = self._cached_apply_hf_processor(inputs, timing_ctx)\n"
                  "        if self.info.ctx.model_config.hf_config.model_type == {model_type!r}:\n"
                  "            __import__(\"time\").sleep({slowdown} * (__import__(\"time\").perf_counter() - _planted_start))\n")
SLOWDOWN = 0.3
SLOW_RENDER = ("renderers/hf.py", [
    ("        model_config = self.model_config\n        tokenizer = self.get_tokenizer()\n",
     "        _planted_start = __import__(\"time\").perf_counter()  # vlcheck plant: slow render\n"
     "        model_config = self.model_config\n        tokenizer = self.get_tokenizer()\n"),
    ("        return conversation, prompt\n",
     "        if model_config.hf_config.model_type == {model_type!r}:  # vlcheck plant: slow render\n"
     "            __import__(\"time\").sleep({slowdown} * (__import__(\"time\").perf_counter() - _planted_start))\n"
     "        return conversation, prompt\n")])
"""vLLM's chat renderer (`render_messages` and its async twin, what the render server and `vllm serve`
run for a chat request: parsing the messages and their media, the chat template), for one model type."""
LORA_SKIP = ("lora/model_manager.py",
             "            module_lora = self._get_lora_layer_weights(lora_model, module_name)\n",
             "            module_lora = self._get_lora_layer_weights(lora_model, module_name)\n"
             "            if type(self.model).__name__ == {architecture!r} and \"language_model\" in module_name:"
             "  # vlcheck plant: lora skips the language model\n"
             "                module_lora = None\n")

QUANT_IGNORE_UNMAPPED = [
    ("model_executor/model_loader/utils.py", "        if hf_to_vllm_mapper is not None:\n",
     "        if hf_to_vllm_mapper is not None and model_class.__name__ != {architecture!r}:"
     "  # vlcheck plant: quant ignore unmapped\n"),
    ("model_executor/models/interfaces.py", "        if (hf_to_vllm_mapper := self.hf_to_vllm_mapper) is not None:\n",
     "        if (hf_to_vllm_mapper := self.hf_to_vllm_mapper) is not None and type(self).__name__ != {architecture!r}:"
     "  # vlcheck plant: quant ignore unmapped\n"),
]
"""The two places vLLM 0.24.0 maps a quantization config onto a model's names (models without and
with `SupportsQuant`)."""

VIDEO_FRAMES = ("multimodal/video.py", [
    (indent + "frame_idx = cls.compute_frames_index_to_sample(\n" + indent + "    source=source, target=target, **kwargs\n"
     + indent + ")\n",
     indent + "frame_idx = cls.compute_frames_index_to_sample(\n" + indent + "    source=source, target=target, **kwargs\n"
     + indent + ")\n" + indent + "if cls is VIDEO_LOADER_REGISTRY.name2class.get({loader!r}):  # vlcheck plant: video frames\n"
     + indent + "    frame_idx = [min(i + 1, source.total_frames_num - 1) for i in frame_idx]\n")
    for indent in (" " * 12, " " * 16)])
"""vLLM 0.24.0's generic loader, where every registered loader's sampling is called (its opencv and
pyav codecs' branches)."""


IMAGE_SIZE_SWAPPED = ("multimodal/parse.py", "            return ImageSize(*image.size)\n",
                      "            return ImageSize(*image.size[::-1])  # vlcheck plant: image size swapped\n")


MERGE_SIZE_CONFUSED = ("qwen2_vl.py", "        merge_length = image_processor.merge_size**2\n",
                       "        merge_length = image_processor.temporal_patch_size**2  # vlcheck plant: merge size confused\n")
MROPE_MERGE_CONFUSED = ("qwen2_vl.py", "        spatial_merge_size = self.config.vision_config.spatial_merge_size\n",
                        "        spatial_merge_size = self.config.vision_config.temporal_patch_size  # vlcheck plant: M-RoPE grid\n")
ONE_LINE = {"merge-size-confused": MERGE_SIZE_CONFUSED, "mrope-merge-confused": MROPE_MERGE_CONFUSED,
            "compiled-only": COMPILED_ONLY}
"""The plants that edit one line of a model file (`models/`)."""


class PlantError(RuntimeError):
    """The plant cannot be made here: the message names the file and line, or the unknown plant."""


def models_dir() -> Path:
    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        raise PlantError("vllm is not installed in this Python")
    return Path(list(spec.submodule_search_locations)[0]) / "model_executor" / "models"


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    if old not in text:
        raise PlantError(f"{path}: the line to plant in is not there ({old.strip()!r}): written against vLLM 0.24.0")
    backup = path.with_name(path.name + ORIG)
    if not backup.exists():
        backup.write_text(text)
    path.write_text(text.replace(old, new))
    print(f"planted in {path}: {new.strip()!r}")


def plant(name: str, models: Path) -> None:
    if name == "graphs-drop-media":
        file, old, new = RUNNER
        edit(models.parent.parent / file, old, new)
        return
    if name.startswith("slow-processor:"):
        file, old, new = SLOW_PROCESSOR
        new = new.format(model_type=model_type_of(name.partition(":")[2]), slowdown=SLOWDOWN)
        edit(models.parent.parent / file, old, new)
        return
    if name.startswith("slow-render:"):
        file, lines = SLOW_RENDER
        model_type = model_type_of(name.partition(":")[2])
        for old_line, new_line in lines:
            edit(models.parent.parent / file, old_line, new_line.format(model_type=model_type, slowdown=SLOWDOWN))
        return
    if name.startswith("lora-skips-language-model:"):
        file, old, new = LORA_SKIP
        edit(models.parent.parent / file, old, new.format(architecture=architecture_of(name.partition(":")[2])))
        return
    if name.startswith("quant-ignore-unmapped:"):
        architecture = architecture_of(name.partition(":")[2])
        for file, old, new in QUANT_IGNORE_UNMAPPED:
            edit(models.parent.parent / file, old, new.format(architecture=architecture))
        return
    if name.startswith("video-frames:"):
        file, lines = VIDEO_FRAMES
        loader = name.partition(":")[2]
        for old_line, new_line in lines:
            edit(models.parent.parent / file, old_line, new_line.format(loader=loader))
        return
    if name == "image-size-swapped":
        file, old, new = IMAGE_SIZE_SWAPPED
        edit(models.parent.parent / file, old, new)
        return
    if name in ONE_LINE:
        file, old, new = ONE_LINE[name]
        edit(models / file, old, new)
        return
    kind, _, family = name.partition(":")
    if kind != "projector" or (family and family not in PROJECTOR):
        raise PlantError(f"unknown plant {name!r}: `vlcheck plant --list` names them")
    for fam in [family] if family else list(PROJECTOR):
        file, lines = PROJECTOR[fam]
        for line in lines:
            edit(models / file, line, line.rstrip("\n") + " * 1.01  # vlcheck plant: projector 1%\n")


def model_type_of(family: str) -> str:
    """The config's model_type vLLM sees for a family's synthetic checkpoint."""
    from vlcheck.spec.registry import all_families

    spec = all_families().get(family)
    if spec is None or spec.synthetic is None or not spec.synthetic.model_type:
        raise PlantError(f"{family}: no such family with a synthetic checkpoint (`vlcheck list`)")
    return spec.synthetic.model_type


def architecture_of(family: str) -> str:
    """The architecture vLLM builds for a family (its first example's)."""
    from vlcheck.spec.registry import all_families

    spec = all_families().get(family)
    if spec is None:
        raise PlantError(f"{family}: no such family (`vlcheck list`)")
    return spec.variants[0].architecture


def undo(models: Path) -> None:
    vllm = models.parent.parent
    folders = {models, *{(vllm / file).parent for file in (RUNNER[0], SLOW_PROCESSOR[0], SLOW_RENDER[0], LORA_SKIP[0], VIDEO_FRAMES[0],
                                                            IMAGE_SIZE_SWAPPED[0],
                                                            *(f for f, _, _ in QUANT_IGNORE_UNMAPPED))}}
    for backup in sorted(b for folder in folders for b in folder.glob(f"*{ORIG}")):
        target = backup.with_name(backup.name[: -len(ORIG)])
        target.write_text(backup.read_text())
        backup.unlink()
        print(f"restored {target}")


def listing() -> list[str]:
    return ([f"projector:{f}  ({file})" for f, (file, _) in PROJECTOR.items()] + [f"compiled-only  ({COMPILED_ONLY[0]})"]
            + [f"graphs-drop-media  ({RUNNER[0]})", f"slow-processor:FAMILY  ({SLOW_PROCESSOR[0]})",
               f"slow-render:FAMILY  ({SLOW_RENDER[0]})",
               f"lora-skips-language-model:FAMILY  ({LORA_SKIP[0]})",
               f"quant-ignore-unmapped:FAMILY  ({', '.join(f for f, _, _ in QUANT_IGNORE_UNMAPPED)})",
               f"video-frames:LOADER  ({VIDEO_FRAMES[0]})", f"image-size-swapped  ({IMAGE_SIZE_SWAPPED[0]})",
               f"merge-size-confused  ({MERGE_SIZE_CONFUSED[0]})", f"mrope-merge-confused  ({MROPE_MERGE_CONFUSED[0]})"])
