/* Proof that the C ABI's hot path makes no syscall and no allocation: a thread publishes and
 * polls through tickbus.h (publish, send, claim/store/commit, poll, poll_into, and a publish
 * refused by a full reliable ring) under a seccomp filter that traps every syscall but
 * rt_sigreturn and exit into a counting SIGSYS handler (the syscall fails with ENOSYS), with
 * malloc and friends interposed by counting wrappers. A control phase proves both detectors
 * fire. Not built with sanitizers (they interpose malloc themselves).
 * argv[1]: a unique ring name. Prints the counts; exits 0 only if the steady state had none. */
#define _GNU_SOURCE
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <errno.h>
#include <signal.h>
#include <ucontext.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "tickbus.h"

/* Counting allocator: glibc's own entry points under the public names. */
extern void* __libc_malloc(size_t);
extern void* __libc_calloc(size_t, size_t);
extern void* __libc_realloc(void*, size_t);
extern void* __libc_memalign(size_t, size_t);
extern void __libc_free(void*);

static __thread unsigned long allocs;
static __thread volatile unsigned long traps;

void* malloc(size_t n) {
  allocs++;
  return __libc_malloc(n);
}
void* calloc(size_t a, size_t b) {
  allocs++;
  return __libc_calloc(a, b);
}
void* realloc(void* p, size_t n) {
  allocs++;
  return __libc_realloc(p, n);
}
void free(void* p) { __libc_free(p); }
void* memalign(size_t a, size_t n) {
  allocs++;
  return __libc_memalign(a, n);
}
void* aligned_alloc(size_t a, size_t n) {
  allocs++;
  return __libc_memalign(a, n);
}
int posix_memalign(void** out, size_t a, size_t n) {
  allocs++;
  void* p = __libc_memalign(a, n);
  if (p == NULL) return 12; /* ENOMEM */
  *out = p;
  return 0;
}

static void on_sigsys(int sig, siginfo_t* info, void* ctx) {
  (void)sig;
  (void)info;
  traps++;
  /* The trapped syscall was not executed; make it return -ENOSYS. */
#if defined(__x86_64__)
  ((ucontext_t*)ctx)->uc_mcontext.gregs[REG_RAX] = -ENOSYS;
#endif
}

static int trap_syscalls_on_this_thread(void) {
  struct sock_filter f[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_rt_sigreturn, 2, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_exit, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = {.len = sizeof f / sizeof f[0], .filter = f};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return -1;
  /* No SECCOMP_FILTER_FLAG_TSYNC: this thread only. */
  return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog);
}

struct result {
  unsigned long control_traps, control_allocs, traps, allocs, messages, full;
  int failed;
};

static const char* ring;

#define N 100000

static void* run(void* arg) {
  struct result* res = arg;
  char uri[256];
  snprintf(uri, sizeof uri, "shm:%s?reliable&slots=256&payload=96", ring);
  tb_open_options o;
  tb_publisher* p;
  tb_subscriber* s;
  if (tb_open_options_init(&o) != TB_OK || tb_publisher_open(uri, &o, &p) != TB_OK ||
      tb_subscriber_open(uri, &o, &s) != TB_OK) {
    fprintf(stderr, "open: %s\n", tb_last_error());
    res->failed = 1;
    return NULL;
  }
  tb_quote q, got;
  memset(&q, 0, sizeof q);
  q.header.msg_type = TB_MSG_QUOTE;
  q.header.version = 1;
  q.header.length = TB_LEN_QUOTE;
  tb_recv r;
  uint64_t pos;
  /* Warm-up: every call once, including the full-ring error (its message buffer's first use). */
  for (int k = 0; k < 300; k++) (void)tb_publisher_send(p, &q, sizeof q, &pos);
  (void)tb_last_error();
  for (int k = 0; k < 300; k++) (void)tb_subscriber_poll(s, &r);
  (void)tb_publisher_claim(p, 16, &pos);
  (void)tb_publisher_claim_store_word(p, 0, 1);
  (void)tb_publisher_commit(p, &pos);
  (void)tb_subscriber_poll(s, &r);

  if (trap_syscalls_on_this_thread() != 0) {
    res->failed = 1;
    return NULL;
  }
  /* Control: one syscall and one allocation are seen. */
  unsigned long t0 = traps, a0 = allocs;
  long rc = syscall(SYS_getppid);
  void* volatile leak = malloc(24);
  free(leak);
  res->control_traps = traps - t0;
  res->control_allocs = allocs - a0;
  if (rc != -1 || errno != ENOSYS) res->failed = 2; /* trapped, not executed */

  t0 = traps;
  a0 = allocs;
  for (uint64_t k = 0; k < N; k++) {
    q.instrument_id = (uint32_t)k;
    tb_status st;
    switch (k % 3) {
      case 0:
        st = tb_publisher_send(p, &q, sizeof q, &pos);
        break;
      case 1:
        st = tb_publisher_publish(p, &q, sizeof q, &pos);
        break;
      default:
        st = tb_publisher_claim(p, sizeof q, &pos);
        if (st == TB_OK) st = tb_publisher_claim_write(p, &q, sizeof q);
        if (st == TB_OK) st = tb_publisher_claim_store_word(p, 4, k);
        if (st == TB_OK) st = tb_publisher_commit(p, &pos);
        break;
    }
    if (st != TB_OK) {
      if (!res->failed) res->failed = 10 + (int)st;
    }
    st = (k & 1) ? tb_subscriber_poll_into(s, &got, sizeof got, &r) : tb_subscriber_poll(s, &r);
    if ((st != TB_OK || r.kind != TB_RECV_MESSAGE) && !res->failed) res->failed = 100 + (int)st * 10 + (int)r.kind;
    res->messages++;
  }
  /* Fill the ring and be refused: the error path, message included, is hot too. */
  for (int k = 0; k < 300; k++) {
    if (tb_publisher_publish(p, &q, sizeof q, &pos) == TB_ERROR_FULL) {
      res->full++;
      (void)tb_status_retry_helps(TB_ERROR_FULL);
    }
  }
  res->traps = traps - t0;
  res->allocs = allocs - a0;
  /* Tear-down is not the hot path; it runs trapped, so it is left to process exit. */
  return NULL;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: hot_path RING_NAME\n");
    return 2;
  }
  ring = argv[1];
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_sigsys;
  sa.sa_flags = SA_SIGINFO;
  sigaction(SIGSYS, &sa, NULL);
  struct result res;
  memset(&res, 0, sizeof res);
  pthread_t t;
  pthread_create(&t, NULL, run, &res);
  pthread_join(t, NULL);
  if (res.failed) printf("failed: %d\n", res.failed);
  printf("control: %lu syscalls, %lu allocations\n", res.control_traps, res.control_allocs);
  printf("steady state: %lu messages, %lu refused by a full ring, %lu syscalls, %lu allocations\n",
         res.messages, res.full, res.traps, res.allocs);
  int ok = !res.failed && res.control_traps == 1 && res.control_allocs == 1 && res.messages == N &&
           res.full >= 1 && res.traps == 0 && res.allocs == 0;
  return ok ? 0 : 1;
}
