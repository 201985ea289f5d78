"""Address math over integer intervals: never one Python object per host (NetBox's lesson).

Addresses are ints (IPv4 or IPv6: a pool has one family, `version` says which when an int is
turned back into text); an interval is an inclusive (first, last) pair."""

import ipaddress
import re

LINUX_IFNAME = re.compile(r"^[^/\s:]{1,15}$")


FAMILIES = {4: ipaddress.IPv4Address, 6: ipaddress.IPv6Address}


def to_int(address, version=None):
    """An address as an int; with `version`, a ValueError for the other family."""
    parsed = ipaddress.ip_address(address.strip() if isinstance(address, str) else address)
    if version is not None and parsed.version != version:
        raise ValueError(f"{address} is not an IPv{version} address")
    return int(parsed)


def to_str(value, version=4):
    return str(FAMILIES[version](value))


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


def to_cidrs(intervals, version=4):
    """The smallest list of CIDRs covering the intervals (Whereabouts' `exclude` format)."""
    family = FAMILIES[version]
    cidrs = []
    for first, last in merge(intervals):
        cidrs += [
            str(net) for net in ipaddress.summarize_address_range(family(first), family(last))
        ]
    return cidrs


def parse_exclusion(text, version=4, *, strict=False):
    """'10.0.0.5', '10.0.0.10-10.0.0.20' or '10.0.0.0/28' (or the same in IPv6) as an
    interval; ValueError if not, or if not of the `version` family. `strict` (a pool being
    saved) refuses a network with host bits set; pools saved before that was refused keep
    excluding the whole network."""
    text = text.strip()
    if "/" in text:
        net = ipaddress.ip_network(text, strict=False)
        if strict and net.network_address != ipaddress.ip_address(text.split("/", 1)[0]):
            raise ValueError(
                f"{text} has host bits set: the network is {net} ({net.network_address} to "
                f"{net.broadcast_address}); write that, or a range such as A-B"
            )
        if net.version != version:
            raise ValueError(f"{text} is not an IPv{version} network")
        return int(net.network_address), int(net.broadcast_address)
    if "-" in text:
        first, last = (to_int(part, version) for part in text.split("-", 1))
        if last < first:
            raise ValueError(f"'{text}' ends before it starts")
        return first, last
    value = to_int(text, version)
    return value, value


def format_interval(interval, version=4):
    first, last = interval
    if first == last:
        return to_str(first, version)
    return f"{to_str(first, version)}-{to_str(last, version)}"
