"""bench/README.md's sections are rendered from committed results by each bench script: the figures they print are
computed from the stored values, never from values already rounded for storage, and the command they show is the one
that gives those figures."""

from __future__ import annotations

import json


def test_the_http_cost_per_call_comes_from_the_throughputs_not_from_rounded_ms(bench, repo_root):
    http = bench("retriever_http")
    cell = {"in_process": {"queries_per_s": 4445.2, "ms_per_call": 0.22}, "http": {"queries_per_s": 1150.3}}
    assert abs(http.overhead_ms(cell, "1") - 0.644) < 0.001  # 0.87 - 0.22 would make 0.65, shown as 0.7
    assert abs(http.overhead_ms(cell, 64) - 64 * 0.644) < 0.05
    rows = http.throughput_rows(json.loads((repo_root / "bench/results/retriever_http.json").read_text()))
    assert rows[2].endswith("| 0.26x | +0.6 ms |")


def test_the_trainer_step_section_shows_the_steps_it_ran_and_each_rows_sample_count(bench, monkeypatch):
    step = bench("trainer_step")
    written = {}
    monkeypatch.setattr(step, "update_readme_section", lambda name, text: written.update({name: text}))
    result = {
        "machine": {"cpu_cores": 2, "gpu": "none", "packages": {"torch": "t", "trl": "r", "transformers": "x"}},
        "setup": {"device": "cpu", "steps_per_run": 3, "trajectories_per_step": 16, "max_new_tokens": 64, "model": "m"},
        "overhead": {
            "steps": {"ours": [1, 2, 3, 4], "plain": [1, 2, 3, 4], "plain_as_shipped": [5, 6]},
            "median_step_seconds": {"ours": 2.5, "plain": 2.4, "plain_as_shipped": 5.5},
            "mean_new_tokens": {"ours": 64.0, "plain": 64.0, "plain_as_shipped": 64.0},
            "ratio": 1.04,
        },
    }
    step.write_section(result)
    text = written["trainer_step"]
    assert "`python bench/trainer_step.py --steps 3`" in text and "median of\n4 steps each" in text
    assert "too; median of 2 steps) | 5.50 s" in text
    result["setup"]["steps_per_run"] = step.STEPS
    result["overhead"]["steps"]["plain_as_shipped"] = [1, 2, 3, 4]
    step.write_section(result)
    assert "`python bench/trainer_step.py`" in written["trainer_step"]
    assert "median of 4 steps)" not in written["trainer_step"]


def test_dynamic_sampling_seconds_per_step_are_not_shown_finer_than_they_were_stored(bench, repo_root):
    sampling = bench("dynamic_sampling")
    text = sampling.section(json.loads((repo_root / "bench/results/dynamic_sampling.json").read_text()))
    assert "| 42.0 | 421.4 |" in text and "41.987" not in text


def test_the_generation_speed_section_reads_the_gpu_rows_autocast_cost_from_its_results(bench, repo_root):
    speed = bench("generation_speed")
    gpu = json.loads((repo_root / "bench/results/generation_speed_cuda.json").read_text())
    ratio = gpu["models"][0]["ratio_to_plain"]["c_before"]
    text = speed.section(json.loads((repo_root / "bench/results/generation_speed.json").read_text()), "")
    assert f"{ratio:.2f}x on {gpu['machine']['gpu']} (the row above)" in text


def test_a_count_option_takes_whole_numbers_of_at_least_one(bench):
    import argparse

    import pytest

    common = bench("_common")
    assert common.positive_int("1") == 1 and common.positive_int("64") == 64
    for bad in ("0", "-2", "2.5", "x"):
        with pytest.raises(argparse.ArgumentTypeError):
            common.positive_int(bad)
