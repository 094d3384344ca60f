"""What the benchmarks run against and with: the services they serve, the bare
baselines, the load clients and the shared helpers. Nothing here is run on its own."""
