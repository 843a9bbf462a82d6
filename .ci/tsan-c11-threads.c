/* Preloaded under ThreadSanitizer (.ci/sanitize): librdkafka (the mock cluster) runs its threads,
 * mutexes and condition variables through C11 <threads.h>, which glibc implements without the
 * pthread symbols TSan intercepts. This routes the C11 calls librdkafka uses to the pthread
 * functions; glibc defines the C11 types as the pthread ones, so the casts are what glibc does. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <threads.h>

struct start { thrd_start_t func; void* arg; };
static void* trampoline(void* p) {
  struct start s = *(struct start*)p;
  free(p);
  return (void*)(intptr_t)s.func(s.arg);
}
static int result(int rc) {
  return rc == 0 ? thrd_success : rc == ENOMEM ? thrd_nomem : rc == EBUSY ? thrd_busy
       : rc == ETIMEDOUT ? thrd_timedout : thrd_error;
}
int thrd_create(thrd_t* thr, thrd_start_t func, void* arg) {
  struct start* s = malloc(sizeof *s);
  if (!s) return thrd_nomem;
  s->func = func;
  s->arg = arg;
  int rc = pthread_create((pthread_t*)thr, NULL, trampoline, s);
  if (rc) free(s);
  return result(rc);
}
int thrd_join(thrd_t thr, int* res) {
  void* r = NULL;
  int rc = pthread_join((pthread_t)thr, &r);
  if (rc == 0 && res) *res = (int)(intptr_t)r;
  return result(rc);
}
int thrd_detach(thrd_t thr) { return result(pthread_detach((pthread_t)thr)); }
int mtx_init(mtx_t* m, int type) {
  pthread_mutexattr_t a;
  pthread_mutexattr_init(&a);
  if (type & mtx_recursive) pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
  int rc = pthread_mutex_init((pthread_mutex_t*)m, &a);
  pthread_mutexattr_destroy(&a);
  return result(rc);
}
int mtx_lock(mtx_t* m) { return result(pthread_mutex_lock((pthread_mutex_t*)m)); }
int mtx_trylock(mtx_t* m) { return result(pthread_mutex_trylock((pthread_mutex_t*)m)); }
int mtx_timedlock(mtx_t* restrict m, const struct timespec* restrict t) {
  return result(pthread_mutex_timedlock((pthread_mutex_t*)m, t));
}
int mtx_unlock(mtx_t* m) { return result(pthread_mutex_unlock((pthread_mutex_t*)m)); }
void mtx_destroy(mtx_t* m) { pthread_mutex_destroy((pthread_mutex_t*)m); }
int cnd_init(cnd_t* c) { return result(pthread_cond_init((pthread_cond_t*)c, NULL)); }
int cnd_signal(cnd_t* c) { return result(pthread_cond_signal((pthread_cond_t*)c)); }
int cnd_broadcast(cnd_t* c) { return result(pthread_cond_broadcast((pthread_cond_t*)c)); }
int cnd_wait(cnd_t* c, mtx_t* m) { return result(pthread_cond_wait((pthread_cond_t*)c, (pthread_mutex_t*)m)); }
int cnd_timedwait(cnd_t* restrict c, mtx_t* restrict m, const struct timespec* restrict t) {
  return result(pthread_cond_timedwait((pthread_cond_t*)c, (pthread_mutex_t*)m, t));
}
void cnd_destroy(cnd_t* c) { pthread_cond_destroy((pthread_cond_t*)c); }
void call_once(once_flag* f, void (*func)(void)) { pthread_once((pthread_once_t*)f, func); }
