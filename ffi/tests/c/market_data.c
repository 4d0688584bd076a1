/* Reads an ITCH file through the C ABI, normalised, and prints one line per message:
 *   POSITION MSG_TYPE LEN SOURCE_TIME_NS FNV1A64
 * then "end UNPARSED". argv[1]: the file. tests/c_abi.rs compares the output with the Rust
 * normaliser's over the same file. Built with -fsanitize=address,undefined. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "tickbus.h"

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  tb_market_data* m;
  if (tb_market_data_open(argv[1], 0, &m) != TB_OK) {
    fprintf(stderr, "open: %s\n", tb_last_error());
    return 1;
  }
  tb_md_record r;
  for (;;) {
    if (tb_market_data_next(m, &r) != TB_OK) {
      fprintf(stderr, "next: %s\n", tb_last_error());
      return 1;
    }
    if (!r.valid) break;
    tb_header h;
    memcpy(&h, r.data, sizeof h);
    uint64_t f = 0xcbf29ce484222325ull;
    for (size_t k = 0; k < r.len; k++) f = (f ^ r.data[k]) * 0x100000001b3ull;
    printf("%" PRIu64 " %u %zu %" PRIu64 " %016" PRIx64 "\n", r.position, h.msg_type, r.len, r.source_time_ns, f);
  }
  printf("end %" PRIu64 "\n", r.unparsed);
  /* A journal folder is refused with what to do instead. */
  tb_market_data* j;
  if (tb_market_data_open("/nonexistent/day.itch", 0, &j) != TB_ERROR_OPEN) return 1;
  tb_market_data_destroy(m);
  return 0;
}
