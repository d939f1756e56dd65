"""Syscall names of the x86_64 syscall numbers the recorder stores.
"""

from __future__ import annotations


SYSCALL_NAMES_X86_64 = {
    0: "read", 1: "write", 2: "open", 3: "close", 4: "stat", 5: "fstat", 6: "lstat", 7: "poll",
    8: "lseek", 9: "mmap", 10: "mprotect", 11: "munmap", 12: "brk", 16: "ioctl", 17: "pread64",
    18: "pwrite64", 19: "readv", 20: "writev", 21: "access", 23: "select", 24: "sched_yield",
    26: "msync", 28: "madvise", 35: "nanosleep", 40: "sendfile", 56: "clone", 57: "fork",
    58: "vfork", 59: "execve", 60: "exit", 61: "wait4", 72: "fcntl", 73: "flock", 74: "fsync",
    75: "fdatasync", 76: "truncate", 77: "ftruncate", 78: "getdents", 82: "rename",
    83: "mkdir", 84: "rmdir", 85: "creat", 86: "link", 87: "unlink", 88: "symlink",
    89: "readlink", 90: "chmod", 91: "fchmod", 92: "chown", 93: "fchown", 132: "utime",
    162: "sync", 202: "futex", 217: "getdents64", 221: "fadvise64", 230: "clock_nanosleep",
    231: "exit_group", 232: "epoll_wait", 235: "utimes", 257: "openat", 258: "mkdirat",
    260: "fchownat", 262: "newfstatat", 263: "unlinkat", 264: "renameat", 265: "linkat",
    266: "symlinkat", 268: "fchmodat", 269: "faccessat", 270: "pselect6", 271: "ppoll",
    277: "sync_file_range", 280: "utimensat", 281: "epoll_pwait", 285: "fallocate",
    295: "preadv", 296: "pwritev", 306: "syncfs", 316: "renameat2", 326: "copy_file_range",
    327: "preadv2", 328: "pwritev2", 332: "statx", 426: "io_uring_enter", 435: "clone3",
    437: "openat2",
}


def syscall_name(nr: int) -> str:
    if nr == -2:  # --syscalls sync via raw_tp: outside a traced call, registers unread
        return "untraced-syscall"
    if nr < 0:
        return "none"
    return SYSCALL_NAMES_X86_64.get(nr, f"syscall_{nr}")
