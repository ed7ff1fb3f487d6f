"""Tests of the Textual TUI (a package, so that test module names never clash with other folders)."""
