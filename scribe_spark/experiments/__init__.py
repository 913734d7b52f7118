"""One module per job: parameters in, tables and plots out (SPEC experiments)."""
