"""torch.sigmoid called from a generator that an asyncio coroutine iterates: three Python frames above
the hit's native ones that belong to two other eval loops (the coroutine's and the generator's)."""
import asyncio

import torch

x = torch.ones(2)


def gen():
    yield torch.sigmoid(x)


async def main():
    for _ in gen():
        pass


asyncio.run(main())
print("DONE", flush=True)
