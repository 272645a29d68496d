#!/usr/bin/env bash
# The long run of the kernel-driver tests (label slow, in the VM): many SIGKILL rounds on
# ublk and on the kernel NBD client, and the filesystem test in the combinations the
# default suite leaves out (both sizes on ublk, 4 KiB on nbd).
#   kernel_campaign.sh VSLD VSLCTL [UBLK_ROUNDS] [NBD_ROUNDS]
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
"$HERE/kernel_kill_test.sh" "$1" "$2" ublk "${3:-30}"
"$HERE/kernel_kill_test.sh" "$1" "$2" nbd "${4:-15}"
"$HERE/nbd_fs_test.sh" "$1" "$2" 512 ublk
"$HERE/nbd_fs_test.sh" "$1" "$2" 4096 ublk
"$HERE/nbd_fs_test.sh" "$1" "$2" 4096 nbd
