"""Reads a latency.hlog with HdrHistogram's own Python log reader (the `hdrhistogram` package,
an implementation independent of the Rust crate that wrote it) and prints one JSON line per
interval: tag, start and end (ms since the log's base time), total count and percentiles."""
import json
import sys

from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogReader

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
        "p50": h.get_value_at_percentile(50),
        "p99": h.get_value_at_percentile(99),
    }))
