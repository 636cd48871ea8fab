"""The benchmarks' cheap versions run in CI, so a regression in what they measure shows: each
prints its JSON figures and floors, and the alignment it times still finds the planted layers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run(name: str, *args: str, env: dict[str, str] | None = None) -> dict:
    r = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / name), *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
    )
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout)


@pytest.mark.timeout(300)
def test_align_bench_small_reports_floors_and_finds_the_layers():
    d = _run("align_bench.py", "--small", "--repeat", "2")
    assert d["correct"], d
    assert d["floors"]["page_cache_s"] > 0 and d["floors"]["page_cache_gbps"] > 0
    assert d["floors"]["page_cache_s"] == min(d["floors"]["page_cache_runs_s"])
    assert 0 <= d["page_cache"]["pmd_mapped_fraction"] <= 1 and d["page_cache"]["cold_read_s"] > 0
    assert d["floors"]["screen_compute_s"] > 0 and d["floors"]["screen_compute_gbps_per_thread"] > 0
    assert d["floors"]["screen_kernel"] in ("bf16-fma", "fma")
    cpu = d["runs"]["cpu"]  # against the larger floor: never above the page cache's ratio
    assert 0 < cpu["ratio_cpu_floor"] <= cpu["ratio_page_cache"]
    if d["floors"]["screen_compute_s"] <= d["floors"]["page_cache_s"]:
        assert cpu["ratio_cpu_floor"] == cpu["ratio_page_cache"]
    assert d["first_run_s"] > 0  # (the process's first alignment, before the clock)
    for dev in ("auto", "cpu"):
        run = d["runs"][dev]
        assert len(run["runs_s"]) == 2  # every timed run counts: none of them compiled
        assert run["correct"] and run["seconds"] > 0 and run["ratio_page_cache"] > 0
        assert run["timing"]["device_choice"]["reason"]
    assert "cpu_within_1.5x_page_cache" in d["goals"]
    assert all(v < 1e-4 for v in d["agreement"].values())


def test_align_bench_runs_the_screen_it_is_told_to_on_the_threads_it_is_given():
    """``--kernel``: the portable screen instead of the bf16 one, for a comparison on one machine;
    ``--threads 2`` where torch would take 4: every timed alignment on 2."""
    d = _run(
        "align_bench.py",
        "--small",
        "--repeat",
        "2",
        "--devices",
        "cpu",
        "--kernel",
        "fma",
        "--threads",
        "2",
        env={"OMP_NUM_THREADS": "4"},
    )
    assert d["correct"] and d["runs"]["cpu"]["timing"]["kernel"] == "fma", d["runs"]["cpu"]["timing"]
    assert d["threads"] == 2 and d["runs"]["cpu"]["timing"]["threads"] == 2


@pytest.mark.timeout(300)
def test_align_paths_bench_small_times_every_path_and_each_agrees():
    """Each fast path against what would stand in for it, in the same rounds: every variant ran every round, its
    ratio to the engine's path is taken round by round, and each variant's alignment is the engine's."""
    d = _run("align_paths_bench.py", "--small", "--rounds", "2", "--budget-s", "20")
    variants = ("kernel", "fma", "pool", "nosample", "torch-bf16", "torch-fp32")
    assert d["correct"] and set(d["variants"]) == set(variants) and d["rounds"] == 2
    assert d["paired_ratio_median_to_first"]["kernel"] == 1.0 and d["floor_min_ms"] > 0
    for name in variants:
        v = d["variants"][name]
        assert len(v["runs_ms"]) == 2 and 0 < v["min_ms"] <= v["median_ms"] and d["max_abs_vs_first"][name] < 1e-3


@pytest.mark.timeout(300)
def test_log_bench_small_reports_speed_and_flat_memory():
    d = _run("log_bench.py", "--small")
    for label in ("small", "large"):
        for mode in ("cli_json", "stream_json", "stream_follow", "floor_read", "floor_encode"):
            got = d["stream"][label][mode]
            assert got["lines"] > 0 and got["lines_per_s"] > 0 and got["lines_per_cpu_s"] > 0
    large = d["stream"]["large"]
    # the same lines counted by the command, the reader and the floor
    assert large["cli_json"]["lines"] == large["stream_json"]["lines"] == large["floor_read"]["lines"]
    assert d["cli_json_vs_read_floor"] < 1  # parsing costs more than splitting the same bytes
    # the same lines through the general path (every line indented): the periodic lines' fast path earns its place
    small = d["stream"]["small"]
    assert small["generic_json"]["lines"] == small["stream_json"]["lines"] and d["fast_path_gain"] > 1
    # memory does not follow the log's size (4x longer: same peak within a margin)
    assert d["goals"]["rss_independent_of_size"], d["stream"]
    assert set(d["goals"]) == {
        "cli_json_500k_lines_per_cpu_s_one_core",
        "stream_rss_le_64mb",
        "rss_independent_of_size",
    }
