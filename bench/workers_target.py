"""bench_workers.py's target: a DataLoader with two worker processes whose __getitem__ calls torch.tensor."""
import sys

import torch
from torch.utils.data import DataLoader, Dataset

N = int(sys.argv[1]) if len(sys.argv) > 1 else 200


class Items(Dataset):
    def __len__(self):
        return N

    def __getitem__(self, i):
        return torch.tensor([i])


if __name__ == "__main__":
    print("BATCHES", len(list(DataLoader(Items(), batch_size=1, num_workers=2))), flush=True)
