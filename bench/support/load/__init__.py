"""Load generators; each runs in its own process and prints one JSON line."""
