"""Address math over integer intervals: never one Python object per host (NetBox's lesson).

IPv4 addresses are ints; an interval is an inclusive (first, last) pair."""

import ipaddress
import re

LINUX_IFNAME = re.compile(r"^[^/\s:]{1,15}$")


def to_int(address):
    return int(ipaddress.IPv4Address(address))


def to_str(value):
    return str(ipaddress.IPv4Address(value))


def merge(intervals):
    """Sorted, non-overlapping, non-adjacent intervals covering the same addresses."""
    merged = []
    for first, last in sorted(intervals):
        if merged and first <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], last))
        else:
            merged.append((first, last))
    return merged


def size(intervals):
    return sum(last - first + 1 for first, last in merge(intervals))


def clip(intervals, first, last):
    """The parts of the intervals inside [first, last]."""
    return [(max(a, first), min(b, last)) for a, b in merge(intervals) if b >= first and a <= last]


def skip(value, intervals):
    """The first address >= value outside every interval (intervals merged and sorted)."""
    for first, last in intervals:
        if first <= value <= last:
            value = last + 1
        elif first > value:
            break
    return value


def overlaps(a, b):
    return a[0] <= b[1] and b[0] <= a[1]


def to_cidrs(intervals):
    """The smallest list of CIDRs covering the intervals (Whereabouts' `exclude` format)."""
    cidrs = []
    for first, last in merge(intervals):
        cidrs += [
            str(net)
            for net in ipaddress.summarize_address_range(
                ipaddress.IPv4Address(first), ipaddress.IPv4Address(last)
            )
        ]
    return cidrs


def parse_exclusion(text):
    """'10.0.0.5', '10.0.0.10-10.0.0.20' or '10.0.0.0/28' as an interval; ValueError if not."""
    text = text.strip()
    if "/" in text:
        net = ipaddress.IPv4Network(text, strict=False)
        return int(net.network_address), int(net.broadcast_address)
    if "-" in text:
        first, last = (to_int(part.strip()) for part in text.split("-", 1))
        if last < first:
            raise ValueError(f"'{text}' ends before it starts")
        return first, last
    value = to_int(text)
    return value, value


def format_interval(interval):
    first, last = interval
    return to_str(first) if first == last else f"{to_str(first)}-{to_str(last)}"
