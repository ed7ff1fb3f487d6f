"""Many threads calling torch.add at once, each counting its own calls: the workers start together behind a
barrier and the main thread calls too meanwhile, so hits arrive on several threads while the others run
(torch's binding releases the GIL around the op). Each thread's count differs (and moves with the pid), so a
hit recorded on the wrong thread, or lost, changes a count. Prints the main thread's id (``MAIN lwp``) and ``COUNTS {lwp: calls}`` at the end."""
import json
import os
import threading

import torch

WORKERS = 6
a = torch.ones(2)
counts = {}
start = threading.Barrier(WORKERS + 1)


def worker(calls: int) -> None:
    start.wait()
    for _ in range(calls):
        torch.add(a, a)  # HAMMER-WORKER
    counts[threading.get_native_id()] = calls


threads = [threading.Thread(target=worker, args=(40 + 13 * k + os.getpid() % 7,)) for k in range(WORKERS)]
for t in threads:
    t.start()
start.wait()
mine = 30 + os.getpid() % 11
for _ in range(mine):
    torch.add(a, a)  # HAMMER-MAIN
for t in threads:
    t.join()
counts[threading.get_native_id()] = mine
print(f"MAIN {threading.get_native_id()}", flush=True)
print("COUNTS " + json.dumps(counts), flush=True)
