"""A Python stack of known shape, no torch: any CPython 3.10+ runs it.

Main thread, innermost first: bottom, recurse x301, numbers (a generator), in_exec and <module> of
exec'd code "<known-exec>", inner and outer (asyncio coroutines), the event loop, main, <module>.
A named thread "known-worker" waits in Event.wait (``wait``: calls bin() every 50 ms first). At the
bottom the main thread says "ready" on stdout, then: ``stop`` (default) stops the process with
SIGSTOP; ``call`` calls bin() once (break on PyNumber_ToBase, which every CPython exports and nothing
else calls at start-up, LTO builds too); ``wait`` calls bin() every 50 ms until killed (attach, then
break on it).
"""
import asyncio
import os
import signal
import sys
import threading
import time

MODE = sys.argv[1] if len(sys.argv) > 1 else "stop"
DEPTH = 300
started = threading.Event()
release = threading.Event()


def bottom():
    print("ready", flush=True)
    if MODE == "stop":
        os.kill(os.getpid(), signal.SIGSTOP)
    elif MODE == "call":
        bin(DEPTH)
    else:
        while True:
            bin(DEPTH)
            time.sleep(0.05)


def recurse(n):
    if n == 0:
        return bottom()
    return recurse(n - 1)


def numbers():
    yield recurse(DEPTH)


EXEC_SOURCE = """
def in_exec():
    return list(numbers())

in_exec()
"""


async def inner():
    exec(compile(EXEC_SOURCE, "<known-exec>", "exec"), {"numbers": numbers})


async def outer():
    await inner()


def waiter():
    started.set()
    while MODE == "wait":
        bin(1)
        time.sleep(0.05)
    release.wait()


def main():
    sys.setrecursionlimit(10000)
    worker = threading.Thread(target=waiter, name="known-worker", daemon=True)
    worker.start()
    started.wait()
    asyncio.run(outer())
    release.set()
    worker.join()


main()
