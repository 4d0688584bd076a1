/* tb_stat from C: this process publishes and reads 10 messages on a ring, then finds itself in
 * a snapshot with the counts it made; bad indexes and handles give the documented errors.
 * argv[1]: a unique ring name. Built with -fsanitize=address,undefined by tests/c_abi.rs, which
 * points TICKBUS_COUNTERS_DIR and the ring folders at its own. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tickbus.h"

static int counter(const char* name) {
  for (uint32_t k = 0;; k++) {
    const char* n = tb_counter_name(k);
    if (n == NULL) return -1;
    if (strcmp(n, name) == 0) return (int)k;
  }
}

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  char uri[256];
  snprintf(uri, sizeof uri, "shm:%s?reliable&slots=64", argv[1]);
  tb_publisher* p;
  tb_subscriber* s;
  if (tb_publisher_open(uri, NULL, &p) != TB_OK || tb_subscriber_open(uri, NULL, &s) != TB_OK) {
    fprintf(stderr, "open: %s\n", tb_last_error());
    return 1;
  }
  tb_quote q;
  memset(&q, 0, sizeof q);
  q.header.msg_type = TB_MSG_QUOTE;
  q.header.version = 1;
  q.header.length = TB_LEN_QUOTE;
  tb_recv r;
  for (int k = 0; k < 10; k++) {
    if (tb_publisher_send(p, &q, sizeof q, NULL) != TB_OK) return 1;
    if (tb_subscriber_poll(s, &r) != TB_OK || r.kind != TB_RECV_MESSAGE) return 1;
  }
  tb_stat* snap;
  if (tb_stat_snapshot(&snap) != TB_OK) {
    fprintf(stderr, "snapshot: %s\n", tb_last_error());
    return 1;
  }
  size_t streams = 0, rings = 0, errors = 0;
  if (tb_stat_counts(snap, &streams, &rings, &errors) != TB_OK) return 1;
  int messages = counter("messages"), bytes = counter("bytes");
  int failures = messages < 0 || bytes < 0;
  int seen_pub = 0, seen_sub = 0;
  for (size_t k = 0; k < streams; k++) {
    tb_stat_stream st;
    if (tb_stat_get_stream(snap, k, &st) != TB_OK) return 1;
    if (st.pid != (uint64_t)getpid() || strcmp(st.name, argv[1]) != 0) continue;
    if (!st.live || strcmp(st.transport, "shm") != 0 || !isnan(st.msgs_per_s)) failures++;
    if (st.counters[messages] != 10 || st.counters[bytes] != 10 * sizeof q) failures++;
    if (strcmp(st.role, "publisher") == 0) seen_pub++;
    if (strcmp(st.role, "subscriber") == 0) seen_sub++;
  }
  int seen_ring = 0;
  for (size_t k = 0; k < rings; k++) {
    tb_stat_ring ring;
    if (tb_stat_get_ring(snap, k, &ring) != TB_OK) return 1;
    if (strcmp(ring.name, argv[1]) != 0) continue;
    seen_ring++;
    if (ring.position != 10 || ring.slot_count != 64 || strcmp(ring.mode, "reliable") != 0 ||
        ring.publisher_pid != (uint64_t)getpid() || ring.consumers != 1)
      failures++;
  }
  tb_stat_stream st;
  if (tb_stat_get_stream(snap, streams, &st) != TB_ERROR_INVALID_ARGUMENT) failures++;
  if (tb_stat_get_ring(snap, rings, NULL) != TB_ERROR_NULL_POINTER) failures++;
  if (tb_stat_counts((tb_stat*)p, &streams, NULL, NULL) != TB_ERROR_BAD_HANDLE) failures++;
  if (tb_stat_rates_since(snap, snap) != TB_ERROR_INVALID_ARGUMENT) failures++;
  tb_stat* later;
  if (tb_stat_snapshot(&later) != TB_OK || tb_stat_rates_since(later, snap) != TB_OK) failures++;
  tb_stat_destroy(later);
  tb_stat_destroy(snap);
  tb_publisher_destroy(p);
  tb_subscriber_destroy(s);
  if (seen_pub != 1 || seen_sub != 1 || seen_ring != 1) {
    fprintf(stderr, "found %d publisher, %d subscriber, %d ring records of %s (%zu streams, %zu rings, %zu errors)\n",
            seen_pub, seen_sub, seen_ring, argv[1], streams, rings, errors);
    failures++;
  }
  if (failures == 0) printf("stat: found this process's streams and ring with its counts\n");
  return failures == 0 ? 0 : 1;
}
