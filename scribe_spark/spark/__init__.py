"""Spark at run time: the session every job uses (`session`), frames of driver data and Arrow helpers
(`arrow`), and what Spark's Python workers need (`worker_exit`, `worker_imports`)."""
