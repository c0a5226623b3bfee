"""The benchmark suite: layer configurations and the harnesses that time strategies on them."""
