"""Client-side tools behind `hermod producer`, `consumer`, `queue stat` and `perf`."""
