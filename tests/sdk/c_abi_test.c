/* The SDK from C, linked against libvsl.so alone: the headers are C, and the shared
 * library exports what they declare. Usage: c_abi_test CARD_DIR (a formatted card). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vsl/vsl.h"
#include "vsl/vsl_kv.h"
#include "vsl/vsl_sqlite.h"

#define CHECK(cond)                                                   \
  do {                                                                \
    if (!(cond)) {                                                    \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      exit(1);                                                        \
    }                                                                 \
  } while (0)

static int completed;
static void on_done(void* arg, int result) {
  (void)arg;
  CHECK(result == 0);
  ++completed;
}

int main(int argc, char** argv) {
  vsl_dev* dev = NULL;
  vsl_caps caps;
  vsl_usage usage;
  vsl_vec vecs[2];
  vsl_range runs[4];
  uint32_t n = 0;
  uint64_t next = 0;
  unsigned char* buf;
  unsigned char* back;
  vsl_kv* kv = NULL;
  char value[16];
  int i;
  CHECK(argc == 2);
  CHECK((vsl_version() >> 16) == VSL_SDK_VERSION_MAJOR);
  CHECK(vsl_open_card(argv[1], 0, &dev) == 0);
  CHECK(vsl_get_caps(dev, &caps) == 0);
  CHECK(caps.flags & VSL_CAP_ATOMIC_WRITE);
  buf = (unsigned char*)vsl_buf_alloc(dev, 4 * caps.sector_bytes);
  back = (unsigned char*)vsl_buf_alloc(dev, 4 * caps.sector_bytes);
  CHECK(buf != NULL && back != NULL);
  for (i = 0; i < (int)(4 * caps.sector_bytes); ++i) buf[i] = (unsigned char)(i * 7);
  CHECK(vsl_write(dev, 10, 4, buf, 0) == 0);
  CHECK(vsl_read(dev, 10, 4, back) == 0);
  CHECK(memcmp(buf, back, 4 * caps.sector_bytes) == 0);
  vecs[0].lba = 100;
  vecs[0].count = 2;
  vecs[0].buf = buf;
  vecs[0].op = VSL_VEC_WRITE;
  vecs[0].reserved = 0;
  vecs[1].lba = 12;
  vecs[1].count = 1;
  vecs[1].buf = NULL;
  vecs[1].op = VSL_VEC_TRIM;
  vecs[1].reserved = 0;
  CHECK(vsl_write_atomic(dev, vecs, 2, 0) == 0);
  CHECK(vsl_exists(dev, 10, 4) == 3);
  CHECK(vsl_mapped_ranges(dev, 0, caps.sectors, runs, 4, &n, &next) == 0);
  CHECK(n == 3 && runs[0].lba == 10 && runs[0].count == 2 && runs[2].lba == 100);
  CHECK(vsl_get_usage(dev, &usage) == 0 && usage.mapped_sectors == 5);
  for (i = 0; i < 64; ++i) CHECK(vsl_write_async(dev, 1000 + (uint64_t)i, 1, buf, 0, on_done, NULL) == 0);
  while (completed < 64) CHECK(vsl_poll(dev, 1, 0, -1) >= 0);
  CHECK(vsl_write(dev, caps.sectors, 1, buf, 0) == -EINVAL);
  CHECK(vsl_flush(dev) == 0);
  vsl_buf_free(dev, buf);
  vsl_buf_free(dev, back);
  CHECK(vsl_close(dev) == 0);
  /* The key-value store and the SQLite VFS from C, on another LUN. */
  CHECK(vsl_open_card(argv[1], 1, &dev) == 0);
  CHECK(vsl_kv_open(dev, NULL, &kv) == 0);
  CHECK(vsl_kv_put(kv, 0, "key", 3, "value", 5, 0) == 0);
  CHECK(vsl_kv_get(kv, 0, "key", 3, value, sizeof(value)) == 5 && memcmp(value, "value", 5) == 0);
  CHECK(vsl_kv_close(kv) == 0);
  CHECK(vsl_close(dev) == 0);
  CHECK(vsl_open_card(argv[1], 2, &dev) == 0);
  CHECK(vsl_sqlite_vfs_register(dev, "vsl-c", 0) == 0);
  CHECK(vsl_sqlite_vfs_unregister("vsl-c") == 0);
  CHECK(vsl_close(dev) == 0);
  printf("C API through libvsl.so: ok\n");
  return 0;
}
