"""Response-length distributions: lognormal truncation, quantiles, files, sampling, errors."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from planner.errors import InputError
from planner.specs.lengths import (
    LengthDistribution,
    ResponseLengthsInput,
    norm_cdf,
    norm_ppf,
    resolve_lengths,
    sample_lengths,
    truncated_lognormal_mean,
)
from planner.specs.scenario import load_scenario
from tests.conftest import grpo_scenario
from tests.test_cli import assert_bad_input

N = 4096


def spec(**fields) -> ResponseLengthsInput:
    return ResponseLengthsInput(**fields)


def workload(**changes) -> dict:
    """A GRPO workload of 1024 prompts × 4 samples (N sequences)."""
    return {"prompts_per_step": 1024, "samples_per_prompt": 4, "prompt_len": 256} | changes


def load(write, **workload_changes):
    return load_scenario(write("s.yaml", grpo_scenario(workload=workload(**workload_changes))))


def sample_quantile(lengths: np.ndarray, q: float) -> float:
    s = np.sort(lengths)
    return float(s[min(len(s) - 1, int(q * len(s)))])


def test_norm_ppf_inverts_the_cdf():
    for p in (1e-9, 1e-4, 0.02, 0.2, 0.5, 0.77, 0.975, 1 - 1e-6):
        assert norm_cdf(float(norm_ppf(p))) == pytest.approx(p, rel=1e-9)
    assert float(norm_ppf(0.975)) == pytest.approx(1.959963984540054, abs=1e-12)


@pytest.mark.parametrize(("mean", "cap", "sigma"), [
    (4096, 16384, 1.0), (4096, 8192, 1.0), (512, 1024, 0.5), (1000, 32768, 1.1),
    (2000, 2100, 2.0), (300, 4096, 0.3)])
def test_lognormal_mean_after_truncation_is_response_len(mean, cap, sigma):
    dist, response_len, got_cap, _ = resolve_lengths(spec(sigma=sigma), mean, cap, N)
    assert (response_len, got_cap) == (mean, cap)
    assert truncated_lognormal_mean(dist.mu, sigma, cap) == pytest.approx(mean, rel=1e-9)
    lengths = sample_lengths(dist, N)
    assert lengths.dtype == np.int64 and len(lengths) == N
    assert lengths.min() >= 1 and lengths.max() <= cap
    assert lengths.mean() == pytest.approx(mean, rel=0.005)
    # the clipped responses sit at the cap: P(X ≥ cap) of the untruncated lognormal
    p_clip = 1 - norm_cdf((math.log(cap) - dist.mu) / sigma)
    assert np.mean(lengths == cap) == pytest.approx(p_clip, abs=2 / N + 1e-3)


def test_truncated_mean_formula_matches_numerical_integration():
    mu, sigma, cap = 7.5, 1.0, 8192
    u = (np.arange(400_000) + 0.5) / 400_000
    numeric = np.minimum(np.exp(mu + sigma * norm_ppf(u)), cap).mean()
    assert truncated_lognormal_mean(mu, sigma, cap) == pytest.approx(numeric, rel=1e-4)


def test_defaults_fixed_without_a_cap_and_lognormal_with_one():
    fixed, *_ = resolve_lengths(None, 512, None, N)
    assert fixed.shape == "fixed" and set(sample_lengths(fixed, N)) == {512}
    lognormal, *_ = resolve_lengths(None, 512, 2048, N)
    assert lognormal.shape == "lognormal" and lognormal.sigma == 1.0
    explicit, *_ = resolve_lengths(spec(distribution="fixed"), 512, 2048, N)
    assert set(sample_lengths(explicit, N)) == {512}
    at_cap, *_ = resolve_lengths(spec(distribution="lognormal"), 2048, 2048, N)
    assert set(sample_lengths(at_cap, N)) == {2048}


def test_quantiles_are_reproduced_with_the_clipped_fraction():
    given = {"p10": 200, "p50": 900, "p90": 4000, "p95": 6000}
    dist, response_len, cap, notes = resolve_lengths(spec(**given, clipped=0.02), None, 16384, N)
    lengths = sample_lengths(dist, N)
    for name, value in given.items():
        # one sample step (1/N of probability) around the exact quantile
        assert sample_quantile(lengths, int(name[1:]) / 100) == pytest.approx(value, rel=0.005)
    assert np.mean(lengths == cap) == pytest.approx(0.02, abs=1 / N)
    assert response_len == round(lengths.mean())
    assert any("response_len not given" in n for n in notes)


def test_a_single_quantile_extends_with_sigma_one():
    dist, *_ = resolve_lengths(spec(p50=1000), None, 10**6, N)
    lengths = sample_lengths(dist, N)
    assert sample_quantile(lengths, 0.9) == pytest.approx(1000 * math.exp(1.2815516), rel=0.005)


def test_quantile_beyond_the_clipped_fraction_is_noted():
    _, _, _, notes = resolve_lengths(spec(p50=900, p99=12000, clipped=0.03), None, 16384, N)
    assert any("p99 12000 falls in the clipped 3.0%" in n for n in notes)


def test_sampling_is_deterministic_and_cached(write):
    a, b = load(write, response_len=1000, max_response_len=8000), \
        load(write, response_len=1000, max_response_len=8000)
    assert a is not b and np.array_equal(a.response_lengths, b.response_lengths)
    assert a.response_lengths is a.response_lengths  # computed once
    assert not a.response_lengths.flags.writeable
    assert len(a.response_lengths) == a.sequences_per_step == N


def test_a_contiguous_chunk_is_a_fair_sample():
    dist, *_ = resolve_lengths(spec(sigma=1.0), 1000, 16000, N)
    lengths = sample_lengths(dist, N)
    first, second = lengths[: N // 2].mean(), lengths[N // 2:].mean()
    assert first == pytest.approx(second, rel=0.05)
    assert not np.all(np.diff(lengths) >= 0)  # not sorted


def test_text_file_relative_to_the_scenario_folder(write, tmp_path):
    values = [100 + 7 * i for i in range(N)]
    write("runs/lengths.txt", "# observed\n" + "\n".join(map(str, values)) + "\n\n")
    s = load_scenario(write("runs/s.yaml", grpo_scenario(workload=workload(
        response_lengths={"file": "lengths.txt"}))))
    assert sorted(s.response_lengths.tolist()) == values  # n = N: the values themselves
    assert s.workload.response_len == round(np.mean(values))
    assert s.workload.max_response == max(values)
    assert any("max_response_len not given" in n for n in s.notes)


def test_csv_file_with_a_column_and_clipping_to_the_cap(write):
    rows = ["step,response_length"] + [f"1,{v}" for v in [100, 200, 300, 400, 5000]]
    write("run.csv", "\n".join(rows) + "\n")
    s = load(write, max_response_len=1000, response_lengths={"file": "run.csv",
                                                              "column": "response_length"})
    assert s.length_distribution.values == (100, 200, 300, 400, 1000)
    assert s.workload.max_response == 1000 and s.workload.response_len == 400
    assert any("20.0% of the 5 lengths exceed max_response_len 1,000" in n for n in s.notes)


def test_json_files_in_each_shape(write):
    write("a.json", json.dumps([10, 20.0, 30]))
    write("b.json", json.dumps([{"len": 10}, {"len": 20}, {"len": 30}]))
    write("c.json", json.dumps({"len": [10, 20, 30], "other": [1]}))
    for name, column in (("a.json", None), ("b.json", "len"), ("c.json", "len")):
        lengths = {"file": name} | ({"column": column} if column else {})
        s = load(write, response_lengths=lengths)
        assert s.length_distribution.values == (10, 20, 30) and s.workload.response_len == 20


def test_a_stated_mean_close_to_the_file_is_kept(write):
    write("l.txt", "100\n200\n300\n")
    s = load(write, response_len=210, response_lengths={"file": "l.txt"})
    assert s.workload.response_len == 210


@pytest.mark.parametrize(("lengths", "changes", "field"), [
    ({"p50": 900, "p90": 800}, {"max_response_len": 4096}, "response_lengths.p90': 800 is below"),
    ({"p50": 900, "p99": 20000}, {"max_response_len": 16384}, "response_lengths.p99': 20000 is "
                                                               "above max_response_len"),
    ({"p50": 900, "clipped": 1.0}, {"max_response_len": 4096}, "response_lengths.clipped'"),
    ({"sigma": 0}, {"response_len": 100, "max_response_len": 400}, "response_lengths.sigma'"),
    ({"sigma": 5}, {"response_len": 100, "max_response_len": 400}, "response_lengths.sigma'"),
    ({"p50": 900}, {}, "workload.max_response_len' is missing"),
    ({"p50": 900, "sigma": 1.0}, {"max_response_len": 4096}, "response_lengths': mixes"),
    ({"distribution": "fixed", "sigma": 1.0}, {"response_len": 9}, "response_lengths': sigma"),
    ({"distribution": "fixed"}, {}, "workload.response_len' is missing"),
    ({"distribution": "gamma"}, {"response_len": 9}, "response_lengths.distribution'"),
])
def test_bad_values_name_the_field(write, tmp_path, lengths, changes, field):
    with pytest.raises(InputError, match=field) as err:
        load(write, response_lengths=lengths, **changes)
    assert "\n" not in str(err.value) and str(err.value).startswith(str(tmp_path / "s.yaml"))


@pytest.mark.parametrize(("name", "content", "column", "field"), [
    ("empty.txt", "# nothing\n\n", None, "response_lengths.file': .*holds no lengths"),
    ("words.txt", "100\nabc\n", None, "response_lengths.file': .*line 2: 'abc' is not a "
                                      "positive whole number"),
    ("half.txt", "100\n12.5\n", None, "response_lengths.file': .*12.5"),
    ("zero.json", "[1, 0]", None, "response_lengths.file': .*item 1: 0 is not"),
    ("two.csv", "a,b\n1,2\n", None, "response_lengths.column': .*has 2 columns"),
    ("two.csv", "a,b\n1,2\n", "c", "response_lengths.column': 'c' is not a column"),
    ("objs.json", '[{"len": 5}, {"n": 6}]', "len", "response_lengths.column': 'len' is "
                                                    "missing from item 1"),
    ("missing.txt", None, None, "response_lengths.file': .*no such file"),
])
def test_bad_files_name_the_field(write, name, content, column, field):
    if content is not None:
        write(name, content)
    lengths = {"file": name} | ({"column": column} if column else {})
    with pytest.raises(InputError, match=field):
        load(write, response_lengths=lengths)


def test_a_stated_mean_far_from_the_file_is_rejected(write):
    write("l.txt", "100\n200\n300\n")
    with pytest.raises(InputError, match="field 'workload.response_len': 250 differs from the "
                                         "mean of response_lengths .200. by more than 10%"):
        load(write, response_len=250, response_lengths={"file": "l.txt"})


def test_dpo_accepts_the_distribution_and_says_it_is_ignored(write):
    s = load_scenario(write("s.yaml", grpo_scenario(
        algorithm="dpo", models={"actor": "qwen2.5-0.5b"},
        workload=workload(response_len=100, max_response_len=400,
                          response_lengths={"sigma": 1.5}))))
    assert any("response_lengths ignored: dpo has no generation" in n for n in s.notes)
    assert s.summary()["workload"]["response_lengths"] is None


def test_distribution_is_hashable_and_holds_tuples():
    dist = LengthDistribution(shape="file", cap=10, values=(1, 2, 3), file="x.txt")
    assert hash(dist) == hash(LengthDistribution(shape="file", cap=10, values=(1, 2, 3),
                                                 file="x.txt"))
    assert dist.describe(3) == {"shape": "file", "file": "x.txt", "mean": 2.0, "p50": 2,
                                     "p90": 3, "p99": 3, "max": 3, "cap": 10,
                                     "clipped_fraction": 0.0}


def test_validate_shows_the_distribution(cli, write):
    path = write("s.yaml", grpo_scenario(workload=workload(response_len=1000,
                                                           max_response_len=8000)))
    result = cli("validate", str(path))
    assert result.exit_code == 0, result.output
    assert "response lengths: lognormal σ 1.0 — mean 1,000, p50 " in result.stdout
    assert "at the cap 8,000" in result.stdout
    described = json.loads(cli("validate", str(path), "--json").stdout)
    got = described["resolved"]["workload"]["response_lengths"]
    assert got["shape"] == "lognormal" and got["mean"] == pytest.approx(1000, rel=0.005)
    assert {"p50", "p90", "p99", "max", "clipped_fraction"} <= set(got)


def test_validate_rejects_bad_lengths_with_one_line(cli, write):
    path = write("s.yaml", grpo_scenario(workload=workload(
        max_response_len=4096, response_lengths={"p50": 900, "p90": 800})))
    assert_bad_input(cli("validate", str(path)), "field 'workload.response_lengths.p90'",
                     "quantiles must increase")
    write("l.txt", "")
    path = write("s.yaml", grpo_scenario(workload=workload(response_lengths={"file": "l.txt"})))
    assert_bad_input(cli("validate", str(path)), "field 'workload.response_lengths.file'")
