/* OpenVSL native SDK: a key-value store on a LUN (C API, part of the stable ABI).
 *
 * Keys of 1 to VSL_KV_MAX_KEY bytes map to values of 0 to vsl_kv_max_value() bytes (1 MiB
 * by default on a sparse LUN), in pools (independent namespaces, numbered from 0). Each
 * put, delete and batch put is one atomic vectored write: after a power cut or a crash a
 * key holds its old value or its new one, never a mix, with no journal of the store's own.
 * Entries may carry an expiry time (Unix seconds; 0 = none): an expired entry reads as
 * absent and its place is reused. Layout: docs/formats/kv.md.
 *
 * Thread-safety: all calls are thread-safe. Gets, exists and iteration run in parallel
 * (each value is checked against its CRC, and read again if a put replaced it meanwhile);
 * puts and deletes of one store are serialized.
 * Errors (negative errno): -EINVAL bad handle, pool, key or value length, oversize batch,
 * duplicate key in a batch, or a LUN that holds something other than a store; -ENOENT no
 * such key (or expired); -ENOSPC no free place near the key's home (the pool is too
 * full) or the LUN is full; -ENOBUFS the value is larger than the buffer (the buffer then
 * holds its first buf_len bytes); the device's errors (-EIO, -ENOTCONN, ...) as they come.
 */
#ifndef VSL_VSL_KV_H_
#define VSL_VSL_KV_H_

#include <stdint.h>

#include "vsl/vsl.h"

#ifdef __cplusplus
extern "C" {
#endif

#define VSL_KV_MAX_KEY 128u

typedef struct vsl_kv vsl_kv;

typedef struct vsl_kv_opts {
  uint32_t max_pools;        /* 0: 16. Fixed when the store is created. */
  uint32_t max_value_bytes;  /* 0: 1 MiB on a sparse LUN, 64 KiB otherwise (as the atomic
                                limits allow). Fixed when the store is created. */
  uint32_t reserved[6];
} vsl_kv_opts;

typedef struct vsl_kv_pair {
  const void* key;
  uint32_t key_len;
  uint32_t value_len;
  const void* value;
  uint64_t expiry;  /* Unix seconds; 0: never */
} vsl_kv_pair;

/* Opens the store on `dev` (which must stay open until vsl_kv_close), creating it if the
 * LUN's first sector was never written. `opts` may be NULL. Stores the handle in *out
 * and returns 0, or stores NULL and returns -errno. */
int vsl_kv_open(vsl_dev* dev, const vsl_kv_opts* opts, vsl_kv** out);
/* Closes the handle (the data is already durable). NULL is accepted. */
int vsl_kv_close(vsl_kv* kv);
uint32_t vsl_kv_max_value(vsl_kv* kv);
uint32_t vsl_kv_max_pools(vsl_kv* kv);

int vsl_kv_put(vsl_kv* kv, uint32_t pool, const void* key, uint32_t key_len, const void* value,
               uint32_t value_len, uint64_t expiry);
/* Copies up to `buf_len` bytes of the value to `buf` and returns the value's length, or
 * -errno (-ENOBUFS if it did not fit; -ENOENT if absent). */
int64_t vsl_kv_get(vsl_kv* kv, uint32_t pool, const void* key, uint32_t key_len, void* buf,
                   uint32_t buf_len);
int vsl_kv_delete(vsl_kv* kv, uint32_t pool, const void* key, uint32_t key_len);
/* 1 if the key is there (and not expired), 0 if not, or -errno. */
int vsl_kv_exists(vsl_kv* kv, uint32_t pool, const void* key, uint32_t key_len);
/* Puts `n` pairs of one pool all or nothing (one atomic write). -EINVAL when the batch
 * exceeds the device's atomic limits or names a key twice. */
int vsl_kv_batch_put(vsl_kv* kv, uint32_t pool, const vsl_kv_pair* pairs, uint32_t n);
/* Iteration over a pool, in no particular order: start with *cursor = 0; each call
 * stores the next key (up to key_cap bytes) and its lengths and returns 1, or returns 0
 * at the end, or -errno. Keys put or deleted meanwhile may or may not be seen. */
int vsl_kv_next(vsl_kv* kv, uint32_t pool, uint64_t* cursor, void* key, uint32_t key_cap,
                uint32_t* key_len, uint32_t* value_len);

#ifdef __cplusplus
}
#endif
#endif /* VSL_VSL_KV_H_ */
