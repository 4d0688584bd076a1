// The lab's C++ pair: the sending and receiving ends of a ping-pong written in C++ with
// tickbus.hpp, calling the C ABI (libtickbus_ffi's functions, linked into the lab from the
// tickbus-ffi crate). The lab's harness drives them as it drives every transport, so the row
// differs from "tickbus shm (stream API, URI)" only by the C++ and the C ABI in between.
#include <cstring>
#include <string>

#include "tickbus.hpp"

namespace {
thread_local std::string last_error;

// The largest message the lab sends.
constexpr std::size_t kMax = 4096;

void fill(unsigned char* b, std::size_t n) {
  for (std::size_t i = 0; i < n; i++) b[i] = static_cast<unsigned char>(i) | 1;
}
}  // namespace

// Each end on its own 128-byte-aligned allocation with its buffer inside, as the Rust ends
// live apart on their threads: the two ends of one direction are made one after the other and
// then written from two cores.
struct alignas(128) lab_cpp_tx {
  explicit lab_cpp_tx(const char* uri, std::size_t n) : p(uri), size(n < 8 ? 8 : n) { fill(buf, size); }
  tickbus::publisher p;
  std::size_t size;
  alignas(128) unsigned char buf[kMax];
};

struct alignas(128) lab_cpp_rx {
  explicit lab_cpp_rx(const char* uri, std::size_t n) : s(uri), size(n < 8 ? 8 : n) { fill(buf, size); }
  tickbus::subscriber s;
  std::size_t size;
  tb_recv r{};
  alignas(128) unsigned char buf[kMax];
};

extern "C" {

const char* lab_cpp_last_error() { return last_error.c_str(); }

lab_cpp_tx* lab_cpp_tx_open(const char* uri, std::size_t size) {
  try {
    if (size > kMax) throw std::length_error("message larger than the lab's C++ buffer");
    return new lab_cpp_tx(uri, size);
  } catch (const std::exception& e) {
    last_error = e.what();
    return nullptr;
  }
}

// 1 sent, 0 the ring is full (retry), -1 an error (lab_cpp_last_error says which).
int lab_cpp_tx_send(lab_cpp_tx* t, std::uint64_t stamp) {
  std::memcpy(t->buf, &stamp, sizeof stamp);
  tickbus::status s = t->p.publish(tickbus::bytes(t->buf, t->size));
  if (s.ok()) return 1;
  if (s.retry_helps()) return 0;
  last_error = std::string(s.message());
  return -1;
}

void lab_cpp_tx_close(lab_cpp_tx* t) { delete t; }

lab_cpp_rx* lab_cpp_rx_open(const char* uri, std::size_t size) {
  try {
    if (size > kMax) throw std::length_error("message larger than the lab's C++ buffer");
    return new lab_cpp_rx(uri, size);
  } catch (const std::exception& e) {
    last_error = e.what();
    return nullptr;
  }
}

// 1 a message (its stamp in *stamp, the whole message copied out), 0 nothing yet, -1 an error
// or anything but a message (ping-pong keeps one message in flight: nothing can be lapped).
int lab_cpp_rx_recv(lab_cpp_rx* x, std::uint64_t* stamp) {
  tickbus::status s = x->s.poll(x->r);
  if (!s.ok()) {
    last_error = std::string(s.message());
    return -1;
  }
  if (x->r.kind == TB_RECV_NONE) return 0;
  if (x->r.kind != TB_RECV_MESSAGE || x->r.len > x->size) {
    last_error = "not a message of the ping-pong's size";
    return -1;
  }
  std::memcpy(x->buf, x->r.data, x->r.len);
  std::memcpy(stamp, x->buf, sizeof *stamp);
  return 1;
}

void lab_cpp_rx_close(lab_cpp_rx* x) { delete x; }
}
