"""Reading a log on from where the last read ended, by the container runtime's own stamps."""

import pytest

from k8s_adapters.pods import LogCursor, lines_after

S1 = "2026-12-06T10:00:01.000000100Z"
S2 = "2026-12-06T10:00:01.5Z"  # a runtime may trim trailing zeros
S3 = "2026-12-06T10:00:02.000000000Z"


def stamped(*lines):
    return "".join(f"{stamp} {text}\n" for stamp, text in lines).encode()


LOG = stamped((S1, "a"), (S1, "b"), (S2, "c"), (S3, "d"))


@pytest.mark.parametrize(
    ("after", "text", "cursor"),
    [
        (None, b"a\nb\nc\nd\n", LogCursor(S3, 1)),
        (LogCursor(S1, 1), b"b\nc\nd\n", LogCursor(S3, 1)),  # two lines of one instant
        (LogCursor(S1, 2), b"c\nd\n", LogCursor(S3, 1)),
        (LogCursor(S3, 1), b"", LogCursor(S3, 1)),  # nothing new: the same cursor back
        (LogCursor("2026-12-06T10:00:01.5000Z", 1), b"d\n", LogCursor(S3, 1)),  # same instant
    ],
)
def test_a_read_returns_exactly_the_lines_after_its_cursor(after, text, cursor):
    assert lines_after(LOG, after) == (text, cursor)


def test_a_line_sharing_the_last_lines_instant_but_written_later_is_not_lost():
    first, cursor = lines_after(stamped((S1, "a")), None)
    again, cursor = lines_after(stamped((S1, "a"), (S1, "b")), cursor)
    assert (first, again, cursor) == (b"a\n", b"b\n", LogCursor(S1, 2))


def test_a_last_line_without_its_newline_waits_for_the_next_read():
    text, cursor = lines_after(stamped((S1, "a")) + f"{S2} half a li".encode(), None)
    assert (text, cursor) == (b"a\n", LogCursor(S1, 1))
    text, cursor = lines_after(stamped((S1, "a"), (S2, "half a line")), cursor)
    assert (text, cursor) == (b"half a line\n", LogCursor(S2, 1))


def test_lines_without_a_stamp_show_on_a_first_read_only():
    fixed = b"no log configured for this pod\n"
    assert lines_after(fixed, None) == (fixed, None)
    assert lines_after(fixed, LogCursor(S1, 1)) == (b"", LogCursor(S1, 1))


@pytest.mark.parametrize(
    "text",
    [
        "",
        "x",
        f"{S1}",
        f"{S1}/",
        f"{S1}/-1",
        f"{S1}/1/2",
        "2026-12-06T10:00:01Z/1234567890",
        "2026-12-06 10:00:01Z/1",
        f" {S1}/1",
        "²026-12-06T10:00:01Z/1",
    ],
)
def test_only_a_cursor_a_read_gave_is_taken(text):
    assert LogCursor.parse(text) is None


def test_a_cursor_goes_back_and_forth_as_text_and_reads_on_from_its_whole_second():
    cursor = LogCursor(S1, 3)
    assert LogCursor.parse(str(cursor)) == cursor
    assert cursor.since_time == "2026-12-06T10:00:01Z"


def test_past_a_second_that_holds_more_than_a_read_the_next_read_starts_at_the_next_second():
    """Reading on from within such a second would ask for it again, and get the same read."""
    past = LogCursor(S1, 3).next_second()
    assert past == LogCursor("2026-12-06T10:00:02.000000000Z", 0)
    assert past.since_time == "2026-12-06T10:00:02Z"  # the read asks for the next second on
    assert lines_after(stamped((S3, "d"), (S3, "e")), past) == (b"d\ne\n", LogCursor(S3, 2))
    assert LogCursor("2026-12-31T23:59:59.5Z", 1).next_second().since_time == (
        "2027-01-01T00:00:00Z"
    )


@pytest.mark.parametrize("text", ["2026-99-99T99:99:99Z/1", "2026-02-30T10:00:00Z/1"])
def test_a_cursor_at_a_time_that_does_not_exist_is_refused(text):
    assert LogCursor.parse(text) is None
