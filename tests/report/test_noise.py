"""Golden tolerances from measured noise (vlcheck/engine/noise.py): 3 x the noise stored with the
golden for the request shape and the GPU that compares, the largest measured where that GPU has
none, the fixed tolerance only for a golden that stores no noise, and noise measured only on the
versions the golden was recorded on."""

import pytest

from vlcheck.engine import goldens, noise

H200 = {"vllm": "0.24.0", "torch": "2.11.0", "gpu": "NVIDIA H200", "dtype": "float32"}
H100 = {**H200, "gpu": "NVIDIA H100 80GB HBM3"}
OUT = [{"prompt_tokens": 10, "token_ids": [5, 7], "top_logprobs": [{"5": -0.1, "6": -0.2}, {"7": -0.1, "8": -0.3}]}]
MEASURED = {"versions": {k: H200[k] for k in noise.VERSIONS},
            H200["gpu"]: {"alone": {"image x1": 0.0004}, "repeat": {"image x1": 0.0}},
            H100["gpu"]: {"alone": {"image x1": 0.0001}, "repeat": {"image x1": 0.0},
                          "against_golden": {"image x1": 0.0022}}}


def moved(by: float):
    out = [dict(OUT[0], top_logprobs=[{"5": round(-0.1 + by, 6), "6": -0.2}, OUT[0]["top_logprobs"][1]])]
    return {"image x1": out}


def test_the_tolerance_is_three_times_the_noise_measured_on_the_gpu_that_compares():
    assert noise.tolerance(MEASURED, H200["gpu"], "image x1").nats == 0.0012
    on_h100 = noise.tolerance(MEASURED, H100["gpu"], "image x1")
    assert on_h100.nats == 0.0066 and "measured on NVIDIA H100" in on_h100.basis


def test_a_gpu_without_a_measurement_takes_the_largest_measured_and_says_so():
    rule = noise.tolerance(MEASURED, "NVIDIA A100-SXM4-80GB", "image x1")
    assert rule.nats == 0.0066 and "no noise measured on NVIDIA A100" in rule.basis


def test_noise_of_zero_still_allows_the_logprobs_rounding():
    exact = {"NVIDIA H200": {"alone": {"image x1": 0.0}, "repeat": {"image x1": 0.0}}}
    assert noise.tolerance(exact, "NVIDIA H200", "image x1").nats == noise.NOISE_FACTOR * noise.RESOLUTION


def test_a_golden_without_noise_keeps_the_fixed_tolerance_and_says_so(tmp_path):
    goldens.save(tmp_path / "old.json", {"image x1": OUT}, H200)
    rule = goldens.shape_tolerance(goldens.load(tmp_path / "old.json"), H100, "image x1")
    assert rule.nats == goldens.NOISE_TOLERANCE and "no noise stored" in rule.basis
    assert noise.tolerance(MEASURED, H200["gpu"], "video x1") is None  # a shape it was not measured for


def test_a_one_percent_like_move_fails_beyond_measured_noise_where_the_fixed_rule_passed_it(tmp_path):
    # gemma3: a 1% change of its projector moved its goldens 0.0066 nats; its measured noise is 0
    exact = {"versions": MEASURED["versions"], H100["gpu"]: {"alone": {"image x1": 0.0}, "repeat": {"image x1": 0.0},
                                                             "against_golden": {"image x1": 0.0}}}
    goldens.save(tmp_path / "g.json", {"image x1": OUT}, H200, exact)
    stored = goldens.load(tmp_path / "g.json")
    (rule, found), = goldens.compare_shapes(stored, moved(0.0066), H100).values()
    assert found and rule.nats == 3e-6
    assert goldens.within_noise(OUT, moved(0.0066)["image x1"], goldens.NOISE_TOLERANCE) == []  # the fixed 0.01 passed it
    (_, within), = goldens.compare_shapes(stored, moved(0.000002), H100).values()
    assert within == []


def test_noise_and_a_configurations_extra_are_kept_with_the_golden(tmp_path):
    goldens.save(tmp_path / "g.json", {"image x1": OUT}, H200, MEASURED, distance_to_unquantized={"image x1": 0.3})
    stored = goldens.load(tmp_path / "g.json")
    assert stored.noise == MEASURED and stored.extra == {"distance_to_unquantized": {"image x1": 0.3}}
    again = noise.merged(stored.noise, H100["gpu"], H200, {"alone": {"image x1": 0.0009}, "repeat": {"video x1": 0.0003}})
    # another sample of the H100's noise: the largest per kind and shape is kept
    assert again[H100["gpu"]] == {"alone": {"image x1": 0.0009}, "repeat": {"image x1": 0.0, "video x1": 0.0003},
                                  "against_golden": {"image x1": 0.0022}}
    assert again[H200["gpu"]] == MEASURED[H200["gpu"]]
    assert noise.merged(again, H100["gpu"], H200, {"alone": {"image x1": 0.0001}})[H100["gpu"]]["alone"] == {"image x1": 0.0009}


def test_noise_is_measured_only_on_the_versions_the_golden_was_recorded_on():
    assert noise.can_measure(H200, H100) is None  # another GPU: that is what is measured
    why = noise.can_measure(H200, {**H100, "vllm": "0.33.0"})
    assert "vllm 0.33.0 (golden: 0.24.0)" in why and "a change, not noise" in why
    assert "re-record" in noise.can_measure(None, H100)


def test_a_configurations_distance_to_eager_counts_for_that_configuration_only():
    # compiled moved paligemma2's goldens 0.000235 nats where its batch noise on the H100 was 7.1e-05
    with_compiled = noise.with_configuration(MEASURED, H100["gpu"], H200, "compiled", {"image x1": 0.004})
    assert noise.tolerance(with_compiled, H100["gpu"], "image x1", "compiled").nats == 0.012
    assert noise.tolerance(with_compiled, H100["gpu"], "image x1").nats == 0.0066  # the eager golden's own
    assert noise.tolerance(with_compiled, H100["gpu"], "image x1", "chunked").nats == 0.0066
    assert "no chunked distance to the eager engine measured" in noise.tolerance(with_compiled, H100["gpu"], "image x1",
                                                                                 "chunked").basis
    # measuring the batch noise again keeps the configuration's distance
    again = noise.merged(with_compiled, H100["gpu"], H200, {"alone": {"image x1": 0.0001}, "repeat": {"image x1": 0.0}})
    assert again[H100["gpu"]]["compiled"] == {"image x1": 0.004} and again[H100["gpu"]]["against_golden"] == {"image x1": 0.0022}


def test_a_configuration_without_its_own_distance_borrows_the_one_of_the_same_numerics_and_says_so():
    # defaults_v2 on an H200, 2026-11-28: bf16 moved llava's and qwen2_vl's top-5 logprobs up to 0.06-0.10
    # nats from the eager engine; held to the eager noise alone (3 x 0.000918) all 4 family-configs failed
    # though only the model runner differed
    with_defaults = noise.with_configuration(MEASURED, H100["gpu"], H200, "defaults", {"image x1": 0.15})
    borrowed = noise.tolerance(with_defaults, H100["gpu"], "image x1", "defaults_v2", noise_of="defaults")
    assert borrowed.nats == 0.45 and "no defaults_v2 distance" in borrowed.basis and "the distance of defaults" in borrowed.basis
    own = noise.with_configuration(with_defaults, H100["gpu"], H200, "defaults_v2", {"image x1": 0.01})
    assert noise.tolerance(own, H100["gpu"], "image x1", "defaults_v2", noise_of="defaults").nats == 0.03
    # nothing to borrow: the eager noise alone, as before
    assert noise.tolerance(MEASURED, H100["gpu"], "image x1", "defaults_v2", noise_of="defaults").nats == 0.0066


def test_a_configurations_distance_is_noise_only_with_the_same_tokens_and_under_the_ceiling():
    assert noise.configuration_distance_refused("compiled", {"image x1": 0.0009}, []) is None
    # glm4_1v compiled on vLLM 0.24.0: 1.3 nats at the first token, other tokens
    assert "other tokens" in noise.configuration_distance_refused("compiled", {"image x1": 1.3}, ["image x1"])
    over = noise.configuration_distance_refused("compiled", {"image x1": 0.02}, [])
    assert "over 0.01" in over and "a finding, not noise" in over
    # a configuration computing in another dtype (defaults: bfloat16) states its own ceiling
    assert noise.configuration_distance_refused("defaults", {"image x1": 0.02}, [], ceiling=1.0) is None


def test_a_configuration_that_breaks_a_near_tie_the_other_way_has_its_distance_measured_but_not_one_that_breaks_no_tie(tmp_path):
    from types import SimpleNamespace
    from unittest import mock

    from vlcheck.engine import runs

    eager = [{"prompt_tokens": 3, "token_ids": [5, 6], "text": "ab",
              "top_logprobs": [{"5": -0.50, "9": -0.52}, {"6": -0.1, "7": -2.0}]}]
    tie_broken = [{"prompt_tokens": 3, "token_ids": [9, 1], "text": "xy",
                   "top_logprobs": [{"5": -0.52, "9": -0.50}, {"1": -0.1, "2": -2.0}]}]
    path = tmp_path / "g.json"
    goldens.save(path, {"image x1": eager}, H100, MEASURED)
    handle = SimpleNamespace(dtype="auto", model_dir=str(tmp_path))
    with mock.patch.object(goldens, "environment", return_value=H100):
        stored = runs.with_configuration_distance(handle, path, goldens.load(path), "defaults", {"image x1": tie_broken},
                                                  {"image x1": eager}, "float32", ceiling=1.0)
        assert stored.noise[H100["gpu"]]["defaults"] == {"image x1": 0.02}
        far = [{**eager[0], "token_ids": [7, 1], "top_logprobs": [{"5": -0.9, "7": -0.3}, {"1": -0.1}]}]
        with pytest.raises(ValueError, match="other tokens than the eager engine"):
            runs.with_configuration_distance(handle, path, stored, "defaults", {"image x1": far}, {"image x1": eager},
                                             "float32", ceiling=1.0)


def test_a_configurations_distance_is_stored_with_the_eager_golden_and_refused_on_other_versions(tmp_path):
    from types import SimpleNamespace
    from unittest import mock

    from vlcheck.engine import runs

    path = tmp_path / "g.json"
    goldens.save(path, {"image x1": OUT}, H200, MEASURED)
    handle = SimpleNamespace(dtype="float32", model_dir=str(tmp_path))
    with mock.patch.object(goldens, "environment", return_value=H100):
        stored = runs.with_configuration_distance(handle, path, goldens.load(path), "compiled", moved(0.0005),
                                                  {"image x1": OUT}, "float32")
    assert stored.noise[H100["gpu"]]["compiled"] == {"image x1": 0.0005} and stored.outputs == {"image x1": OUT}
    with mock.patch.object(goldens, "environment", return_value={**H100, "vllm": "0.33.0"}), \
            pytest.raises(ValueError, match="a change, not noise"):
        runs.with_configuration_distance(handle, path, stored, "compiled", moved(0.0005), {"image x1": OUT}, "float32")


def test_a_configurations_distance_measured_on_a_gpu_without_eager_noise_counts_there():
    # spec_ngram on an H200, 2026-11-28: its distance to the eager engine was stored for the H200 (llava
    # multi_image, image x2: 0.001252 nats), whose eager noise was measured on an H100 only; the tolerance
    # ignored it and stayed 3 x the H100's eager noise, failing the same 0.00125-nat move it had just stored
    spec = noise.with_configuration(MEASURED, "NVIDIA H200 NVL", H200, "spec_ngram", {"image x1": 0.004})
    rule = noise.tolerance(spec, "NVIDIA H200 NVL", "image x1", "spec_ngram")
    assert rule.nats == 0.012 and "no noise measured on NVIDIA H200 NVL" in rule.basis
    assert noise.tolerance(spec, "NVIDIA H200 NVL", "image x1").nats == 0.0066  # the eager comparison: as before
    small = noise.with_configuration(MEASURED, "NVIDIA H200 NVL", H200, "spec_ngram", {"image x1": 0.0})
    assert noise.tolerance(small, "NVIDIA H200 NVL", "image x1", "spec_ngram").nats == 0.0066  # the eager noise still counts
