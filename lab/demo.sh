#!/usr/bin/env bash
# The main job, end to end, on any machine with BTF (no spare disk needed):
# a file-backed loop device with XFS, GNU tar extracting the first DEMO_FILES files of
# the kernel tarball (Debian's linux-source-6.1) recorded by iowhy, then the trace's
# summary, the full report and its HTML page. Everything it creates is removed at exit.
#
#   make demo                      # 5,000 files
#   make demo DEMO_FILES=all       # the whole tree
#   DEMO_FS=ext4 make demo         # another filesystem
set -euo pipefail
cd "$(dirname "$0")/.."

FILES=${DEMO_FILES:-5000}
[ "$FILES" = all ] && FILES=0
FS=${DEMO_FS:-xfs}
OUT=${DEMO_OUT:-out}
IOWHY=.venv/bin/iowhy
PY=/usr/bin/python3

if [ "$(id -u)" != 0 ]; then
    echo "demo: needs root (loop devices, mounts and BPF): run it with sudo" >&2
    exit 1
fi
mkdir -p "$OUT"

echo "== preparing the tarball (first ${DEMO_FILES:-5000} files, cached in /var/cache/iowhy)"
TAR=$($PY lab/workloads.py prepare --files "$FILES")

WORK=$(mktemp -d "${TMPDIR:-/var/tmp}/iowhy-demo.XXXXXX")
LOOP=""
cleanup() {
    set +e
    if mountpoint -q "$WORK/mnt"; then umount "$WORK/mnt"; fi
    if [ -n "$LOOP" ]; then
        echo "write back" > "/sys/block/${LOOP#/dev/}/queue/write_cache"
        losetup -d "$LOOP"
    fi
    rm -rf "$WORK"
}
trap cleanup EXIT

size=$(( FILES == 0 ? 4096 : 1024 ))
truncate -s "${size}M" "$WORK/disk.img"
LOOP=$(losetup --find --show "$WORK/disk.img")
# A disk with a volatile write cache, as loop devices are by default (the setting
# outlives a loop binding, so set it rather than inherit it).
echo "${DEMO_CACHE:-write back}" > "/sys/block/${LOOP#/dev/}/queue/write_cache"
case "$FS" in
    xfs) mkfs.xfs -q -f "$LOOP" ;;
    ext4) mkfs.ext4 -q -F "$LOOP" ;;
    btrfs) mkfs.btrfs -q -f "$LOOP" ;;
    *) echo "demo: DEMO_FS must be xfs, ext4 or btrfs" >&2; exit 2 ;;
esac
mkdir "$WORK/mnt"
mount "$LOOP" "$WORK/mnt"
echo "== $FS on $LOOP (file-backed loop device, write cache: $(cat /sys/block/${LOOP#/dev/}/queue/write_cache))"

TRACE="$OUT/untar-$FS.iowt"
echo "== iowhy record -o $TRACE -- tar -xf $(basename "$TAR") && sync"
$IOWHY record -o "$TRACE" --dev "$LOOP" -- sh -c "tar -xf '$TAR' -C '$WORK/mnt' && sync"

echo
echo "== iowhy info $TRACE"
$IOWHY info "$TRACE"

if $IOWHY report --help >/dev/null 2>&1; then
    echo
    echo "== iowhy report $TRACE"
    $IOWHY report "$TRACE"
    $IOWHY report "$TRACE" --html "$OUT/untar-$FS.html"
    echo
    echo "HTML report: $OUT/untar-$FS.html"
fi
