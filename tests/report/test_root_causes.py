"""One root error is one cause (issue 57): a name transformers removed breaks every path that
imports the module needing it, and each path words it its own way. The evidence below is what the
report of vLLM 0.24.0 with transformers 5.24.0 holds (paths shortened); the old grouping made six
causes of it, four of them "whose: unknown"."""

from vlcheck.gate.causes import Cell, group
from vlcheck.gate.root_errors import import_root

MISSING = "cannot import name 'PixtralRotaryEmbedding' from 'transformers.models.pixtral.modeling_pixtral'"
WHERE = "(/env/lib/python3.11/site-packages/transformers/models/pixtral/modeling_pixtral.py)"
PIXTRAL_FRAMES = [{"package": "importlib", "file": "<frozen importlib._bootstrap>", "line": 241,
                   "function": "_call_with_frames_removed"},
                  {"package": "vllm", "file": "vllm/model_executor/models/llava.py", "line": 63, "function": "<module>"},
                  {"package": "vllm", "file": "vllm/model_executor/models/pixtral.py", "line": 18, "function": "<module>"}]
VALIDATION_FRAMES = [{"package": "vllm", "file": "vllm/engine/arg_utils.py", "line": 1598, "function": "create_model_config"},
                     {"package": "pydantic", "file": "pydantic/_internal/_dataclasses.py", "line": 121, "function": "__init__"}]
SERVER_LOG = ("ERROR 11-27 23:07:50 [registry.py:975] RuntimeError: Error raised in subprocess:\n"
              f"ERROR 11-27 23:07:50 [registry.py:975] ImportError: {MISSING} {WHERE}\n"
              "pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig\n"
              "  Value error, Model architectures ['LlavaForConditionalGeneration'] failed to be inspected.")
EVIDENCE = {  # (family, check [kind]) -> (evidence, frames, details)
    ("llava", "processor [single]"): (f"[single] llava: vLLM could not build its processor: NotInspected: vLLM could "
                                      f"not inspect LlavaForConditionalGeneration: importing its class raised "
                                      f"ImportError: {MISSING} {WHERE}", PIXTRAL_FRAMES, []),
    ("llava", "architecture [single]"): (f"[single] llava: the model class of LlavaForConditionalGeneration does not "
                                         f"import: ImportError: {MISSING} {WHERE}", [], []),
    ("llava", "served [single]"): ("[single] llava: `vllm launch render` did not serve the example's launch line: "
                                   "pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig",
                                   VALIDATION_FRAMES, [SERVER_LOG]),
    ("tarsier", "processor [single]"): (f"[single] no checkpoint: the recipe's vllm.model_executor.models.tarsier."
                                        f"TarsierProcessor does not import on this install: ImportError: {MISSING} {WHERE}",
                                        [], []),
    ("paligemma", "fingerprints [single]"): (f"[single] paligemma: its processor needs a package that is not installed: "
                                             f"{MISSING} {WHERE}", [], []),
    ("paligemma", "served [single]"): ("[single] paligemma: bad request 'extreme aspect ratio (1 x 4000)': answered 500: "
                                       f"a bad request must get a 4xx (SERVER ERROR 500: {MISSING} (/env/lib/python3.)",
                                       [], []),
    ("minicpmv", "hostile [single]"): ("[single] vLLM's processor for minicpmv needs a package that is not installed: "
                                       "No module named 'transformers.modeling_attn_mask_utils'", [], []),
    ("qwen2_vl", "served [single]"): ("[single] qwen2_vl: bad request 'http URL, unreachable (closed local port)': "
                                      "answered 500: a bad request must get a 4xx (SERVER ERROR 500: Cannot connect)",
                                      [], ["WARNING flash_attn: ImportError: No module named 'flash_attn'"]),
}


def _report() -> dict:
    families: dict = {}
    for (family, label), (evidence, frames, details) in EVIDENCE.items():
        check = label.split(" ")[0]
        unit = {"status": "fail", "reason": evidence, "finding": evidence, "frames": frames}
        families.setdefault(family, {"model": f"org/{family}", "checks": {}})["checks"][check] = {
            "status": "fail", "reason": evidence, "details": details, "variants": {"single": unit}}
    return {"environment": {"vllm": "0.24.0", "transformers": "5.24.0"}, "families": families}


def _causes():
    cells = [Cell(family, label, "regression", evidence, frames) for (family, label), (evidence, frames, _) in EVIDENCE.items()]
    return group(cells, _report())


def test_one_removed_name_is_one_cause_whatever_each_path_wrapped_around_it():
    causes = _causes()
    pixtral = causes[0]
    assert pixtral.title == f"a failed import: {MISSING}"
    assert {(c.family, c.label) for c in pixtral.cells} == {k for k, (e, _, d) in EVIDENCE.items()
                                                            if "Pixtral" in e + "".join(d)}
    assert len(pixtral.cells) == 6


def test_its_owner_is_the_pairing_of_the_importer_and_the_library():
    pixtral = _causes()[0]
    assert pixtral.whose == "vllm + transformers"
    assert pixtral.why_whose == ("the pairing: vllm/model_executor/models/pixtral.py:18 in <module> imports "
                                 "PixtralRotaryEmbedding, which transformers 5.24.0 does not have")
    assert pixtral.frames == PIXTRAL_FRAMES


def test_a_missing_module_without_an_importer_frame_is_said_so_not_unknown():
    minicpmv = next(c for c in _causes() if "modeling_attn_mask_utils" in c.title)
    assert minicpmv.whose == "transformers" and "no frame names" in minicpmv.why_whose


def test_a_log_that_mentions_an_import_under_evidence_that_hides_nothing_is_not_read():
    """An optional module's ImportError in a server's log is not the root of a 500 that says why."""
    unreachable = next(c for c in _causes() if c.families == ["qwen2_vl"])
    assert "import" not in unreachable.title.lower() and unreachable.whose == "vllm"
    assert import_root("answered 500: Cannot connect", ["ImportError: No module named 'flash_attn'"]) is None
    assert import_root("1 validation error for ModelConfig", ["ERROR [x.py:1] ImportError: No module named 'y.z'"]).module == "y.z"


def test_an_exception_raised_while_importing_is_one_cause_too():
    """vLLM 0.33.0 in an environment with the wrong cuda-python: its model classes raise an
    AttributeError on import (nine causes before, by family, most "whose: unknown")."""
    raised = "AttributeError: module 'cuda.bindings.runtime' has no attribute 'cudaLibrary_t'"
    frames = [{"package": "vllm", "file": "vllm/utils/b12x.py", "line": 32, "function": "_import_submodule"},
              {"package": "cutlass", "file": "cutlass/base_dsl/runtime.py", "line": 12, "function": "<module>"}]
    cells = [Cell("glm4_5v", "architecture [single]", "regression",
                  f"[single] glm4_5v: the model class of Glm4vMoeForConditionalGeneration does not import: {raised}"),
             Cell("h2ovl_chat", "architecture [single]", "regression",
                  f"[single] h2ovl_chat: the model class of H2OVLChatModel does not import: {raised}"),
             Cell("command_a_vision", "processor [single]", "regression",
                  f"[single] command_a_vision: vLLM could not build its processor: NotInspected: vLLM could not inspect "
                  f"Cohere2VisionForConditionalGeneration: importing its class raised {raised} (/env/lib/x.py)", frames)]
    causes = group(cells, {"families": {}})
    assert len(causes) == 1 and causes[0].title == f"importing a module raised {raised}"
    assert causes[0].whose == "vllm" and causes[0].frames == frames


def test_what_vllms_api_server_answered_is_vllms_without_a_frame():
    cells = [Cell("qwen2_vl", "served [single]", "regression", "[single] qwen2_vl: served vs offline: video x1: served "
                  "105 tokens, offline 105; inside them token 21 differs"),
             Cell("llava", "served [multi_image]", "regression", "[multi_image] llava: image x12: the example's chat "
                  "request was rejected: 400 1 validation error for MultiModalFeatures")]
    assert [c.whose for c in group(cells, {"families": {}})] == ["vllm", "vllm"]
