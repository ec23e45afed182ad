"""The sans-I/O streaming core and the turn runner."""
