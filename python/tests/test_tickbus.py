"""The Python package against real recordings: a day replayed by `tickbus exchange` and recorded
by `tickbus record`, read into numpy and Arrow and compared with `tickbus journal inspect`, with
the ITCH file it came from, and with `tickbus journal export --parquet` read back by pyarrow and
DuckDB.

The `tickbus` binary: $TICKBUS_BIN, else target/debug/tickbus (tools/test.sh builds it first).
"""

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tickbus

ROOT = Path(__file__).resolve().parents[2]
BIN = os.environ.get("TICKBUS_BIN", str(ROOT / "target" / "debug" / "tickbus"))
# Fields the exchange stamps when it publishes (and the ITCH file knows nothing of).
STAMPED = {"stream_id", "sequence", "publish_tsc", "flags"}


@pytest.fixture(scope="module")
def day(tmp_path_factory):
    """An ITCH day, the exchange replaying it with a trader attached, and a recorder on its
    market data; returns (itch file, journal folder, inspect report)."""
    tmp = tmp_path_factory.mktemp("day")
    tag = f"tickbus-py-{os.getpid()}"
    env = dict(os.environ, TICKBUS_HUGEPAGE_DIR=f"/dev/hugepages/{tag}", TICKBUS_SHM_DIR=f"/dev/shm/{tag}")
    itch = tmp / "day.itch"
    journal = tmp / "journal"
    run = lambda *a: subprocess.run([BIN, *a], env=env, check=True, capture_output=True, text=True, timeout=120)
    run("itch", "generate", "--seed", "7", "--stocks", "6", "--messages", "20000", "--itch", str(itch))
    procs = []
    try:
        rec = subprocess.Popen([BIN, "record", "--ring", "md", "--journal", str(journal), "--json"], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        procs.append(rec)
        ex = subprocess.Popen([BIN, "exchange", "--itch", str(itch), "--rate", "50000", "--json"], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        procs.append(ex)
        # The exchange replays once a trader attaches: the recorder attaches first.
        deadline = time.monotonic() + 60
        line = ""
        while "recording" not in line:
            line = rec.stderr.readline()
            assert line or time.monotonic() < deadline, "the recorder never attached"
            assert time.monotonic() < deadline, "the recorder never attached"
        trader = subprocess.run([BIN, "trader", "--json"], env=env, capture_output=True, text=True, timeout=120)
        assert trader.returncode == 0, trader.stderr
        ex_out, ex_err = ex.communicate(timeout=120)
        assert ex.returncode == 0, ex_err
        published = json.loads(ex_out)["md"]["published"]
        # A recorder records until stopped (SIGTERM, as a desk's supervisor stops it): once its
        # journal holds everything the exchange published.
        deadline = time.monotonic() + 60
        while json.loads(run("journal", "inspect", str(journal), "--json").stdout)["messages"] < published:
            assert time.monotonic() < deadline, "the journal never held every message published"
            time.sleep(0.2)
        rec.terminate()
        rec_out, rec_err = rec.communicate(timeout=60)
        assert rec.returncode == 0, rec_err
        inspect = json.loads(run("journal", "inspect", str(journal), "--json").stdout)
        yield itch, journal, inspect, published, run
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        shutil.rmtree(f"/dev/hugepages/{tag}", ignore_errors=True)
        shutil.rmtree(f"/dev/shm/{tag}", ignore_errors=True)


def test_layouts_are_the_rust_structs():
    q = tickbus.dtype("quote")
    assert q.itemsize == 80
    assert q.fields["instrument_id"][1] == 32 and q.fields["bid_px"][1] == 40
    assert q.fields["bid_px"][0] == np.dtype("<i8")
    assert tickbus.dtype("book_snapshot").fields["ask_orders_9"][0] == np.dtype("<u4")
    assert set(tickbus.layouts()) >= {"quote", "order_add", "new_order", "exec_fill", "exec_reject"}


def test_the_journal_reads_into_numpy_with_the_exact_count(day):
    itch, journal, inspect, published, _ = day
    d = tickbus.read_journal(journal)
    assert d.total() == inspect["messages"] == published, (d.total(), inspect, published)
    assert len(d.gaps) == inspect["gaps"] == 0
    assert d.undecoded == 0
    positions = np.sort(np.concatenate([a["position"] for a in d.values()]))
    assert positions[0] == inspect["first_sequence"] and positions[-1] == inspect["last_sequence"]
    assert np.array_equal(positions, np.arange(positions[0], positions[-1] + 1)), "every position once"
    for name, a in d.items():
        assert np.all(a["msg_type"] == tickbus.layouts()[name]["type"])
        assert np.all(a["length"] == tickbus.layouts()[name]["size"])
        assert np.array_equal(a["sequence"], a["position"]), "the header's sequence is the position"
        assert np.all(np.diff(a["receive_tsc"].astype(np.int64)) >= 0)
        # A view of the block the reader filled (lent through the buffer protocol), not a copy.
        assert type(getattr(a.base, "obj", a.base)).__name__ == "Records" and not a.flags.writeable


def test_the_journal_holds_what_the_itch_file_normalises_to(day):
    itch, journal, _, _, _ = day
    recorded = tickbus.read_journal(journal)
    source = tickbus.read_market_data(itch)
    assert source.stream_id is None and recorded.total() == source.total()
    for name, a in recorded.items():
        s = source[name]
        # Both hold each message at its stream position: the exchange publishes the normalised
        # day in order from position 0.
        s = s[np.searchsorted(s["position"], a["position"])]
        for field in tickbus.dtype(name).names:
            if field not in STAMPED:
                assert np.array_equal(a[field], s[field]), (name, field)


def test_arrow_and_pandas_carry_every_field(day):
    _, journal, _, _, _ = day
    d = tickbus.read_journal(journal)
    name = max(d, key=lambda n: len(d[n]))
    t = tickbus.to_arrow(d[name])
    assert t.num_rows == len(d[name])
    assert t.schema.field("receive_time").type == pa.timestamp("ns", tz="UTC")
    assert t.column("position").to_numpy().tolist() == d[name]["position"].tolist()
    f = tickbus.to_pandas(d[name])
    assert len(f) == len(d[name]) and str(f["receive_time"].dt.tz) == "UTC"


def test_the_parquet_export_reads_back_in_pyarrow_and_duckdb(day, tmp_path):
    _, journal, _, _, run = day
    out = tmp_path / "parquet"
    report = json.loads(run("journal", "export", str(journal), "--parquet", str(out), "--json").stdout)
    d = tickbus.read_journal(journal)
    files = {Path(f["file"]).stem: f["rows"] for f in report["files"]}
    assert files == {**{n: len(a) for n, a in d.items()}, "gaps": 0}
    for name, a in d.items():
        t = pq.read_table(out / f"{name}.parquet")
        for field in tickbus.dtype(name).names:
            col = t.column(field).to_numpy()
            if a[field].dtype.kind == "S":
                col = np.array(col.tolist(), dtype=a[field].dtype)
            assert np.array_equal(col, a[field]), (name, field)
        assert np.array_equal(t.column("receive_time").to_numpy().astype("datetime64[ns]"), a["receive_time"])
        con = duckdb.connect()
        n, lo, hi = con.execute(
            f"select count(*), min(position), max(position) from '{out / (name + '.parquet')}'").fetchone()
        con.close()
        assert (n, lo, hi) == (len(a), a["position"].min(), a["position"].max())


def test_text_fields_reach_arrow_whole():
    rejects = np.zeros(2, dtype=tickbus.dtype("exec_reject"))
    rejects["text"][0] = b"price band"
    rejects["text"][1] = b"x" * 32
    t = tickbus.to_arrow(rejects)
    assert t.schema.field("text").type == pa.binary(32)
    assert t.column("text")[0].as_py() == b"price band" + b"\0" * 22
    assert t.column("text")[1].as_py() == b"x" * 32


def test_an_infinite_wait_is_a_value_error():
    with pytest.raises(ValueError, match="finite"):
        tickbus.Subscriber("shm:never", wait_secs=float("inf"))


def test_a_missing_journal_is_an_error_naming_it(tmp_path):
    with pytest.raises(OSError, match="nope"):
        tickbus.read_journal(tmp_path / "nope")


def test_a_bad_uri_is_an_error_naming_what_is_wrong():
    with pytest.raises(ValueError, match="slots"):
        tickbus.Subscriber("shm:x?slots=3")
