"""A replay's records and sums: nearest-rank percentiles, and one set of records both replay
paths share (``replay.run`` re-exports them, ``replay.count`` counts through them)."""

from kvtool.replay import count, run, tally


def test_percentiles_are_nearest_rank_with_the_mean() -> None:
    assert tally.percentiles([]) == {}
    values = [float(v) for v in range(1, 101)]
    assert tally.percentiles(values) == {"p50": 50.0, "p90": 90.0, "p99": 99.0, "mean": 50.5}
    assert tally.percentiles([3.0]) == {"p50": 3.0, "p90": 3.0, "p99": 3.0, "mean": 3.0}


def test_both_replay_paths_count_through_the_same_records() -> None:
    assert run.Tally is tally.Tally is count.Tally
    assert run.ReplayConfig is tally.ReplayConfig is count.ReplayConfig
    assert run.ReplayResult is tally.ReplayResult
    assert tally.INDEX == {"T1": 0, "T2": 1, "T3": 2, "T4": 3}
