"""C++ and terminal text: splitting C++ names, escaping untrusted strings."""
