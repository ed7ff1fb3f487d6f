"""A DataLoader with one worker whose __getitem__ calls torch.sigmoid: the first hit of wrapper_CPU_sigmoid
is in the worker process (the main process never calls it)."""
import torch
from torch.utils.data import DataLoader, Dataset


class Items(Dataset):
    def __len__(self):
        return 2

    def __getitem__(self, i):
        return torch.sigmoid(torch.ones(2) * i)


if __name__ == "__main__":
    print("BATCHES", len(list(DataLoader(Items(), batch_size=1, num_workers=1))), flush=True)
