"""A Python stack of known shape, no torch: any CPython 3.10+ runs it.

Main thread, innermost first: bottom, recurse x301, numbers (a generator), in_exec and <module> of
exec'd code "<known-exec>", inner and outer (asyncio coroutines), the event loop, main, <module>.
A named thread "known-worker" waits in Event.wait (``wait``: calls bin() every 50 ms first). At the
bottom the main thread says "ready" on stdout, then: ``stop`` (default) stops the process with
SIGSTOP; ``call`` calls bin() once (break on PyNumber_ToBase, which every CPython exports and nothing
else calls at start-up, LTO builds too); ``wait`` calls bin() every 50 ms until killed (attach, then
break on it); ``detach FILE`` calls bin() every 50 ms, and once FILE exists stops the process with
SIGSTOP on that same line (the stack of a hit recorded there is then there again for other tools).
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
    elif MODE == "detach":
        while True:
            # One line: a hit in bin() and the stop after it have the same Python stack.
            bin(DEPTH); os.path.exists(sys.argv[2]) and os.kill(os.getpid(), signal.SIGSTOP)  # noqa: E702
            time.sleep(0.05)
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
