#!/usr/bin/env bash
# The kernel's own NBD client: nbd-client attaches a LUN over the Unix socket as /dev/nbd0
# (block size = the LUN's sector size, 512 B here) -> mkfs.ext4 -> mount -> a file tree ->
# umount -> fsck -> vsld stopped and started, the LUN detached and attached -> fsck,
# checksums -> fio verify; the filesystem test of nbd_fs_test.sh on the kernel's driver.
# Needs the nbd module: run it in the VM (tests/vm/run-in-vm; ctest block_nbd_kernel);
# skips (exit 77) saying so where the module is absent.
#   nbd_kernel_test.sh VSLD VSLCTL [SECTOR_BYTES]
exec "$(dirname "$0")/nbd_fs_test.sh" "$1" "$2" "${3:-512}" nbd
