"""experiments/directed-attention/conversions.py: the conversion arm's declared rule (T's STS-B against shared's, to
4 decimals, on the same healing budget, precision and CPU), on made-up builds."""

from conftest import experiment_script

conversions = experiment_script("directed-attention/conversions.py")


def _build(sts_b, steps=2860, precision="bf16", cpu="AMD EPYC"):
    return {"sts_b": sts_b, "heal_steps": steps, "heal_precision": precision, "cpu": cpu, "parameters": 1000,
            "heal_minutes": 30.0}


def test_a_type_reaches_shareds_sts_b_when_equal_to_four_decimals_or_above():
    verdicts = conversions.judge({"shared": _build(0.86071), "shared_lowrank_query": _build(0.86068),
                                  "shared_head_query": _build(0.8594), "shared_kv": _build(0.87)})
    assert verdicts == {"shared_lowrank_query": "reaches shared's STS-B", "shared_head_query": "below shared's STS-B",
                        "shared_kv": "reaches shared's STS-B"}


def test_builds_that_differ_in_budget_precision_or_cpu_or_lack_a_baseline_are_not_judged():
    verdicts = conversions.judge({"shared": _build(0.85), "shared_kv": _build(0.87, steps=1000),
                                  "shared_head_query": _build(0.87, precision="fp32"),
                                  "shared_lowrank_query": _build(0.87, cpu="Intel Xeon")})
    assert all(v.startswith("not judged") for v in verdicts.values()) and len(verdicts) == 3
    assert conversions.judge({"shared_kv": _build(0.87)}) == {"shared_kv": "not judged: no shared build"}


def test_the_table_gives_each_builds_difference_to_shared():
    builds = {"shared": _build(0.8500), "shared_kv": _build(0.8612)}
    text = conversions.markdown(builds, conversions.judge(builds))
    assert "| `shared_kv` | 1,000 | 2,860 steps, 30.0 min, bf16, AMD EPYC | 0.8612 | +0.0112 | reaches shared's STS-B |" \
        in text
