"""Pastry overlay: converged node state and bulk-synchronous routing on Spark."""
