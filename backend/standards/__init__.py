"""Standards: a policy file (TOML) evaluated against what the lake holds, with waivers (docs/standards.md).

`policy` parses and validates the file (errors name file, line, key and why), `values` compares values and
versions, `evaluate` judges one policy on one cluster (pure), `client_facts` reads the Spark results a client policy
needs, and `engine` evaluates a whole poll incrementally for the poller. Results are typed
(`backend.store.standards_model`) so every door (pages, report, /metrics, `check`, an API) reads the same ones.
"""
