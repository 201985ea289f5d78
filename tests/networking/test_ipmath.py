import pytest

from networking import ipmath

A = ipmath.to_int


def test_merge_joins_overlapping_and_adjacent_intervals():
    assert ipmath.merge([(10, 12), (1, 3), (4, 5), (11, 20), (30, 30)]) == [
        (1, 5),
        (10, 20),
        (30, 30),
    ]


@pytest.mark.parametrize(
    ("value", "expected"), [(0, 0), (1, 6), (5, 6), (6, 6), (10, 13), (12, 13), (13, 13)]
)
def test_skip_jumps_over_every_interval_it_lands_in(value, expected):
    assert ipmath.skip(value, [(1, 5), (7, 9), (10, 12)]) == (
        expected if value not in (7, 8, 9) else 10
    )


def test_skip_chains_through_adjacent_intervals():
    assert ipmath.skip(1, [(1, 5), (6, 9)]) == 10


@pytest.mark.parametrize(
    ("first", "last", "cidrs"),
    [
        ("10.0.0.1", "10.0.0.1", ["10.0.0.1/32"]),
        ("10.0.0.0", "10.0.0.255", ["10.0.0.0/24"]),
        ("10.0.0.1", "10.0.0.6", ["10.0.0.1/32", "10.0.0.2/31", "10.0.0.4/31", "10.0.0.6/32"]),
        ("10.0.0.254", "10.0.1.1", ["10.0.0.254/31", "10.0.1.0/31"]),
    ],
)
def test_intervals_become_the_fewest_cidrs(first, last, cidrs):
    assert ipmath.to_cidrs([(A(first), A(last))]) == cidrs


@pytest.mark.parametrize(
    ("text", "interval"),
    [
        ("10.0.0.5", ("10.0.0.5", "10.0.0.5")),
        (" 10.0.0.10 - 10.0.0.20 ", ("10.0.0.10", "10.0.0.20")),
        ("10.0.0.16/28", ("10.0.0.16", "10.0.0.31")),
        ("10.0.0.7/32", ("10.0.0.7", "10.0.0.7")),
    ],
)
def test_exclusions_are_addresses_ranges_or_cidrs(text, interval):
    assert ipmath.parse_exclusion(text) == (A(interval[0]), A(interval[1]))


@pytest.mark.parametrize("text", ["10.0.0.300", "10.0.0.9-10.0.0.2", "nonsense", "10.0.0.0/33"])
def test_bad_exclusions_raise(text):
    with pytest.raises(ValueError, match="."):
        ipmath.parse_exclusion(text)


def test_size_and_clip_count_addresses_once():
    assert ipmath.size([(1, 5), (3, 8)]) == 8
    assert ipmath.clip([(0, 5), (8, 20)], 3, 10) == [(3, 5), (8, 10)]
