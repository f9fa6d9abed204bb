"""Fleet-wide search: an index of topics, groups, clients, brokers, clusters and configs kept as the data arrives.

The poller (backend.collect) and the Spark job (backend.pipeline) hand it what changed; the views (backend.views
.search_views) query it. It lives in the lake under `_state/search/`, written only through backend.store.
"""
