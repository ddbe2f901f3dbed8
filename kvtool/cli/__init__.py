"""The command line: thin wiring from options to library calls to rendered output."""
