/* Reads a journal through the C ABI and prints every record, one line each:
 *   M SEQUENCE PUBLISH_TSC RECEIVE_TSC LEN FNV1A64   (a message)
 *   G SEQUENCE COUNT                                  (a gap)
 * after a first line "stream STREAM_ID segments N". argv: DIR [SEQ] (seek to SEQ first).
 * Built with -fsanitize=address,undefined by tests/c_abi.rs, which compares the output with
 * what the Rust reader yields. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "tickbus.h"

static uint64_t fnv1a(const uint8_t* p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t k = 0; k < n; k++) {
    h ^= p[k];
    h *= 0x100000001b3ull;
  }
  return h;
}

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    fprintf(stderr, "usage: journal DIR [SEQ]\n");
    return 2;
  }
  tb_journal* j;
  if (tb_journal_open(argv[1], &j) != TB_OK) {
    fprintf(stderr, "open: %s\n", tb_last_error());
    return 1;
  }
  tb_journal_info info;
  if (tb_journal_get_info(j, &info) != TB_OK) return 1;
  printf("stream %u segments %u\n", info.stream_id, info.segments);
  if (argc == 3 && tb_journal_seek_sequence(j, strtoull(argv[2], NULL, 10)) != TB_OK) {
    fprintf(stderr, "seek: %s\n", tb_last_error());
    return 1;
  }
  tb_journal_record r;
  for (;;) {
    if (tb_journal_next(j, &r) != TB_OK) {
      fprintf(stderr, "next: %s\n", tb_last_error());
      return 1;
    }
    if (r.kind == TB_RECORD_END) break;
    if (r.kind == TB_RECORD_MESSAGE) {
      printf("M %" PRIu64 " %" PRIu64 " %" PRIu64 " %zu %016" PRIx64 "\n", r.sequence, r.publish_tsc,
             r.receive_tsc, r.len, fnv1a(r.data, r.len));
    } else {
      printf("G %" PRIu64 " %" PRIu64 "\n", r.sequence, r.gap_count);
    }
  }
  tb_journal_destroy(j);
  return 0;
}
