// The C++ side of the cross-language tests, through tickbus.hpp. Modes:
//   pubsub pub URI N       sends N quotes (fields from their index), retrying while the reliable
//                          ring is full, then stays until stdin closes (its ring stays served)
//   pubsub sub URI N       receives N quotes, checks every field and that they come in order
//   pubsub selftest NAME [ITCH]  the wrapper's own behaviour in one process (RAII, exceptions,
//                          claims, a stat snapshot, the ITCH file normalised)
// Built with -fsanitize=address,undefined by tests/c_abi.rs. Every loop is bounded in time.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>

#include <unistd.h>

#include "tickbus.hpp"

using clock_type = std::chrono::steady_clock;

// The quote with index k: the Rust side builds the same one.
static tb_quote quote(std::uint64_t k) {
  auto q = tickbus::make<tb_quote>();
  q.instrument_id = static_cast<std::uint32_t>(k);
  q.bid_px = static_cast<std::int64_t>(k) * 3 - 7;
  q.bid_qty = k ^ 0xabcdefULL;
  q.ask_px = -static_cast<std::int64_t>(k) * 5;
  q.ask_qty = k * k;
  q.exchange_ts_ns = 34200000000000ULL + k;
  return q;
}

static bool same_fields(const tb_quote& a, const tb_quote& b) {
  return a.instrument_id == b.instrument_id && a.bid_px == b.bid_px && a.bid_qty == b.bid_qty &&
         a.ask_px == b.ask_px && a.ask_qty == b.ask_qty && a.exchange_ts_ns == b.exchange_ts_ns &&
         a.header.msg_type == b.header.msg_type && a.header.length == b.header.length;
}

static int pub(const std::string& uri, std::uint64_t n) {
  tickbus::publisher p(uri, tickbus::open_options().wait_ms(20000));
  auto deadline = clock_type::now() + std::chrono::seconds(60);
  for (std::uint64_t k = 0; k < n; k++) {
    auto q = quote(k);
    for (;;) {
      tickbus::status s = p.send(q);
      if (s.ok()) break;
      if (!s.retry_helps() || clock_type::now() > deadline) {
        std::cerr << "pub: message " << k << ": " << tb_status_name(s.code()) << ": " << s.message() << "\n";
        return 1;
      }
    }
    if (q.header.sequence != k) {
      std::cerr << "pub: message " << k << " was stamped sequence " << q.header.sequence << "\n";
      return 1;
    }
  }
  std::printf("sent %llu\n", static_cast<unsigned long long>(n));
  std::fflush(stdout);
  std::string line;
  std::getline(std::cin, line);  // until the parent closes stdin
  return 0;
}

static int sub(const std::string& uri, std::uint64_t n) {
  tickbus::subscriber s(uri, tickbus::open_options().wait_ms(20000).start_oldest(true));
  auto deadline = clock_type::now() + std::chrono::seconds(60);
  std::uint64_t k = 0;
  tb_quote got;
  tb_recv r;
  while (k < n) {
    tickbus::status st = s.recv(got, r);
    if (!st.ok()) {
      std::cerr << "sub: " << tb_status_name(st.code()) << ": " << st.message() << "\n";
      return 1;
    }
    if (r.kind == TB_RECV_GAP) {
      std::cerr << "sub: gap from " << r.position << " to " << r.resumed_at << "\n";
      return 1;
    }
    if (r.kind == TB_RECV_MESSAGE) {
      if (r.position != k || !same_fields(got, quote(k)) || got.header.sequence != k) {
        std::cerr << "sub: message " << k << " at position " << r.position << " differs\n";
        return 1;
      }
      k++;
    } else if (clock_type::now() > deadline) {
      std::cerr << "sub: only " << k << " of " << n << " messages in 60 s\n";
      return 1;
    }
  }
  auto info = s.info();
  std::printf("received %llu missed %llu\n", static_cast<unsigned long long>(k),
              static_cast<unsigned long long>(info.missed));
  return 0;
}

static int failures = 0;
#define CHECK(cond)                                                       \
  do {                                                                    \
    if (!(cond)) {                                                        \
      std::cerr << __FILE__ << ":" << __LINE__ << ": " #cond " failed\n"; \
      failures++;                                                         \
    }                                                                     \
  } while (0)

static int selftest(const std::string& name, const std::string& itch) {
  const std::string uri = "shm:" + name + "?reliable&slots=8&payload=128";
  // Opening a bad URI throws with its code and the library's message.
  try {
    tickbus::publisher bad("shm:x?slots=3");
    CHECK(false);
  } catch (const tickbus::error& e) {
    CHECK(e.code() == TB_ERROR_BAD_URI);
    CHECK(std::strstr(e.what(), "slots") != nullptr);
    CHECK(!e.retry_helps());
  }
  tickbus::publisher p(uri);
  tickbus::subscriber s(uri);
  auto info = p.info();
  CHECK(info.reliable && info.max_payload >= 128 && info.position == 0);
  // Typed send and recv.
  auto q = quote(5);
  std::uint64_t pos = 99;
  CHECK(p.send(q, &pos).ok() && pos == 0 && q.header.sequence == 0);
  tb_quote got;
  tb_recv r;
  CHECK(s.recv(got, r).ok() && r.kind == TB_RECV_MESSAGE && same_fields(got, quote(5)));
  // A message of another size: recv<T> leaves it, poll takes it, decode<T> refuses it.
  auto o = tickbus::make<tb_new_order>();
  o.client_order_id = 77;
  CHECK(p.send(o).ok());
  tickbus::status st = s.recv(got, r);
  CHECK(st.code() == TB_ERROR_BUFFER_SIZE && r.len == sizeof(tb_new_order) && !st.message().empty());
  CHECK(s.poll(r).ok() && r.kind == TB_RECV_MESSAGE);
  CHECK(!tickbus::decode<tb_quote>(r).has_value());
  auto no = tickbus::decode<tb_new_order>(r);
  CHECK(no.has_value() && no->client_order_id == 77);
  // A claim destroyed uncommitted is aborted; a committed one is delivered.
  {
    tickbus::claim c = p.try_claim(16);
    CHECK(c.ok() && c.store_word(0, 1).ok());
  }
  {
    tickbus::claim c = p.try_claim(16);
    CHECK(c.ok() && c.position() == 3);
    CHECK(c.store_word(0, 0xfeed).ok() && c.store_word(1, 0xbeef).ok() && c.commit().ok());
  }
  CHECK(s.poll(r).ok() && r.kind == TB_RECV_MESSAGE && r.position == 3 && r.len == 16);
  std::uint64_t w[2] = {0, 0};
  if (r.len == 16) std::memcpy(w, r.data, 16);
  CHECK(w[0] == 0xfeed && w[1] == 0xbeef);
  CHECK(s.info().aborted == 1);
  // The 8-slot ring fills: send reports it without throwing, and retry helps once the reader
  // has taken messages.
  int sent = 0;
  tickbus::status last = TB_OK;
  for (int k = 0; k < 20; k++) {
    auto x = quote(static_cast<std::uint64_t>(k));
    last = p.send(x);
    if (!last.ok()) break;
    sent++;
  }
  CHECK(sent >= 1 && sent <= 8 && last.code() == TB_ERROR_FULL && last.retry_helps());
  // A failed claim keeps its code through a move.
  {
    tickbus::claim c = p.try_claim(16);
    CHECK(!c.ok() && c.code() == TB_ERROR_FULL);
    tickbus::claim moved = std::move(c);
    CHECK(!moved.ok() && moved.code() == TB_ERROR_FULL);
  }
  for (int k = 0; k < sent; k++) {
    CHECK(s.recv(got, r).ok() && r.kind == TB_RECV_MESSAGE && same_fields(got, quote(static_cast<std::uint64_t>(k))));
  }
  auto again = quote(99);
  CHECK(p.send(again).ok());
  // Moved-from handles are empty; destroy of an empty handle is fine; move-assigning over an
  // open handle closes the old stream.
  tickbus::publisher p2 = std::move(p);
  CHECK(p2.native() != nullptr && p.native() == nullptr);
  {
    tickbus::publisher other("shm:" + name + "-other");
    other = tickbus::publisher("shm:" + name + "-third");
    CHECK(other.native() != nullptr);
  }
  p2.close();
  auto x = quote(1);
  CHECK(p2.send(x).code() == TB_ERROR_CLOSED);
  try {
    (void)p2.info();
    CHECK(false);
  } catch (const tickbus::error& e) {
    CHECK(e.code() == TB_ERROR_CLOSED);
  }
  // This process's streams in a stat snapshot, with the counts it made.
  {
    tickbus::stat_snapshot snap;
    int messages = tickbus::counter_index("messages");
    CHECK(messages >= 0);
    int found = 0;
    for (std::size_t k = 0; k < snap.streams(); k++) {
      tb_stat_stream st = snap.stream(k);
      if (st.pid == static_cast<std::uint64_t>(getpid()) && name == st.name && std::string(st.role) == "subscriber") {
        CHECK(st.counters[messages] >= 5);
        found++;
      }
    }
    CHECK(found == 1);
    try {
      (void)snap.stream(snap.streams());
      CHECK(false);
    } catch (const tickbus::error& e) {
      CHECK(e.code() == TB_ERROR_INVALID_ARGUMENT);
    }
  }
  // An ITCH file, normalised.
  if (!itch.empty()) {
    tickbus::market_data md(itch);
    tb_md_record r;
    std::uint64_t n = 0, adds = 0;
    while (md.next(r)) {
      CHECK(r.position == n);
      tb_header h;
      std::memcpy(&h, r.data, sizeof h);
      adds += h.msg_type == TB_MSG_ORDER_ADD;
      n++;
    }
    CHECK(n > 1000 && adds > 100);
    try {
      tickbus::market_data bad("/nonexistent/day.itch");
      CHECK(false);
    } catch (const tickbus::error& e) {
      CHECK(e.code() == TB_ERROR_OPEN && std::strstr(e.what(), "/nonexistent/day.itch") != nullptr);
    }
  }
  if (failures == 0) std::printf("selftest: ok\n");
  return failures == 0 ? 0 : 1;
}

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: pubsub pub|sub URI N | pubsub selftest NAME\n";
    return 2;
  }
  const std::string mode = argv[1];
  try {
    if (mode == "selftest") return selftest(argv[2], argc > 3 ? argv[3] : "");
    if (argc != 4) return 2;
    const std::uint64_t n = std::stoull(argv[3]);
    if (mode == "pub") return pub(argv[2], n);
    if (mode == "sub") return sub(argv[2], n);
  } catch (const tickbus::error& e) {
    std::cerr << mode << ": " << e.what() << "\n";
    return 1;
  }
  return 2;
}
