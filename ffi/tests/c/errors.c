/* Every documented error of the C ABI, each from the smallest state that triggers it: the call
 * returns the code, tb_last_error says what is wrong, nothing crashes and no data is lost.
 * Built with -fsanitize=address,undefined by tests/c_abi.rs; argv[1] is a unique ring name. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tickbus.h"

static int failures = 0;

static void expect(int line, const char* call, tb_status got, tb_status code, const char* needle) {
  const char* msg = tb_last_error();
  if (got != code) {
    fprintf(stderr, "errors.c:%d: %s returned %s, expected %s (%s)\n", line, call, tb_status_name(got),
            tb_status_name(code), msg);
    failures++;
  } else if (code != TB_OK && strstr(msg, needle) == NULL) {
    fprintf(stderr, "errors.c:%d: %s: message \"%s\" lacks \"%s\"\n", line, call, msg, needle);
    failures++;
  }
}

/* The call returns `code` and, if that is an error, tb_last_error contains `needle`. */
#define EXPECT(call, code, needle) expect(__LINE__, #call, (call), (code), (needle))

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: errors RING_NAME\n");
    return 2;
  }
  char uri[256];
  snprintf(uri, sizeof uri, "shm:%s?reliable&slots=4&payload=96", argv[1]);
  tb_open_options o;
  EXPECT(tb_open_options_init(NULL), TB_ERROR_NULL_POINTER, "options is NULL");
  EXPECT(tb_open_options_init(&o), TB_OK, "");
  o.wait_ms = 2000;

  /* Opening. */
  tb_publisher* p = NULL;
  tb_subscriber* s = NULL;
  EXPECT(tb_publisher_open(NULL, &o, &p), TB_ERROR_NULL_POINTER, "uri is NULL");
  EXPECT(tb_publisher_open(uri, &o, NULL), TB_ERROR_NULL_POINTER, "out is NULL");
  EXPECT(tb_publisher_open("shm:", &o, &p), TB_ERROR_BAD_URI, "");
  EXPECT(tb_publisher_open("tcp://1.2.3.4:5/6", &o, &p), TB_ERROR_BAD_URI, "tcp");
  EXPECT(tb_publisher_open("shm:x?slots=3", &o, &p), TB_ERROR_BAD_URI, "slots");
  EXPECT(tb_publisher_open("shm:\xff", &o, &p), TB_ERROR_INVALID_ARGUMENT, "UTF-8");
  o.hugepages = 7;
  EXPECT(tb_publisher_open(uri, &o, &p), TB_ERROR_INVALID_ARGUMENT, "hugepages = 7");
  o.hugepages = TB_HUGEPAGES_PREFERRED;
  o.slots = 3;
  EXPECT(tb_publisher_open("shm:y", &o, &p), TB_ERROR_INVALID_ARGUMENT, "slots = 3");
  o.slots = 4096;
  o.wait_ms = 50;
  EXPECT(tb_subscriber_open("shm:tickbus-ffi-no-such-ring", &o, &s), TB_ERROR_OPEN, "no-such-ring");
  o.wait_ms = 2000;
  if (p != NULL || s != NULL) {
    fprintf(stderr, "a failed open wrote a handle\n");
    failures++;
  }
  EXPECT(tb_publisher_open(uri, &o, &p), TB_OK, "");
  EXPECT(tb_subscriber_open(uri, &o, &s), TB_OK, "");
  if (p == NULL || s == NULL) return 1;

  /* Null pointers and handles of the wrong kind. */
  tb_quote q;
  memset(&q, 0, sizeof q);
  q.header.msg_type = TB_MSG_QUOTE;
  q.header.version = 1;
  q.header.length = TB_LEN_QUOTE;
  uint64_t pos = 99;
  tb_recv r;
  EXPECT(tb_publisher_publish(NULL, &q, sizeof q, &pos), TB_ERROR_NULL_POINTER, "publisher is NULL");
  EXPECT(tb_publisher_publish(p, NULL, 8, &pos), TB_ERROR_NULL_POINTER, "data is NULL");
  EXPECT(tb_subscriber_poll(s, NULL), TB_ERROR_NULL_POINTER, "out is NULL");
  EXPECT(tb_subscriber_poll(NULL, &r), TB_ERROR_NULL_POINTER, "subscriber is NULL");
  EXPECT(tb_publisher_publish((tb_publisher*)s, &q, sizeof q, &pos), TB_ERROR_BAD_HANDLE,
         "not a tb_publisher");
  EXPECT(tb_subscriber_poll((tb_subscriber*)p, &r), TB_ERROR_BAD_HANDLE, "not a tb_subscriber");
  uint64_t forged[8] = {0};
  EXPECT(tb_subscriber_poll((tb_subscriber*)forged, &r), TB_ERROR_BAD_HANDLE, "not a tb_subscriber");
  tb_publisher_destroy((tb_publisher*)s); /* refused: a subscriber is not destroyed as a publisher */
  EXPECT(tb_last_error_code(), TB_ERROR_BAD_HANDLE, "");

  /* Messages that do not fit, and malformed ones. */
  char big[200];
  memset(big, 7, sizeof big);
  EXPECT(tb_publisher_publish(p, big, sizeof big, &pos), TB_ERROR_TOO_LARGE, "200 bytes");
  if (tb_status_retry_helps(TB_ERROR_TOO_LARGE)) failures++;
  EXPECT(tb_publisher_send(p, &q, 40, &pos), TB_ERROR_INVALID_ARGUMENT, "header says 80 bytes");
  q.header.msg_type = 15; /* no message type has this number */
  EXPECT(tb_publisher_send(p, &q, sizeof q, &pos), TB_ERROR_INVALID_ARGUMENT, "type 15");
  q.header.msg_type = TB_MSG_QUOTE;
  q.header.version = 2;
  EXPECT(tb_publisher_send(p, &q, sizeof q, &pos), TB_ERROR_INVALID_ARGUMENT, "version 2");
  q.header.version = 1;

  /* A full reliable ring (4 slots): the fifth publish is refused and retry helps; nothing the
   * ring holds is lost. */
  for (int k = 0; k < 4; k++) {
    q.instrument_id = (uint32_t)k;
    EXPECT(tb_publisher_send(p, &q, sizeof q, &pos), TB_OK, "");
    if (pos != (uint64_t)k || q.header.sequence != (uint64_t)k) {
      fprintf(stderr, "send %d: position %llu, stamped sequence %llu\n", k, (unsigned long long)pos,
              (unsigned long long)q.header.sequence);
      failures++;
    }
  }
  q.instrument_id = 4;
  tb_status full = tb_publisher_send(p, &q, sizeof q, &pos);
  EXPECT(full, TB_ERROR_FULL, "ring full");
  if (!tb_status_retry_helps(full)) {
    fprintf(stderr, "a full ring says retrying does not help\n");
    failures++;
  }

  /* A buffer of the wrong size: the message stays for poll. */
  uint8_t small[16];
  EXPECT(tb_subscriber_poll_into(s, small, sizeof small, &r), TB_ERROR_BUFFER_SIZE, "is 80 bytes");
  if (r.len != TB_LEN_QUOTE || r.position != 0) {
    fprintf(stderr, "BUFFER_SIZE reported len %zu position %llu\n", r.len, (unsigned long long)r.position);
    failures++;
  }
  EXPECT(tb_subscriber_poll_into(s, NULL, 80, &r), TB_ERROR_NULL_POINTER, "buf is NULL");
  tb_quote got;
  for (int k = 0; k < 4; k++) {
    EXPECT(tb_subscriber_poll_into(s, &got, sizeof got, &r), TB_OK, "");
    if (r.kind != TB_RECV_MESSAGE || r.position != (uint64_t)k || got.instrument_id != (uint32_t)k) {
      fprintf(stderr, "message %d: kind %d position %llu instrument %u\n", k, (int)r.kind,
              (unsigned long long)r.position, got.instrument_id);
      failures++;
    }
  }
  EXPECT(tb_subscriber_poll(s, &r), TB_OK, "");
  if (r.kind != TB_RECV_NONE) {
    fprintf(stderr, "an empty ring delivered kind %d\n", (int)r.kind);
    failures++;
  }
  /* The refused message goes in on retry. */
  EXPECT(tb_publisher_send(p, &q, sizeof q, &pos), TB_OK, "");
  EXPECT(tb_subscriber_poll(s, &r), TB_OK, "");
  if (r.kind != TB_RECV_MESSAGE || r.len != sizeof q || r.position != 4) {
    fprintf(stderr, "the retried message: kind %d len %zu position %llu\n", (int)r.kind, r.len,
            (unsigned long long)r.position);
    failures++;
  }

  /* Claims. */
  EXPECT(tb_publisher_commit(p, &pos), TB_ERROR_NO_CLAIM, "no claim");
  EXPECT(tb_publisher_claim_store_word(p, 0, 1), TB_ERROR_NO_CLAIM, "no claim");
  EXPECT(tb_publisher_claim(p, 16, &pos), TB_OK, "");
  EXPECT(tb_publisher_publish(p, &q, sizeof q, &pos), TB_ERROR_CLAIM_PENDING, "claim is pending");
  EXPECT(tb_publisher_claim(p, 16, &pos), TB_ERROR_CLAIM_PENDING, "claim is pending");
  EXPECT(tb_publisher_claim_store_word(p, 2, 1), TB_ERROR_INVALID_ARGUMENT, "word 2");
  EXPECT(tb_publisher_claim_write(p, big, 17), TB_ERROR_INVALID_ARGUMENT, "claimed length 16");
  EXPECT(tb_publisher_claim_store_word(p, 1, 0x1122334455667788ull), TB_OK, "");
  EXPECT(tb_publisher_claim_store_word(p, 0, 42), TB_OK, "");
  EXPECT(tb_publisher_commit(p, &pos), TB_OK, "");
  EXPECT(tb_subscriber_poll(s, &r), TB_OK, "");
  uint64_t words[2] = {0, 0};
  if (r.kind == TB_RECV_MESSAGE && r.len == 16) memcpy(words, r.data, 16);
  if (words[0] != 42 || words[1] != 0x1122334455667788ull) {
    fprintf(stderr, "claimed message: kind %d len %zu words %llx %llx\n", (int)r.kind, r.len,
            (unsigned long long)words[0], (unsigned long long)words[1]);
    failures++;
  }
  EXPECT(tb_publisher_claim(p, 8, &pos), TB_OK, "");
  EXPECT(tb_publisher_abort(p), TB_OK, "");
  EXPECT(tb_publisher_publish(p, "after-abort", 11, &pos), TB_OK, "");
  EXPECT(tb_subscriber_poll(s, &r), TB_OK, "");
  if (r.kind != TB_RECV_MESSAGE || r.len != 11 || memcmp(r.data, "after-abort", 11) != 0) {
    fprintf(stderr, "after an abort: kind %d len %zu\n", (int)r.kind, r.len);
    failures++;
  }
  tb_stream_info info;
  EXPECT(tb_subscriber_info(s, &info), TB_OK, "");
  if (info.aborted != 1 || !info.reliable || info.max_payload < 96) {
    fprintf(stderr, "info: aborted %llu reliable %d max_payload %u\n", (unsigned long long)info.aborted,
            (int)info.reliable, info.max_payload);
    failures++;
  }
  /* A claim pending at close is aborted with its publisher. */
  EXPECT(tb_publisher_claim(p, 8, &pos), TB_OK, "");

  /* A length no buffer can have is refused, not used. */
  EXPECT(tb_publisher_publish(p, &q, (size_t)-1, &pos), TB_ERROR_CLAIM_PENDING, "claim is pending");

  /* Closed handles answer, twice closing is fine (and records no error), destroy frees. */
  EXPECT(tb_publisher_close(p), TB_OK, "");
  EXPECT(tb_subscriber_poll(NULL, &r), TB_ERROR_NULL_POINTER, "subscriber is NULL");
  EXPECT(tb_publisher_close(p), TB_OK, "");
  if (tb_last_error_code() != TB_ERROR_NULL_POINTER) {
    fprintf(stderr, "closing a closed handle recorded %s\n", tb_status_name(tb_last_error_code()));
    failures++;
  }
  EXPECT(tb_publisher_publish(p, &q, sizeof q, &pos), TB_ERROR_CLOSED, "was closed");
  EXPECT(tb_publisher_info(p, &info), TB_ERROR_CLOSED, "was closed");
  EXPECT(tb_subscriber_close(s), TB_OK, "");
  EXPECT(tb_subscriber_poll(s, &r), TB_ERROR_CLOSED, "was closed");
  tb_publisher_destroy(p);
  tb_subscriber_destroy(s);
  tb_publisher_destroy(NULL);
  tb_subscriber_destroy(NULL);

  /* Lengths, and flags that are neither 0 nor 1 in C (read as bytes: non-zero is true). */
  char uri2[300];
  snprintf(uri2, sizeof uri2, "shm:%s-flags", argv[1]);
  tb_open_options o2;
  EXPECT(tb_open_options_init(&o2), TB_OK, "");
  unsigned char junk = 0x7f;
  memcpy(&o2.reliable, &junk, 1);
  tb_publisher* p2 = NULL;
  EXPECT(tb_publisher_open(uri2, &o2, &p2), TB_OK, "");
  EXPECT(tb_publisher_info(p2, &info), TB_OK, "");
  if (!info.reliable) {
    fprintf(stderr, "a reliable flag of 0x7f was read as false\n");
    failures++;
  }
  EXPECT(tb_publisher_publish(p2, &q, (size_t)-1, &pos), TB_ERROR_TOO_LARGE, "no length a buffer can have");
  EXPECT(tb_publisher_send(p2, &q, (size_t)-1, &pos), TB_ERROR_TOO_LARGE, "no length a buffer can have");
  tb_publisher_destroy(p2);

  /* Journals. */
  tb_journal* j = NULL;
  EXPECT(tb_journal_open(NULL, &j), TB_ERROR_NULL_POINTER, "dir is NULL");
  EXPECT(tb_journal_open("/nonexistent/tickbus-journal", &j), TB_ERROR_JOURNAL, "/nonexistent/tickbus-journal");
  tb_journal_record jr;
  EXPECT(tb_journal_next(NULL, &jr), TB_ERROR_NULL_POINTER, "journal is NULL");
  tb_journal_destroy(NULL);

  if (strcmp(tb_status_name(12345), "unknown status") != 0) failures++;
  if (tb_abi_version() != TB_ABI_VERSION) failures++;
  if (failures == 0) printf("errors: all documented errors returned\n");
  return failures == 0 ? 0 : 1;
}
