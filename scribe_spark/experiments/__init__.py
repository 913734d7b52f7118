"""One module per job: parameters in, tables and plots out (the experiments of docs/model.md)."""
