"""A target that reads its standard input: a line with input(), then says what it got."""
print("ready", flush=True)
name = input("your name? ")
print(f"got {name!r}", flush=True)
