// cpp_trader: the C++ twin of `tickbus trader`, through tickbus.hpp. It reads the normalised
// market data `tickbus exchange` publishes, keeps an L3 book per instrument, and when an
// instrument's best bid or offer changes sends an immediate-or-cancel order that would take it
// (sell at the new best bid, buy at the new best offer), at most --max-in-flight unanswered.
// It reads every execution report back and checks each order is answered exactly once.
//
//   cpp_trader [--md URI] [--orders URI] [--execs URI] [--qty N] [--max-in-flight N]
//
// Ends when the market data's publisher closes it and every order is answered (or
// --drain-secs passed); prints one JSON line of counts. Exit status 0 only if every order got
// exactly one report. A toy rule that exercises every hop, not a way to make money.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "tickbus.hpp"

namespace {

using steady = std::chrono::steady_clock;

// Prices, in the market data and in orders alike, are TB_PRICE_SCALE fixed point.
constexpr std::uint8_t kBuy = 1, kSell = 2, kIoc = 1, kLimit = 1;

struct Resting {
  std::uint32_t instrument;
  std::uint8_t side;
  std::int64_t price;
  std::uint64_t qty;
};

// Price levels of one instrument: price -> total quantity.
struct Book {
  std::map<std::int64_t, std::uint64_t, std::greater<std::int64_t>> bids;
  std::map<std::int64_t, std::uint64_t> asks;
};

class Books {
 public:
  // Applies one message; true if `instrument`'s best bid or offer changed.
  bool apply(const tb_recv& r, std::uint32_t& instrument) {
    tb_header h;
    std::memcpy(&h, r.data, sizeof h);
    switch (h.msg_type) {
      case TB_MSG_ORDER_ADD:
        if (auto m = tickbus::decode<tb_order_add>(r)) {
          instrument = m->instrument_id;
          return change(instrument, [&] {
            orders_[m->order_id] = Resting{m->instrument_id, m->side, m->price, m->qty};
            level(instrument, m->side, m->price, static_cast<std::int64_t>(m->qty));
          });
        }
        break;
      case TB_MSG_ORDER_DELETE:
        if (auto m = tickbus::decode<tb_order_delete>(r)) return remove(m->order_id, UINT64_MAX, instrument);
        break;
      case TB_MSG_ORDER_EXECUTE:
        if (auto m = tickbus::decode<tb_order_execute>(r)) return remove(m->order_id, m->exec_qty, instrument);
        break;
      case TB_MSG_ORDER_MODIFY:
        if (auto m = tickbus::decode<tb_order_modify>(r)) {
          auto it = orders_.find(m->order_id);
          if (it == orders_.end()) return false;
          instrument = it->second.instrument;
          return change(instrument, [&] {
            Resting& o = it->second;
            level(o.instrument, o.side, o.price, -static_cast<std::int64_t>(o.qty));
            o.price = m->new_price;
            o.qty = m->new_qty;
            level(o.instrument, o.side, o.price, static_cast<std::int64_t>(o.qty));
          });
        }
        break;
      default:
        break;
    }
    return false;
  }

  const Book& book(std::uint32_t instrument) { return books_[instrument]; }

 private:
  template <class F>
  bool change(std::uint32_t instrument, F&& f) {
    Book& b = books_[instrument];
    auto best = [&] {
      return std::make_pair(b.bids.empty() ? 0 : b.bids.begin()->first, b.asks.empty() ? 0 : b.asks.begin()->first);
    };
    auto before = best();
    f();
    return best() != before;
  }

  bool remove(std::uint64_t order_id, std::uint64_t qty, std::uint32_t& instrument) {
    auto it = orders_.find(order_id);
    if (it == orders_.end()) return false;
    instrument = it->second.instrument;
    return change(instrument, [&] {
      Resting& o = it->second;
      std::uint64_t n = qty < o.qty ? qty : o.qty;
      level(o.instrument, o.side, o.price, -static_cast<std::int64_t>(n));
      o.qty -= n;
      if (o.qty == 0) orders_.erase(it);
    });
  }

  void level(std::uint32_t instrument, std::uint8_t side, std::int64_t price, std::int64_t delta) {
    Book& b = books_[instrument];
    auto apply = [&](auto& levels) {
      auto& q = levels[price];
      q = static_cast<std::uint64_t>(static_cast<std::int64_t>(q) + delta);
      if (q == 0) levels.erase(price);
    };
    if (side == kBuy) {
      apply(b.bids);
    } else {
      apply(b.asks);
    }
  }

  std::unordered_map<std::uint64_t, Resting> orders_;
  std::unordered_map<std::uint32_t, Book> books_;
};

struct Args {
  std::string md = "shm:md", orders = "shm:orders", execs = "shm:execs";
  std::uint64_t qty = 100, max_in_flight = 64;
  double wait_secs = 30, drain_secs = 10;
};

bool parse(int argc, char** argv, Args& a) {
  for (int k = 1; k < argc; k++) {
    std::string f = argv[k];
    if (k + 1 >= argc) return false;
    std::string v = argv[++k];
    if (f == "--md") a.md = v;
    else if (f == "--orders") a.orders = v;
    else if (f == "--execs") a.execs = v;
    else if (f == "--qty") a.qty = std::stoull(v);
    else if (f == "--max-in-flight") a.max_in_flight = std::stoull(v);
    else if (f == "--wait-secs") a.wait_secs = std::stod(v);
    else if (f == "--drain-secs") a.drain_secs = std::stod(v);
    else return false;
  }
  return a.qty > 0 && a.max_in_flight > 0 && a.max_in_flight <= 1024;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (!parse(argc, argv, a)) {
    std::cerr << "usage: cpp_trader [--md URI] [--orders URI] [--execs URI] [--qty N] [--max-in-flight 1..1024]"
                 " [--wait-secs S] [--drain-secs S]\n";
    return 2;
  }
  try {
    auto wait_ms = static_cast<std::uint64_t>(a.wait_secs * 1000);
    // The order stream as `tickbus trader` lays it out: reliable, 4096 slots, one reader (the
    // gateway), stream 2. Opened first: the exchange waits for it.
    tickbus::open_options oo;
    oo.reliable(true).slots(4096).payload(128).wait_ms(wait_ms);
    oo.stream = 2;
    oo.consumers = 1;
    tickbus::publisher orders(a.orders, oo);
    // Market data is lossy (observed, never holding the feed back); reports reliable. Taking a
    // reader on the reports tells the exchange the trader is attached: it starts replaying.
    tickbus::subscriber md(a.md, tickbus::open_options().reliable(false).wait_ms(wait_ms));
    tickbus::subscriber execs(a.execs, tickbus::open_options().reliable(true).wait_ms(wait_ms));
    std::cerr << "cpp_trader: ready\n";

    Books books;
    std::uint64_t ticks = 0, md_missed = 0, sent = 0, reports = 0, fills = 0, expired = 0, rejects = 0;
    std::uint64_t unexpected = 0, twice = 0, ring_full = 0, next_id = 1;
    std::unordered_map<std::uint64_t, std::uint32_t> answers;  // client order id -> reports
    std::uint64_t in_flight = 0;
    bool md_over = false;
    auto drain_deadline = steady::time_point::max();
    std::uint64_t idle = 0;
    tb_recv r;
    for (;;) {
      bool work = false;
      // Market data.
      if (!md_over) {
        tickbus::status st = md.poll(r);
        if (!st.ok()) throw tickbus::error(st.code(), std::string(st.message()));
        if (r.kind == TB_RECV_GAP) {
          md_missed += r.resumed_at - r.position;
          work = true;
        } else if (r.kind == TB_RECV_MESSAGE) {
          work = true;
          ticks++;
          std::uint32_t instrument = 0;
          if (books.apply(r, instrument) && in_flight < a.max_in_flight) {
            const Book& b = books.book(instrument);
            auto o = tickbus::make<tb_new_order>();
            o.client_order_id = next_id;
            o.instrument_id = instrument;
            o.time_in_force = kIoc;
            o.ord_type = kLimit;
            o.qty = a.qty;
            o.account = 7;
            bool go = true;
            if (!b.bids.empty()) {
              o.side = kSell;
              o.price = b.bids.begin()->first;
            } else if (!b.asks.empty()) {
              o.side = kBuy;
              o.price = b.asks.begin()->first;
            } else {
              go = false;
            }
            if (go) {
              tickbus::status s = orders.send(o);
              if (s.ok()) {
                answers[next_id] = 0;
                next_id++;
                sent++;
                in_flight++;
              } else if (s.retry_helps()) {
                ring_full++;  // skipped: the decision is stale by the time the ring has room
              } else {
                throw tickbus::error(s.code(), std::string(s.message()));
              }
            }
          }
        }
      }
      // Execution reports.
      tickbus::status st = execs.poll(r);
      if (!st.ok()) throw tickbus::error(st.code(), std::string(st.message()));
      if (r.kind == TB_RECV_MESSAGE && r.len >= sizeof(tb_header) + 8) {
        work = true;
        tb_header h;
        std::memcpy(&h, r.data, sizeof h);
        std::uint64_t id = 0;
        std::memcpy(&id, r.data + sizeof h, sizeof id);  // every report's first field
        auto it = answers.find(id);
        if (it == answers.end()) {
          unexpected++;
        } else {
          if (++it->second == 1) {
            in_flight--;
          } else {
            twice++;
          }
          reports++;
          if (h.msg_type == TB_MSG_EXEC_FILL) fills++;
          else if (h.msg_type == TB_MSG_EXEC_ACK) expired++;
          else if (h.msg_type == TB_MSG_EXEC_REJECT) rejects++;
        }
      }
      if (work) {
        idle = 0;
        continue;
      }
      // Idle: look at the market data's publisher now and then (a syscall, off the hot path).
      if (++idle % 4096 == 0) {
        if (!md_over && md.publisher_state() != TB_PEER_LIVE) {
          // Closed: what it published is read to the end first (this poll found nothing).
          md_over = true;
          drain_deadline = steady::now() + std::chrono::milliseconds(static_cast<long>(a.drain_secs * 1000));
        }
        if (md_over && (in_flight == 0 || steady::now() > drain_deadline)) break;
      }
    }
    orders.close();  // the gateway sees the trader finish
    std::uint64_t unanswered = 0;
    for (auto& kv : answers) unanswered += kv.second == 0;
    std::printf(
        "{\"ticks\":%llu,\"md_missed\":%llu,\"orders\":%llu,\"reports\":%llu,\"fills\":%llu,\"expired\":%llu,"
        "\"rejects\":%llu,\"unanswered\":%llu,\"answered_twice\":%llu,\"unexpected\":%llu,\"order_ring_full\":%llu}\n",
        (unsigned long long)ticks, (unsigned long long)md_missed, (unsigned long long)sent,
        (unsigned long long)reports, (unsigned long long)fills, (unsigned long long)expired,
        (unsigned long long)rejects, (unsigned long long)unanswered, (unsigned long long)twice,
        (unsigned long long)unexpected, (unsigned long long)ring_full);
    return (unanswered == 0 && twice == 0 && unexpected == 0) ? 0 : 1;
  } catch (const tickbus::error& e) {
    std::cerr << "cpp_trader: " << e.what() << "\n";
    return 1;
  }
}
