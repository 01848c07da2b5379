"""``hpc.map_partitions`` on the real local pool: same results as pandas, partition counts, bytes shipped, errors."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from eugo_lab import hpc
from eugo_lab.hpc.partitions import (
    MAX_PARTITION_BYTES,
    MIN_PARTITION_ROWS,
    PARTITIONS_PER_WORKER,
    auto_partitions,
    split,
)


def _readings(rows: int, seed: int = 3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    index = rng.permutation(rows) * 7  # neither sorted nor 0..n-1: order must come from the frame, not the labels
    return pd.DataFrame({"meter": rng.choice([f"m{i}" for i in range(12)], rows),
                         "kw": rng.gamma(2.0, 1.5, rows), "volts": rng.normal(230, 4, rows)}, index=index)


def _power(part: pd.DataFrame) -> pd.DataFrame:
    return part.assign(va=part["kw"] * part["volts"], high=part["kw"] > 3)


def _partial(part: pd.DataFrame) -> pd.DataFrame:
    return part.groupby("meter").agg(n=("kw", "size"), total=("kw", "sum"), peak=("kw", "max"))


def _merge(parts: list[pd.DataFrame]) -> pd.DataFrame:
    return pd.concat(parts).groupby(level=0).agg({"n": "sum", "total": "sum", "peak": "max"})


def _median(part: pd.DataFrame) -> pd.DataFrame:
    return part.groupby("meter")[["kw", "volts"]].median()


def _shape(part: pd.DataFrame) -> tuple[int, int]:
    return part.shape


def _fails_on_big_kw(part: pd.DataFrame) -> int:
    if (part["kw"] > 1e6).any():
        raise ArithmeticError("a reading above 1 GW")
    return len(part)



def test_row_wise_result_equals_pandas_in_the_frames_order(local2):
    df = _readings(9_000)
    with hpc.trace() as t:
        out = hpc.map_partitions(_power, df, partitions=6)
    pd.testing.assert_frame_equal(out, _power(df))  # values, dtypes, and the (shuffled) index in its order
    assert len(t.to_dataframe()) == 6
    assert len(hpc.map_partitions(len, df, partitions=np.int64(3))) == 3  # a count computed with NumPy is a count


def test_series_in_series_out(local2):
    s = _readings(5_000)["kw"]
    out = hpc.map_partitions(lambda part: part.clip(upper=4.0) * 2, s, partitions=3)
    pd.testing.assert_series_equal(out, s.clip(upper=4.0) * 2)


def test_groupby_agg_combined_by_a_reducer_equals_pandas(local2):
    df = _readings(12_000)
    out = hpc.map_partitions(_partial, df, partitions=5, combine=_merge)
    expected = _partial(df)
    pd.testing.assert_frame_equal(out.sort_index(), expected, check_exact=False, rtol=1e-12)
    # Without the reducer each meter comes back once per partition: the counts add up, the rows do not.
    stacked = hpc.map_partitions(_partial, df, partitions=5)
    assert len(stacked) == 5 * len(expected) and stacked["n"].sum() == len(df)


def test_by_keeps_each_key_in_one_partition_so_a_median_needs_no_second_step(local2):
    df = _readings(10_000)
    parts = split(df, 4, by="meter")
    owners = {}
    for i, p in enumerate(parts):
        for key in p["meter"].unique():
            assert owners.setdefault(key, i) == i, f"{key} in partitions {owners[key]} and {i}"
        assert p.index.equals(df.index[df["meter"].isin(p["meter"].unique())])  # original row order kept
    assert sum(len(p) for p in parts) == len(df)
    sizes = [len(p) for p in parts]
    assert max(sizes) < 1.3 * len(df) / 4  # 12 keys of ~830 rows over 4 partitions: balanced to a key or so
    out = hpc.map_partitions(_median, df, partitions=4, by="meter")
    pd.testing.assert_frame_equal(out.sort_index(), _median(df))


def test_by_with_missing_keys_and_with_several_columns():
    df = _readings(3_000).assign(site=lambda d: d["meter"].str[:2].where(d["kw"] < 4))  # NaN site: its own group
    parts = split(df, 3, by="site")
    holding_nan = [i for i, p in enumerate(parts) if p["site"].isna().any()]
    assert len(holding_nan) == 1 and parts[holding_nan[0]]["site"].isna().sum() == df["site"].isna().sum()
    pairs = [set(zip(p["site"].fillna("-"), p["meter"], strict=True)) for p in split(df, 5, by=["site", "meter"])]
    assert sum(len(p) for p in pairs) == len(set().union(*pairs))  # no (site, meter) pair in two partitions
    assert len(hpc.map_partitions(len, df, partitions=5, by=["site", "meter"])) == 5


def test_results_that_are_not_frames_come_back_as_a_list_or_through_combine(local2):
    df = _readings(1_000)
    assert hpc.map_partitions(_shape, df, partitions=3) == [(333, 3), (333, 3), (334, 3)]
    assert hpc.map_partitions(len, df, partitions=4, combine=sum) == 1_000


def test_auto_picks_several_partitions_per_worker_above_the_row_floor(local2):
    rows = 4 * 2 * MIN_PARTITION_ROWS + 123
    df = _readings(rows)
    with hpc.trace() as t:
        out = hpc.map_partitions(len, df)
    assert len(out) == PARTITIONS_PER_WORKER * 2 == len(t.to_dataframe())
    assert sum(out) == rows and max(out) - min(out) <= 1
    # A small frame is not cut below the floor: 3.5 floors' worth of rows make 3 partitions.
    assert len(hpc.map_partitions(len, _readings(int(3.5 * MIN_PARTITION_ROWS)))) == 3
    assert hpc.map_partitions(len, _readings(50)) == [50]
    empty = _readings(0)
    assert hpc.map_partitions(len, empty) == [0] == hpc.map_partitions(len, empty, by="meter")  # f sees the columns


def test_auto_partition_count_rules():
    assert auto_partitions(10**6, 10**6, 2) == 2 * PARTITIONS_PER_WORKER
    assert auto_partitions(10**6, 10**6, 1) == PARTITIONS_PER_WORKER
    assert auto_partitions(MIN_PARTITION_ROWS - 1, 100, 8) == 1
    assert auto_partitions(0, 0, 4) == 1
    # Memory wins over the row floor: 20,000 wide rows of 1 GiB in all still make 1 GiB / 64 MiB partitions.
    assert auto_partitions(20_000, 1 << 30, 2) == (1 << 30) // MAX_PARTITION_BYTES
    assert auto_partitions(10, 1 << 40, 2) == 10  # never more partitions than rows


def test_each_partition_is_shipped_once(local2):
    rng = np.random.default_rng(0)
    df = pd.DataFrame(rng.random((200_000, 4)), columns=list("abcd"))  # 6.4 MB: 1.6 MB a partition, sent out of band
    nbytes = int(df.memory_usage(index=True, deep=True).sum())
    with hpc.trace() as t:
        out = hpc.map_partitions(lambda part: part.sum(), df, partitions=4, combine=lambda parts: sum(parts))
    tasks = t.to_dataframe()
    assert len(tasks) == 4
    assert nbytes <= tasks["bytes_in"].sum() < 1.05 * nbytes  # the frame once, plus pickle framing
    np.testing.assert_allclose(out.to_numpy(), df.sum().to_numpy())


@pytest.mark.parametrize("bad", [0, -3, 2.5, "many", True, None, 10_001])
def test_bad_partition_counts_name_the_value_and_the_choices(local2, bad):
    df = _readings(10_000)
    with pytest.raises(ValueError) as info:
        hpc.map_partitions(len, df, partitions=bad)
    msg = str(info.value)
    assert f"partitions={bad!r}" in msg and "'auto'" in msg and "from 1 to 10000" in msg
    if bad == 10_001:
        assert "more partitions than rows" in msg


def test_by_errors_name_the_columns_and_the_key_count(local2):
    df = _readings(2_000)
    with pytest.raises(ValueError, match=r"no column 'site'.*'meter', 'kw', 'volts'"):
        hpc.map_partitions(len, df, by="site")
    with pytest.raises(ValueError, match=r"partitions=13: more partitions than keys.*by='meter' has 12 distinct"):
        hpc.map_partitions(len, df, partitions=13, by="meter")
    with pytest.raises(ValueError, match="a Series has none"):
        hpc.map_partitions(len, df["kw"], by="meter")
    assert len(hpc.map_partitions(len, df, partitions="auto", by="meter")) == 1  # 2,000 rows: under the floor


def test_wrong_types_are_refused_before_anything_runs():
    df = _readings(100)
    with pytest.raises(TypeError, match="takes a pandas DataFrame or Series, got list; for a list of items use"):
        hpc.map_partitions(len, [1, 2, 3])
    with pytest.raises(TypeError, match="f must be a function of a DataFrame, got str"):
        hpc.map_partitions("len", df)
    with pytest.raises(TypeError, match="combine must be a callable"):
        hpc.map_partitions(len, df, combine="sum")
    with pytest.raises(ValueError, match="partitions=0"):
        hpc.map_partitions(len, df, partitions=0)
    assert not hpc.is_initialized()  # no runtime was started for calls that could not run


def test_a_failing_partition_raises_its_own_error_naming_the_partition(local2):
    df = _readings(4_000)
    df.iloc[3_500, df.columns.get_loc("kw")] = 2e6  # lands in the last of 4 partitions
    with pytest.raises(ArithmeticError, match="above 1 GW") as info:
        hpc.map_partitions(_fails_on_big_kw, df, partitions=4)
    assert "partition 3 of 4 (1000 rows)" in "\n".join(info.value.__notes__)
