"""Who sees what: OIDC claims to per-cluster grants, session age, safe exposure, and the visible scope of the lake."""
