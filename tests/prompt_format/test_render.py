"""Rendering rules, against prompts read by hand off the seed files (not produced by the renderer)."""

import pytest

from vlcheck.prompt.render import (IMAGE_QUESTIONS, MULTI_IMAGE_QUESTION, NeedsChatTemplate, messages, render_prompts,
                            request_prompts)
from vlcheck.spec.registry import get_family


def test_hand_template_byte_exact():
    # 000 run_llava: f"USER: <image>\n{question}\nASSISTANT:"
    assert render_prompts(get_family("llava"), "image", ["Q?"]) == ["USER: <image>\nQ?\nASSISTANT:"]


def test_default_questions_are_the_examples():
    prompts = render_prompts(get_family("deepseek_ocr"), "image")
    assert prompts == [f"<image>\n{q}" for q in IMAGE_QUESTIONS]
    assert IMAGE_QUESTIONS[3] == "Where is this image taken?"


def test_video_placeholder_and_question():
    (prompt,) = render_prompts(get_family("qwen2_5_vl"), "video")
    assert "<|vision_start|><|video_pad|><|vision_end|>Why is this video funny?<|im_end|>" in prompt


def test_multi_image_numbering_and_separator():
    # 003 load_h2ovl: "\n".join(f"Image-{i}: <image>\n" ...) then f"{placeholders}\n{question}"
    (msgs,) = [messages(get_family("h2ovl_chat").multi_image, "image", MULTI_IMAGE_QUESTION, 3)]
    assert msgs[-1]["content"] == ("Image-1: <image>\n\nImage-2: <image>\n\nImage-3: <image>\n\n"
                                   "What is the content of each image?")


def test_multi_image_repeat_without_separator():
    # 003 load_aria: "<fim_prefix><|img|><fim_suffix>\n" * len(image_urls)
    (prompt,) = render_prompts(get_family("aria"), "image", images=2)
    assert prompt == ("<|im_start|>user\n<fim_prefix><|img|><fim_suffix>\n<fim_prefix><|img|><fim_suffix>\n"
                      "What is the content of each image?<|im_end|>\n<|im_start|>assistant\n")


def test_question_ignored_by_task_prompt():
    assert render_prompts(get_family("paligemma"), "image", ["anything"]) == ["caption en"]


def test_question_with_braces_is_literal():
    assert render_prompts(get_family("llava"), "image", ["{placeholder} {0}"]) == [
        "USER: <image>\n{placeholder} {0}\nASSISTANT:"]


def test_chat_template_family_reports_its_asset():
    with pytest.raises(NeedsChatTemplate) as info:
        render_prompts(get_family("h2ovl_chat"), "image")
    assert "h2oai/h2ovl-mississippi-800m" in str(info.value) and "tokenizer" in str(info.value)


def test_unsupported_modality_and_count():
    with pytest.raises(ValueError, match="does not take 'video'"):
        render_prompts(get_family("llava"), "video")
    with pytest.raises(ValueError, match="1..12"):
        render_prompts(get_family("aria"), "image", images=13)


@pytest.mark.parametrize("different, expected", [(False, ["a", "a", "a", "a", "a"]),
                                                 (True, ["a", "b", "c", "a", "b"])])
def test_request_prompt_modes(different, expected):
    assert request_prompts(["a", "b", "c"], 5, different) == expected
