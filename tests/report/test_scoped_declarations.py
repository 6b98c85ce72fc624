"""A deviation declared for some modalities excuses those only: the test still asserts every
other modality, and fails when the declared ones stop deviating."""

import dataclasses
import types

import pytest

from vlcheck.core.versions import installed
from vlcheck.runners.testing import assert_as_scoped
from vlcheck.spec.registry import SpecError, get_family, load_spec
from vlcheck.spec.schema import Declaration

VERSIONS = {"vllm": f"=={installed()['vllm']}", "transformers": f"=={installed()['transformers']}"}


class Marks:
    """Stands in for pytest's request: records the marks a helper applies."""

    def __init__(self):
        self.marks = []
        self.node = types.SimpleNamespace()  # where expect_deviation notes the declaration for the report hook

    def applymarker(self, mark):
        self.marks.append(mark)


def qwen2_vl_declaring(**scope):
    variant = get_family("qwen2_vl").single
    return dataclasses.replace(variant, deviations={"vllm_reference": Declaration("video positions", **VERSIONS, **scope)})


def test_the_shipped_qwen2_vl_declaration_covers_its_videos_only():
    declared = get_family("qwen2_vl").single.deviations["vllm_reference"]
    assert declared.modalities == ("video",) and declared.covers("video") and not declared.covers("image")


def test_a_video_deviation_still_fails_the_images():
    with pytest.raises(AssertionError, match=r"covers video only\)\n\s*image x1: moved"):  # indented where pytest rewrites the assert
        assert_as_scoped(Marks(), qwen2_vl_declaring(modalities=("video",)), "vllm_reference",
                         {"image": ["image x1: moved"], "video": ["video x1: moved"]}, "qwen2_vl:")


def test_a_video_deviation_with_agreeing_images_is_the_declared_xfail():
    with pytest.raises(pytest.xfail.Exception, match="video only; the other modalities passed"):
        assert_as_scoped(Marks(), qwen2_vl_declaring(modalities=("video",)), "vllm_reference",
                         {"image": [], "video": ["video x1: moved"]}, "qwen2_vl:")


def test_a_video_deviation_that_stopped_happening_fails():
    with pytest.raises(pytest.fail.Exception, match="video agree now: remove it"):
        assert_as_scoped(Marks(), qwen2_vl_declaring(modalities=("video",)), "vllm_reference",
                         {"image": [], "video": []}, "qwen2_vl:")


def test_a_declaration_for_the_whole_check_stays_a_strict_xfail_of_the_test():
    request = Marks()
    with pytest.raises(AssertionError):
        assert_as_scoped(request, qwen2_vl_declaring(), "vllm_reference", {"image": ["image x1: moved"]}, "qwen2_vl:")
    (mark,) = request.marks
    assert mark.name == "xfail" and mark.kwargs["strict"] is True


def test_no_declaration_asserts_every_modality():
    variant = dataclasses.replace(get_family("qwen2_vl").single, deviations={})
    with pytest.raises(AssertionError, match="video x1: moved"):
        assert_as_scoped(Marks(), variant, "vllm_reference", {"image": [], "video": ["video x1: moved"]}, "qwen2_vl:")


SPEC = """name = "tiny"
[single]
source = {{ seed = "000", function = "run_llava" }}
model = "llava-hf/llava-1.5-7b-hf"
architecture = "LlavaForConditionalGeneration"
[single.prompt]
template = "USER: {{placeholder}}\\n{{question}} ASSISTANT:"
[single.modalities.image]
placeholder = "<image>"
[single.deviations.vllm_reference]
reason = "r"
vllm = "==0.24.0"
transformers = "==5.16.1"
modalities = {modalities}
"""


@pytest.mark.parametrize("modalities, error", [
    ('["smell"]', "deviations.vllm_reference.modalities: unknown modality 'smell'"),
    ('["audio"]', "deviations.vllm_reference.modalities: 'audio' is not a modality of this example (image)"),
    ('["video"]', "deviations.vllm_reference.modalities: 'video' is not a modality of this example (image)"),
])
def test_a_declared_modality_must_exist_in_the_example(tmp_path, modalities, error):
    path = tmp_path / "tiny.toml"
    path.write_text(SPEC.format(modalities=modalities))
    with pytest.raises(SpecError, match=error.replace("(", "\\(").replace(")", "\\)")):
        load_spec(path)
