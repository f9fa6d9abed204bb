"""The API's routers, one small file each; a new endpoint family is one more file and one more line here."""

from __future__ import annotations

from fastapi import APIRouter

from backend.api.routes import audit, clients, clusters, groups, incidents, meta, readiness, search, topics

ROUTERS: tuple[APIRouter, ...] = (meta.router, clusters.router, topics.router, groups.router, clients.router,
                                  incidents.router, readiness.router, audit.router, search.router)
