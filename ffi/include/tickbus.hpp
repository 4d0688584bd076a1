// tickbus.hpp: a header-only C++17 wrapper over the tickbus C ABI (tickbus.h).
//
// Error handling, chosen per path:
// - Set-up and tear-down (open, info, journal open and seek) throw tickbus::error, which carries
//   the tb_status code and the library's message (what was wrong and what to do).
// - The hot path (publish, send, claim/commit, poll, recv) never throws and never allocates: it
//   returns a tickbus::status, [[nodiscard]], that the caller tests (a full reliable ring is a
//   normal moment there: status::retry_helps() says whether to try again).
//
// Handles are RAII (move-only; the destructor closes and frees). Each is used by one thread at
// a time and may move between threads. Fixed-layout messages are the C structs of tickbus.h
// (tb_quote, tb_new_order, ...); tickbus::message_traits<T> gives their type number and checks
// their layout at compile time.
#ifndef TICKBUS_HPP
#define TICKBUS_HPP

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#if __cplusplus >= 202002L
#include <span>
#endif

#include "tickbus.h"

namespace tickbus {

/// A failed set-up call: its code and the library's message.
class error : public std::runtime_error {
 public:
  error(tb_status code, const std::string& what) : std::runtime_error(what), code_(code) {}
  tb_status code() const noexcept { return code_; }
  bool retry_helps() const noexcept { return tb_status_retry_helps(code_); }

 private:
  tb_status code_;
};

/// Throws tickbus::error for anything but TB_OK.
inline void check(tb_status s, const char* what) {
  if (s != TB_OK) {
    throw error(s, std::string(what) + ": " + tb_status_name(s) + ": " + tb_last_error());
  }
}

/// A hot-path result: TB_OK or an error code (message in tb_last_error until the next failure).
class [[nodiscard]] status {
 public:
  constexpr status(tb_status code) noexcept : code_(code) {}
  constexpr bool ok() const noexcept { return code_ == TB_OK; }
  constexpr explicit operator bool() const noexcept { return ok(); }
  constexpr tb_status code() const noexcept { return code_; }
  bool retry_helps() const noexcept { return tb_status_retry_helps(code_); }
  /// The library's message for this failure (valid until the next failing call on the thread).
  std::string_view message() const noexcept { return ok() ? std::string_view() : tb_last_error(); }
  /// Throws tickbus::error unless ok (for callers off the hot path).
  void check(const char* what = "tickbus") const { tickbus::check(code_, what); }

 private:
  tb_status code_;
};

/// A read-only byte view (std::span<const std::byte> in C++20; this header is C++17).
struct bytes {
  const void* data;
  std::size_t size;
#if __cplusplus >= 202002L
  template <class T, std::size_t N>
  bytes(std::span<T, N> s) : data(s.data()), size(s.size_bytes()) {}
#endif
  bytes(const void* d, std::size_t n) : data(d), size(n) {}
  bytes(std::string_view s) : data(s.data()), size(s.size()) {}
};

/// Type number and layout of each fixed-layout message.
template <class T>
struct message_traits;

#define TICKBUS_MESSAGE(T, NUM, SIZE)                                                   \
  template <>                                                                           \
  struct message_traits<T> {                                                            \
    static constexpr std::uint16_t type = NUM;                                          \
    static constexpr std::size_t size = SIZE;                                           \
  };                                                                                    \
  static_assert(sizeof(T) == SIZE, #T " has the Rust type's size");                     \
  static_assert(alignof(T) == 8, #T " is 8-byte aligned as the Rust type");             \
  static_assert(offsetof(T, header) == 0, #T " starts with its header");                \
  static_assert(std::is_trivially_copyable<T>::value, #T " is copied as bytes");        \
  static_assert(std::is_standard_layout<T>::value, #T " has the C layout");

TICKBUS_MESSAGE(tb_quote, TB_MSG_QUOTE, TB_LEN_QUOTE)
TICKBUS_MESSAGE(tb_trade, TB_MSG_TRADE, TB_LEN_TRADE)
TICKBUS_MESSAGE(tb_order_add, TB_MSG_ORDER_ADD, TB_LEN_ORDER_ADD)
TICKBUS_MESSAGE(tb_order_modify, TB_MSG_ORDER_MODIFY, TB_LEN_ORDER_MODIFY)
TICKBUS_MESSAGE(tb_order_delete, TB_MSG_ORDER_DELETE, TB_LEN_ORDER_DELETE)
TICKBUS_MESSAGE(tb_order_execute, TB_MSG_ORDER_EXECUTE, TB_LEN_ORDER_EXECUTE)
TICKBUS_MESSAGE(tb_book_snapshot, TB_MSG_BOOK_SNAPSHOT, TB_LEN_BOOK_SNAPSHOT)
TICKBUS_MESSAGE(tb_feed_gap, TB_MSG_FEED_GAP, TB_LEN_FEED_GAP)
TICKBUS_MESSAGE(tb_snapshot_orders, TB_MSG_SNAPSHOT_ORDERS, TB_LEN_SNAPSHOT_ORDERS)
TICKBUS_MESSAGE(tb_new_order, TB_MSG_NEW_ORDER, TB_LEN_NEW_ORDER)
TICKBUS_MESSAGE(tb_cancel_order, TB_MSG_CANCEL_ORDER, TB_LEN_CANCEL_ORDER)
TICKBUS_MESSAGE(tb_replace_order, TB_MSG_REPLACE_ORDER, TB_LEN_REPLACE_ORDER)
TICKBUS_MESSAGE(tb_exec_ack, TB_MSG_EXEC_ACK, TB_LEN_EXEC_ACK)
TICKBUS_MESSAGE(tb_exec_fill, TB_MSG_EXEC_FILL, TB_LEN_EXEC_FILL)
TICKBUS_MESSAGE(tb_exec_reject, TB_MSG_EXEC_REJECT, TB_LEN_EXEC_REJECT)
#undef TICKBUS_MESSAGE
static_assert(sizeof(tb_header) == TB_HEADER_LEN, "the header is 32 bytes");

/// A zeroed message of type T with its header's type, version and length set.
template <class T>
T make() noexcept {
  T m;
  std::memset(static_cast<void*>(&m), 0, sizeof m);
  m.header.msg_type = message_traits<T>::type;
  m.header.version = TB_MSG_VERSION;
  m.header.length = static_cast<std::uint32_t>(sizeof(T));
  return m;
}

/// The message a poll delivered, as T if it is one (type and length match); copied out, so
/// no alignment is assumed of the transport's bytes.
template <class T>
std::optional<T> decode(const tb_recv& r) noexcept {
  if (r.kind != TB_RECV_MESSAGE || r.data == nullptr || r.len != sizeof(T)) return std::nullopt;
  tb_header h;
  std::memcpy(&h, r.data, sizeof h);
  if (h.msg_type != message_traits<T>::type) return std::nullopt;
  T m;
  std::memcpy(static_cast<void*>(&m), r.data, sizeof m);
  return m;
}

/// Options for opening a stream, initialised to the library's defaults.
struct open_options : tb_open_options {
  open_options() { check(tb_open_options_init(this), "tb_open_options_init"); }
  open_options& reliable(bool r) { tb_open_options::reliable = r; return *this; }
  open_options& slots(std::uint32_t n) { tb_open_options::slots = n; return *this; }
  open_options& payload(std::uint32_t n) { tb_open_options::payload = n; return *this; }
  open_options& wait_ms(std::uint64_t ms) { tb_open_options::wait_ms = ms; return *this; }
  open_options& start_oldest(bool b) { tb_open_options::start_oldest = b; return *this; }
  open_options& hugepages(tb_hugepages h) { tb_open_options::hugepages = static_cast<std::uint32_t>(h); return *this; }
};

class publisher;

/// A claimed slot: write it in place, then commit; destroyed uncommitted, it is aborted. It
/// refers to its publisher's handle: it must not outlive the publisher (keep it in the scope
/// that claimed it).
class [[nodiscard]] claim {
 public:
  claim(claim&& o) noexcept : p_(std::exchange(o.p_, nullptr)), code_(o.code_), position_(o.position_) {}
  claim& operator=(claim&&) = delete;
  ~claim() {
    if (p_ != nullptr) (void)tb_publisher_abort(p_);
  }
  /// Whether the claim was granted (if not, code() says why: TB_ERROR_FULL, ...).
  bool ok() const noexcept { return p_ != nullptr; }
  tb_status code() const noexcept { return code_; }
  std::uint64_t position() const noexcept { return position_; }
  status write(bytes b) noexcept { return tb_publisher_claim_write(p_, b.data, b.size); }
  status store_word(std::size_t k, std::uint64_t v) noexcept { return tb_publisher_claim_store_word(p_, k, v); }
  status commit(std::uint64_t* position = nullptr) noexcept {
    return tb_publisher_commit(std::exchange(p_, nullptr), position);
  }

 private:
  friend class publisher;
  claim(tb_publisher* p, tb_status code, std::uint64_t pos) noexcept : p_(p), code_(code), position_(pos) {}
  tb_publisher* p_;
  tb_status code_ = TB_OK;
  std::uint64_t position_;
};

/// A publisher of one stream.
class publisher {
 public:
  /// Opens the stream `uri` names (shm:NAME, rdma-rc://IP:PORT/STREAM, ...); throws on failure.
  explicit publisher(const std::string& uri, const open_options& o = open_options()) {
    check(tb_publisher_open(uri.c_str(), &o, &h_), "tb_publisher_open");
  }
  publisher(publisher&& o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
  publisher& operator=(publisher&& o) noexcept {
    if (this != &o) {
      tb_publisher_destroy(h_);
      h_ = std::exchange(o.h_, nullptr);
    }
    return *this;
  }
  publisher(const publisher&) = delete;
  publisher& operator=(const publisher&) = delete;
  ~publisher() { tb_publisher_destroy(h_); }

  /// Publishes a copy of the bytes.
  status publish(bytes b, std::uint64_t* position = nullptr) noexcept {
    return tb_publisher_publish(h_, b.data, b.size, position);
  }
  /// Stamps msg's header (stream, sequence, TSC) and publishes it.
  template <class T>
  status send(T& msg, std::uint64_t* position = nullptr) noexcept {
    (void)message_traits<T>::type;  // only fixed-layout messages
    return tb_publisher_send(h_, &msg, sizeof(T), position);
  }
  /// Claims room for len bytes to write in place.
  claim try_claim(std::size_t len) noexcept {
    std::uint64_t pos = 0;
    tb_status s = tb_publisher_claim(h_, len, &pos);
    return s == TB_OK ? claim(h_, s, pos) : claim(nullptr, s, 0);
  }
  tb_stream_info info() const {
    tb_stream_info i;
    check(tb_publisher_info(h_, &i), "tb_publisher_info");
    return i;
  }
  bool has_reader() const {
    bool b = false;
    check(tb_publisher_has_reader(h_, &b), "tb_publisher_has_reader");
    return b;
  }
  /// Upkeep when idle (rdma-rc: take in subscribers); off the hot path.
  status idle() noexcept { return tb_publisher_idle(h_); }
  void close() { check(tb_publisher_close(h_), "tb_publisher_close"); }
  tb_publisher* native() const noexcept { return h_; }

 private:
  tb_publisher* h_ = nullptr;
};

/// A subscriber of one stream.
class subscriber {
 public:
  /// Opens the stream `uri` names, waiting up to o.wait_ms for its publisher; throws on failure.
  explicit subscriber(const std::string& uri, const open_options& o = open_options()) {
    check(tb_subscriber_open(uri.c_str(), &o, &h_), "tb_subscriber_open");
  }
  subscriber(subscriber&& o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
  subscriber& operator=(subscriber&& o) noexcept {
    if (this != &o) {
      tb_subscriber_destroy(h_);
      h_ = std::exchange(o.h_, nullptr);
    }
    return *this;
  }
  subscriber(const subscriber&) = delete;
  subscriber& operator=(const subscriber&) = delete;
  ~subscriber() { tb_subscriber_destroy(h_); }

  /// The next message or gap (r.kind TB_RECV_NONE if nothing new); r.data is valid until the
  /// next call on this subscriber.
  status poll(tb_recv& r) noexcept { return tb_subscriber_poll(h_, &r); }
  /// The next message, if it is sizeof(T) bytes, copied into out (r.kind says what was found).
  /// A message of another size is left in place: TB_ERROR_BUFFER_SIZE, take it with poll().
  /// It does not check the type number: use it on streams of one message size, or check
  /// out.header.msg_type.
  template <class T>
  status recv(T& out, tb_recv& r) noexcept {
    (void)message_traits<T>::type;
    return tb_subscriber_poll_into(h_, &out, sizeof(T), &r);
  }
  tb_stream_info info() const {
    tb_stream_info i;
    check(tb_subscriber_info(h_, &i), "tb_subscriber_info");
    return i;
  }
  /// What became of the publisher (a syscall: call it when idle).
  tb_peer_state publisher_state() const {
    tb_peer_state st = TB_PEER_LIVE;
    check(tb_subscriber_publisher(h_, &st), "tb_subscriber_publisher");
    return st;
  }
  void set_manual_release(bool manual) {
    check(tb_subscriber_set_manual_release(h_, manual), "tb_subscriber_set_manual_release");
  }
  status release_to(std::uint64_t position) noexcept { return tb_subscriber_release_to(h_, position); }
  void close() { check(tb_subscriber_close(h_), "tb_subscriber_close"); }
  tb_subscriber* native() const noexcept { return h_; }

 private:
  tb_subscriber* h_ = nullptr;
};

/// A journal folder being read, in stream order.
class journal {
 public:
  explicit journal(const std::string& dir) { check(tb_journal_open(dir.c_str(), &h_), "tb_journal_open"); }
  journal(journal&& o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
  journal& operator=(journal&& o) noexcept {
    if (this != &o) {
      tb_journal_destroy(h_);
      h_ = std::exchange(o.h_, nullptr);
    }
    return *this;
  }
  journal(const journal&) = delete;
  journal& operator=(const journal&) = delete;
  ~journal() { tb_journal_destroy(h_); }
  void seek_sequence(std::uint64_t seq) { check(tb_journal_seek_sequence(h_, seq), "tb_journal_seek_sequence"); }
  void seek_time(std::uint64_t unix_ns) { check(tb_journal_seek_time(h_, unix_ns), "tb_journal_seek_time"); }
  /// The next record; false at the end of the data. Throws on a damaged journal.
  bool next(tb_journal_record& r) {
    check(tb_journal_next(h_, &r), "tb_journal_next");
    return r.kind != TB_RECORD_END;
  }
  tb_journal_info info() const {
    tb_journal_info i;
    check(tb_journal_get_info(h_, &i), "tb_journal_get_info");
    return i;
  }

 private:
  tb_journal* h_ = nullptr;
};

/// An ITCH 5.0 file or MoldUDP64 capture, normalised into tickbus market-data messages.
class market_data {
 public:
  explicit market_data(const std::string& path, std::uint16_t port = 0) {
    check(tb_market_data_open(path.c_str(), port, &h_), "tb_market_data_open");
  }
  market_data(market_data&& o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
  market_data& operator=(market_data&& o) noexcept {
    if (this != &o) {
      tb_market_data_destroy(h_);
      h_ = std::exchange(o.h_, nullptr);
    }
    return *this;
  }
  market_data(const market_data&) = delete;
  market_data& operator=(const market_data&) = delete;
  ~market_data() { tb_market_data_destroy(h_); }
  /// The next message; false at the end. r.data is valid until the next call.
  bool next(tb_md_record& r) {
    check(tb_market_data_next(h_, &r), "tb_market_data_next");
    return r.valid;
  }

 private:
  tb_market_data* h_ = nullptr;
};

/// A snapshot of this host's live counters and rings (what `tickbus stat` shows).
class stat_snapshot {
 public:
  stat_snapshot() { check(tb_stat_snapshot(&h_), "tb_stat_snapshot"); }
  stat_snapshot(stat_snapshot&& o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
  stat_snapshot& operator=(stat_snapshot&& o) noexcept {
    if (this != &o) {
      tb_stat_destroy(h_);
      h_ = std::exchange(o.h_, nullptr);
    }
    return *this;
  }
  stat_snapshot(const stat_snapshot&) = delete;
  stat_snapshot& operator=(const stat_snapshot&) = delete;
  ~stat_snapshot() { tb_stat_destroy(h_); }
  std::size_t streams() const {
    std::size_t n = 0;
    check(tb_stat_counts(h_, &n, nullptr, nullptr), "tb_stat_counts");
    return n;
  }
  std::size_t rings() const {
    std::size_t n = 0;
    check(tb_stat_counts(h_, nullptr, &n, nullptr), "tb_stat_counts");
    return n;
  }
  tb_stat_stream stream(std::size_t i) const {
    tb_stat_stream s;
    check(tb_stat_get_stream(h_, i, &s), "tb_stat_get_stream");
    return s;
  }
  tb_stat_ring ring(std::size_t i) const {
    tb_stat_ring r;
    check(tb_stat_get_ring(h_, i, &r), "tb_stat_get_ring");
    return r;
  }
  /// Fills each stream's msgs_per_s from the counts since `earlier`.
  void rates_since(stat_snapshot& earlier) { check(tb_stat_rates_since(h_, earlier.h_), "tb_stat_rates_since"); }

 private:
  tb_stat* h_ = nullptr;
};

/// The index of the counter named `name` in tb_stat_stream::counters, or -1.
inline int counter_index(std::string_view name) noexcept {
  for (std::uint32_t k = 0;; k++) {
    const char* n = tb_counter_name(k);
    if (n == nullptr) return -1;
    if (name == n) return static_cast<int>(k);
  }
}

}  // namespace tickbus

#endif  // TICKBUS_HPP
