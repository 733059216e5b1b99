/*
** owner.c: thread tokens (owner.h). One POSIX TLS key, made once per process and
** never deleted, holds each thread's token; its destructor, run by the system when
** the thread ends, marks the token ended and drops the thread's reference. A
** runtime that ends a Worker ends its OS thread (Bun and Deno do: checked with a
** TLS destructor, docs/design/core.md "Transactions of threads that ended"), so no
** JavaScript has to run for the engine to notice.
**
** The destructor is code of this library, run at any thread's end, perhaps long
** after the last database closed: the library must still be mapped then. So the
** key is made only once the library is pinned (dlopen with RTLD_NODELETE of the
** object this code lies in), or when that object is the main program (a static
** link), which is never unloaded. Where neither holds, there are no tokens and no
** transaction is ever released this way (the engine works as before).
**
** Windows: a fiber-local slot (FlsAlloc) whose callback runs at each thread's end,
** made once the DLL is pinned (GetModuleHandleEx with the PIN flag).
**
** Owns: the TLS key and the tokens. Never touches: databases, lanes, SQLite.
*/
#ifndef _WIN32
#ifndef _GNU_SOURCE
#  define _GNU_SOURCE
#endif
#endif
#include "mw_internal.h"
#include "core/owner.h"

#include <stdlib.h>

struct mw_owner {
  int refs;                    /* the thread's own (until it ends) + lanes' */
  int ended;                   /* its thread ended */
  int turns;                   /* hot-spot turns taken by the thread and still held */
  int write_locks;             /* engine write locks it took, still held (lane.c) */
};

void mw_owner_ref(mw_owner *o) { __atomic_add_fetch(&o->refs, 1, __ATOMIC_RELAXED); }

void mw_owner_unref(mw_owner *o) {
  if (__atomic_sub_fetch(&o->refs, 1, __ATOMIC_ACQ_REL) == 0) free(o);
}

int mw_owner_ended(mw_owner *o) { return __atomic_load_n(&o->ended, __ATOMIC_ACQUIRE); }

void mw_owner_turns_add(mw_owner *o, int delta) { __atomic_add_fetch(&o->turns, delta, __ATOMIC_RELAXED); }

int mw_owner_turns(mw_owner *o) { return __atomic_load_n(&o->turns, __ATOMIC_RELAXED); }

int *mw_owner_write_locks(mw_owner *o) { return &o->write_locks; }

/* A new token for the calling thread, holding the thread's own reference. */
static mw_owner *token_new(void) {
  mw_owner *o = calloc(1, sizeof *o);
  if (o) o->refs = 1;
  return o;
}

/* The thread ended: its token says so, and its reference goes. */
static void token_ended(mw_owner *o) {
  __atomic_store_n(&o->ended, 1, __ATOMIC_RELEASE);
  mw_owner_unref(o);
}

#ifdef _WIN32

/* A fiber-local slot: its callback runs when a thread ends (and when a fiber is
** deleted: the engine is not used from fibers). The DLL is pinned first, as below. */
static DWORD slot = FLS_OUT_OF_INDEXES;
static INIT_ONCE slot_once = INIT_ONCE_STATIC_INIT;

static VOID NTAPI slot_end(PVOID p) {
  if (p) token_ended(p);
}

static BOOL CALLBACK slot_make(PINIT_ONCE once, PVOID param, PVOID *ctx) {
  (void)once;
  (void)param;
  (void)ctx;
  HMODULE self = 0;
  if (!GetModuleHandleExW(GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS | GET_MODULE_HANDLE_EX_FLAG_PIN,
                          (LPCWSTR)(void *)slot_end, &self)) {
    sqlite3_log(SQLITE_WARNING, "multiwriter: the library cannot be kept loaded: transactions "
                "of threads that ended are not released");
    return TRUE;
  }
  slot = FlsAlloc(slot_end);
  return TRUE;
}

mw_owner *mw_owner_self(void) {
  if (!InitOnceExecuteOnce(&slot_once, slot_make, 0, 0) || slot == FLS_OUT_OF_INDEXES) return 0;
  mw_owner *o = FlsGetValue(slot);
  if (o) return o;
  o = token_new();
  if (o == 0) return 0;
  if (!FlsSetValue(slot, o)) {
    free(o);
    return 0;
  }
  return o;
}

#else

#include <dlfcn.h>
#include <pthread.h>
#if defined(__linux__)
#  include <link.h>
#endif

static pthread_key_t key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static int key_ok;

static void token_end(void *p) { token_ended(p); }

#if defined(__linux__)
/* 1 when addr lies in a loaded segment of the first object dl_iterate_phdr visits:
** the main program. */
struct find_main { const char *addr; int first, found; };
static int in_main_cb(struct dl_phdr_info *info, size_t size, void *arg) {
  struct find_main *f = arg;
  (void)size;
  int is_first = f->first;
  f->first = 0;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD) continue;
    const char *lo = (const char *)(info->dlpi_addr + ph->p_vaddr);
    if (f->addr >= lo && f->addr < lo + ph->p_memsz) {
      f->found = is_first;
      return 1;
    }
  }
  return 0;
}
#endif

/* Keeps the object holding this code mapped for the life of the process: 1 when it
** is (pinned now, or the main program). */
static int pin_self(void) {
  Dl_info info;
  if (dladdr((void *)token_end, &info) && info.dli_fname && info.dli_fname[0]) {
    void *h = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
    /* The reference this takes is never given back: the object stays anyway. */
    if (h) return 1;
  }
#if defined(__linux__)
  struct find_main f = {(const char *)(void *)token_end, 1, 0};
  dl_iterate_phdr(in_main_cb, &f);
  return f.found;
#else
  return 0;
#endif
}

static void key_make(void) {
  if (!pin_self()) {
    sqlite3_log(SQLITE_WARNING, "multiwriter: the library cannot be kept loaded: transactions "
                "of threads that ended are not released");
    return;
  }
  key_ok = pthread_key_create(&key, token_end) == 0;
}

mw_owner *mw_owner_self(void) {
  if (pthread_once(&key_once, key_make) != 0 || !key_ok) return 0;
  mw_owner *o = pthread_getspecific(key);
  if (o) return o;
  o = token_new();
  if (o == 0) return 0;
  if (pthread_setspecific(key, o) != 0) {
    free(o);
    return 0;
  }
  return o;
}

#endif /* !_WIN32 */
