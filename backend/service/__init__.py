"""`serve`: one process that supervises the poller, ingest, the warm Spark driver and the UI."""
