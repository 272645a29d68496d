/* OpenVSL native SDK: the C API (the stable ABI).
 *
 * A `vsl_dev` is one LUN of a flash card, reached without block emulation: atomic
 * vectored writes, persistent and atomic trim, exists queries, an iterator over mapped
 * ranges, a sparse address space. Two ways to open one, with the same calls and the same
 * semantics after:
 *   - in-process (vsl_open_card): the card's engines run inside the application, which
 *     then owns the card exclusively (-EBUSY while vsld or another process has it);
 *   - attached (vsl_attach): to a running vsld, through shared-memory submission and
 *     completion rings (memfd + eventfd); I/O buffers from vsl_buf_alloc are passed to the
 *     daemon without copying.
 *
 * Conventions. Every function returns 0 (or a count) on success and a negative errno on
 * failure; nothing is half done on failure unless the function says so. Addresses and
 * lengths are in sectors (vsl_caps.sector_bytes). All functions are thread-safe; a
 * `vsl_dev` may be shared by threads. Asynchronous calls take a callback that runs in the
 * thread that calls vsl_poll for that device, never inside the submitting call. Errors:
 *   -EINVAL     bad handle use, range outside the device, zero length, null buffer,
 *               oversize batch, a sector both written and trimmed in one atomic batch
 *   -ENOSPC     a sparse device's flash is full (or reduced-write after die failures)
 *   -EPERM      the LUN is read-only (after die failures)
 *   -EIO        the data could not be stored or read back intact
 *   -EAGAIN     too many I/Os in flight on this device (vsl_caps.queue_depth)
 *   -ENOTCONN   attached mode: the daemon went away (restart it and attach again; an
 *               atomic batch in flight is then either wholly applied or not at all)
 *   -EBUSY      in-process open of a card another process owns
 *   -ENOENT     no such card, LUN or daemon socket
 */
#ifndef VSL_VSL_H_
#define VSL_VSL_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define VSL_SDK_VERSION_MAJOR 1
#define VSL_SDK_VERSION_MINOR 0

typedef struct vsl_dev vsl_dev;

/* Capability flags (vsl_caps.flags). */
#define VSL_CAP_ATOMIC_WRITE 0x1u     /* vsl_write_atomic */
#define VSL_CAP_ATOMIC_TRIM 0x2u      /* trims inside an atomic batch */
#define VSL_CAP_PERSISTENT_TRIM 0x4u  /* a trimmed sector reads as zeroes, also after a power cut */
#define VSL_CAP_SPARSE 0x8u           /* logical space larger than the flash */
#define VSL_CAP_VOLATILE_CACHE 0x10u  /* power-loss protection absent: only flushed data is safe */

typedef struct vsl_caps {
  uint32_t sector_bytes;        /* 512 or 4096 */
  uint32_t flags;               /* VSL_CAP_* */
  uint64_t sectors;             /* logical size */
  uint32_t atomic_max_vectors;  /* vectors (writes and trims) in one atomic batch */
  uint32_t max_io_sectors;      /* sectors in one read or write */
  uint64_t atomic_max_sectors;  /* sectors written by one atomic batch, all vectors together */
  uint32_t queue_depth;         /* I/Os in flight per device before -EAGAIN */
  uint32_t atomic_max_trims;    /* of the vectors of one atomic batch, trims */
  uint32_t reserved[6];
} vsl_caps;

typedef struct vsl_usage {
  uint64_t logical_sectors;   /* the address space */
  uint64_t mapped_sectors;    /* sectors that exist (written and not trimmed) */
  uint64_t physical_sectors;  /* flash room for user data, in sectors (sparse: the limit) */
  uint64_t reserved[5];
} vsl_usage;

/* One part of an atomic batch. */
#define VSL_VEC_WRITE 0u
#define VSL_VEC_TRIM 1u
typedef struct vsl_vec {
  uint64_t lba;
  uint64_t count;   /* sectors */
  const void* buf;  /* VSL_VEC_WRITE: count sectors; NULL for trims */
  uint32_t op;      /* VSL_VEC_WRITE or VSL_VEC_TRIM */
  uint32_t reserved;
} vsl_vec;

typedef struct vsl_range {
  uint64_t lba;
  uint64_t count;
} vsl_range;

/* Write flags. */
#define VSL_FUA 0x1u  /* complete only once on flash (not just in the protected buffer) */

typedef void (*vsl_done_fn)(void* arg, int result);

/* Returns the library's version as major << 16 | minor. */
uint32_t vsl_version(void);
/* A static English description of a result code (0 or -errno). */
const char* vsl_strerror(int result);
/* Why the last vsl_open_card or vsl_attach in this thread failed, in words (e.g. the
 * daemon's reason for refusing an attach), or "" if it did not. Valid until the next
 * such call in this thread. */
const char* vsl_last_error(void);

/* Opens LUN `lun` (0..3 on a dual-pipe duo card) of the card `card_dir` in-process,
 * attaching it (recovery runs here if it was not shut down cleanly). `card_dir` is a card
 * spec (docs/backends.md): a directory or "sim:DIR" (the simulated card), and with the
 * static SDK also "rtl:DIR", "kernel:DIR" (co-simulated cards) and "xrt:N"; libvsl.so
 * answers -EOPNOTSUPP for those (attach to vsld serving them instead).
 * Stores the handle in *out and returns 0, or stores NULL and returns -errno: -ENOENT (no
 * card or LUN), -EBUSY (the card is owned by vsld or another process), -ENODEV (the LUN
 * is unformatted), -EINVAL (a malformed spec), -EOPNOTSUPP, -EIO. */
int vsl_open_card(const char* card_dir, uint32_t lun, vsl_dev** out);

/* Options of vsl_open_card_opts. Zero-fill it, then set `size` to sizeof(vsl_open_opts)
 * (fields added later are zero for callers built before them). */
#define VSL_TIMING_MODEL 0u /* the card's NAND timing model (default) */
#define VSL_TIMING_NONE 1u  /* zero-time card: NAND operations complete as soon as their data
                               has moved; FTL, parity, groomer and checkpoints run for real.
                               A benchmarking mode for the host path, simulated cards only. */
typedef struct vsl_open_opts {
  uint32_t size;   /* sizeof(vsl_open_opts) */
  uint32_t timing; /* VSL_TIMING_MODEL or VSL_TIMING_NONE */
  uint64_t reserved[3];
} vsl_open_opts;
/* vsl_open_card with options (NULL: the defaults). -EINVAL for a `size` too small, an
 * unknown timing, reserved fields not zero, or VSL_TIMING_NONE on a card that is not
 * simulated. */
int vsl_open_card_opts(const char* card_dir, uint32_t lun, const vsl_open_opts* opts, vsl_dev** out);
/* Attaches to LUN `lun_name` ("lun0", or "card1/lun2" with several cards) of the vsld
 * whose SDK socket is `socket_path` (NULL: the default, /run/openvsl/vsld-sdk.sock).
 * Stores the handle in *out and returns 0, or stores NULL and returns -errno (-ENOENT,
 * -ECONNREFUSED, -ENOTCONN). */
int vsl_attach(const char* socket_path, const char* lun_name, vsl_dev** out);
/* Waits for every I/O in flight (their callbacks run here if not yet polled), then
 * closes. In-process: detaches the LUN cleanly (checkpoint) and releases the card.
 * NULL is accepted. The handle is invalid after. */
int vsl_close(vsl_dev* dev);

int vsl_get_caps(vsl_dev* dev, vsl_caps* caps);
int vsl_get_usage(vsl_dev* dev, vsl_usage* usage);

/* I/O buffers. In attached mode a buffer from here lives in memory shared with the
 * daemon and is used without a copy; any other buffer is copied through a bounce area.
 * Aligned to 4096 bytes. NULL when out of memory. vsl_buf_free(dev, NULL) is a no-op. */
void* vsl_buf_alloc(vsl_dev* dev, size_t bytes);
void vsl_buf_free(vsl_dev* dev, void* buf);

/* Synchronous I/O. Unmapped (never written or trimmed) sectors read as zeroes. */
int vsl_read(vsl_dev* dev, uint64_t lba, uint32_t count, void* buf);
int vsl_write(vsl_dev* dev, uint64_t lba, uint32_t count, const void* buf, uint32_t flags);
/* Persistent trim: the sectors read as zeroes from now on, also after power cuts. */
int vsl_trim(vsl_dev* dev, uint64_t lba, uint64_t count);
/* Completes once every write acknowledged before it is on flash. */
int vsl_flush(vsl_dev* dev);
/* Atomic vectored write: `n` vectors (writes and trims, any LBAs) applied all or nothing,
 * also across power cuts and crashes of the application or the daemon. Trims apply
 * before writes; of two writes of one sector the later vector wins. -EINVAL (nothing
 * applied) beyond vsl_caps' atomic limits (vectors, trims, sectors written). */
int vsl_write_atomic(vsl_dev* dev, const vsl_vec* vecs, uint32_t n, uint32_t flags);

/* Exists: returns how many of the `count` sectors from `lba` are mapped (0..count), or
 * -errno. A sector exists once written and until trimmed. */
int64_t vsl_exists(vsl_dev* dev, uint64_t lba, uint64_t count);
/* Mapped-range iterator: fills up to `max` runs of mapped sectors found in [lba,
 * lba + count), in order, stores their number in *n and where to go on in *next (lba +
 * count, clipped to the device, when the range is done). Returns 0 or -errno. */
int vsl_mapped_ranges(vsl_dev* dev, uint64_t lba, uint64_t count, vsl_range* out, uint32_t max,
                      uint32_t* n, uint64_t* next);

/* Asynchronous I/O: returns 0 once submitted (the callback then always runs, with 0 or
 * -errno) or -errno without calling it (-EAGAIN when the device's queue is full). The
 * buffers must stay valid until the callback. */
int vsl_read_async(vsl_dev* dev, uint64_t lba, uint32_t count, void* buf, vsl_done_fn fn,
                   void* arg);
int vsl_write_async(vsl_dev* dev, uint64_t lba, uint32_t count, const void* buf, uint32_t flags,
                    vsl_done_fn fn, void* arg);
int vsl_trim_async(vsl_dev* dev, uint64_t lba, uint64_t count, vsl_done_fn fn, void* arg);
int vsl_flush_async(vsl_dev* dev, vsl_done_fn fn, void* arg);
/* The vectors are copied; their buffers must stay valid until the callback. */
int vsl_write_atomic_async(vsl_dev* dev, const vsl_vec* vecs, uint32_t n, uint32_t flags,
                           vsl_done_fn fn, void* arg);
/* Runs callbacks of completed asynchronous I/Os in the calling thread: waits up to
 * `timeout_ms` (0: do not wait, -1: for ever) until at least `min` have completed, runs
 * at most `max` (0: all available). Returns the number run, or -errno. */
int vsl_poll(vsl_dev* dev, uint32_t min, uint32_t max, int timeout_ms);
/* I/Os submitted and whose callbacks have not run yet. */
uint32_t vsl_inflight(vsl_dev* dev);

#ifdef __cplusplus
}
#endif
#endif /* VSL_VSL_H_ */
