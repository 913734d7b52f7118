"""Independent computations the tests and the jobs' checks compare against: brute force and a sequential Scribe."""
