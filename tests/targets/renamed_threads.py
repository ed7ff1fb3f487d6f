"""Threads whose OS names change between hits of PyNumber_ToBase (``bin()``), for the names pttrace records.

The main thread calls bin() under its own name, then renames itself (its /proc comm file) and calls it
again twice; two threads, one after the other, each rename themselves before their bin() and end.
"""
import os
import threading


def rename(name: str) -> None:
    with open(f"/proc/self/task/{threading.get_native_id()}/comm", "w") as fh:
        fh.write(name)


def worker(name: str) -> None:
    rename(name)
    bin(7)


def main() -> None:
    bin(1)
    rename("pt-renamed")
    bin(2)
    bin(3)
    for name in ("pt-first", "pt-second"):
        t = threading.Thread(target=worker, args=(name,))
        t.start()
        t.join()
    rename("pt-last")
    bin(4)
    print("done", os.getpid(), flush=True)


if __name__ == "__main__":
    main()
