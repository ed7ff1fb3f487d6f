"""PyTorch's operators and dispatcher as pttrace knows them: operator lookup, native_functions.yaml, the key-set ABI, the frame-to-layer rules."""
