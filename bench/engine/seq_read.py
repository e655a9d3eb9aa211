#!/usr/bin/env python3
"""Sequential read of files as `dd bs=16M` does it, the yardstick for loading weights.

    seq_read.py drop FILE...   evict the files' pages from the page cache (POSIX_FADV_DONTNEED)
    seq_read.py read FILE...   read each file once, in order, 16 MiB at a time; prints JSON
                               {"bytes", "seconds", "gbps"}
"""
import json
import os
import sys
import time

BLOCK = 16 << 20


def drop(paths):
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def read(paths):
    buf = bytearray(BLOCK)
    view = memoryview(buf)
    total, start = 0, time.monotonic()
    for p in paths:
        with open(p, "rb", buffering=0) as f:
            while True:
                n = f.readinto(view)
                if not n:
                    break
                total += n
    seconds = time.monotonic() - start
    return {"bytes": total, "seconds": seconds, "gbps": total / seconds / 1e9}


def main():
    if len(sys.argv) < 3 or sys.argv[1] not in ("drop", "read"):
        sys.exit(__doc__)
    if sys.argv[1] == "drop":
        drop(sys.argv[2:])
    else:
        print(json.dumps(read(sys.argv[2:])))


if __name__ == "__main__":
    main()
