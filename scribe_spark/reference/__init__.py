"""Independent computations that tests and jobs' checks compare with: brute force, a sequential Scribe."""
