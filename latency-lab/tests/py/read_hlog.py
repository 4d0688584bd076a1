"""Reads a latency.hlog with HdrHistogram's own Python log reader (the `hdrhistogram` package,
an implementation independent of the Rust crate that wrote it) and prints one JSON line per
interval: tag, start and end (ms since the log's base time), total count and percentiles."""
import json
import math
import sys

from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogReader


def at(h, q):
    """The value at quantile q by the Rust crate's rank rule, ceil(q * count); the Python package
    rounds half up instead, and the two ranks pick different values where a tail is sparse
    (seen: 23.82 ms against 23.90 ms at a backlogged row's p99). Asking for the percentile that
    is exactly that rank makes both read the same sample, so what is compared is the log's
    counts, not two rank conventions."""
    n = h.get_total_count()
    if n == 0:
        return 0
    rank = max(1, math.ceil(q * n))
    return h.get_value_at_percentile(100.0 * rank / n)


reader = HistogramLogReader(sys.argv[1], HdrHistogram(1, 60_000_000_000, 3))
while True:
    h = reader.get_next_interval_histogram()
    if h is None:
        break
    print(json.dumps({
        "tag": h.get_tag(),
        "start_ms": h.get_start_time_stamp(),
        "end_ms": h.get_end_time_stamp(),
        "count": h.get_total_count(),
        "p50": at(h, 0.50),
        "p99": at(h, 0.99),
    }))
