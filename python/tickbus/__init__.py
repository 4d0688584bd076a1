"""tickbus from Python: recorded days as numpy, Arrow and pandas; a ring subscriber for research.

    import tickbus
    day = tickbus.read_journal("journals/md")          # a folder `tickbus record` wrote
    quotes = day["quote"]                              # numpy structured array, one row a message
    quotes["bid_px"], quotes["receive_time"]           # columns by field name
    table = tickbus.to_arrow(quotes)                   # pyarrow.Table (needs pyarrow)
    frame = tickbus.to_pandas(quotes)                  # pandas.DataFrame (needs pandas)

    md = tickbus.read_market_data("day.itch")          # ITCH 5.0 or a MoldUDP64 capture, normalised

    sub = tickbus.Subscriber("shm:md")                 # research polling, not the hot path
    msg = sub.poll()                                   # (position, bytes), ("gap", a, b) or None

Every message type becomes one structured array whose dtype is the Rust struct's own layout
(offsets from the compiler, see `layouts()`) followed by three more columns: `position`
(stream position), `receive_tsc` (the recorder's TSC) and `receive_time` (UTC, datetime64[ns]).
The reader fills one block per type (one copy out of the journal's mapped files) and the array
is a view of that block, lent through the buffer protocol, not a further copy (read-only;
`.copy()` it to change it). Header fields come first: msg_type, version, length, stream_id, flags, sequence,
publish_tsc.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from . import _tickbus
from ._tickbus import Subscriber, layouts

__all__ = [
    "Day",
    "Subscriber",
    "dtype",
    "layouts",
    "read_journal",
    "read_market_data",
    "to_arrow",
    "to_pandas",
]

_LAYOUTS = layouts()


def dtype(type_name: str) -> np.dtype:
    """The numpy dtype of one message type (its struct's layout, padding left out)."""
    lay = _LAYOUTS[type_name]
    names, offsets, formats = zip(*lay["fields"])
    return np.dtype({"names": list(names), "formats": list(formats), "offsets": list(offsets),
                     "itemsize": lay["size"]})


_EXTRA = [("position", "<u8"), ("receive_tsc", "<u8"), ("receive_time", "<M8[ns]")]


def _record_dtype(type_name: str) -> np.dtype:
    """A message followed by its position, receive TSC and receive time (the reader's records)."""
    lay = _LAYOUTS[type_name]
    names, offsets, formats = (list(x) for x in zip(*lay["fields"]))
    size = lay["size"]
    for k, (n, f) in enumerate(_EXTRA):
        names.append(n)
        formats.append(f)
        offsets.append(size + 8 * k)
    return np.dtype({"names": names, "formats": formats, "offsets": offsets, "itemsize": size + 24})


class Day(dict):
    """A recording by message type name: {"quote": array, "order_add": array, ...}.

    Attributes: `stream_id` (None for ITCH files and captures), `gaps` (a structured array of
    count, position, receive_tsc, receive_time), `undecoded` (records that were no tickbus
    message).
    """

    stream_id: Optional[int]
    gaps: np.ndarray
    undecoded: int

    def total(self) -> int:
        """Messages of every type."""
        return sum(len(v) for v in self.values())


def _day(raw) -> Day:
    day = Day()
    day.stream_id = raw["stream_id"]
    day.undecoded = raw["undecoded"]
    for name, block in raw["messages"].items():
        day[name] = np.frombuffer(block, dtype=_record_dtype(name))
    day.gaps = np.frombuffer(raw["gaps"], dtype=[("count", "<u8")] + _EXTRA)
    return day


def read_journal(path, from_sequence: Optional[int] = None) -> Day:
    """Reads a journal folder (every record checked, in stream order) by message type."""
    return _day(_tickbus.read_journal(str(path), from_sequence))


def read_market_data(path, port: Optional[int] = None) -> Day:
    """Reads an ITCH 5.0 file or a MoldUDP64 capture, normalised as `tickbus feed` publishes it.

    `receive_time` is the source's own time: ITCH's ns since midnight (exchange time, so the
    dates are 1970-01-01), a capture's packet time."""
    return _day(_tickbus.read_market_data(str(path), port))


def to_arrow(array: np.ndarray):
    """A pyarrow.Table of a structured array, a column per field (bytes fields as binary)."""
    import pyarrow as pa

    cols = {}
    for name in array.dtype.names:
        col = array[name]
        if col.dtype.kind == "M":
            cols[name] = pa.array(col, type=pa.timestamp("ns", tz="UTC"))
        elif col.dtype.kind == "S":
            # Fixed-size binary from the raw bytes: tolist() would strip trailing zero bytes.
            n = col.dtype.itemsize
            raw = np.ascontiguousarray(col).view(np.uint8)
            cols[name] = pa.FixedSizeBinaryArray.from_buffers(pa.binary(n), len(col), [None, pa.py_buffer(raw)])
        else:
            cols[name] = pa.array(np.ascontiguousarray(col))
    return pa.table(cols)


def to_pandas(array: np.ndarray):
    """A pandas.DataFrame of a structured array (through Arrow: UTC times, binary text)."""
    return to_arrow(array).to_pandas()
