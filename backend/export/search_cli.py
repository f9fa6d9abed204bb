"""`python -m backend search TEXT [--mode substring|prefix|regex] [--kind KIND ...] [--lake ...] --format json|text`.

Searches the lake's index (backend/search) like the Search page, for scripts and for checking: JSON is a list of hits,
each with `kind`, `cluster`, `name`, `field`, `value`, `match`, `state`, `id`, `detail`, `link`, ... (best first);
text is one hit per line, every untrusted string made visible (a bidi override shows as <U+202E>) and cut at 200
characters. `--across topic|group` shows TEXT as a topic name or group id across the fleet instead (json, text or
csv). The command reads the lake with the rights of whoever runs it: every cluster of the lake.
Exit 0 (hits or none), 2 with a message for a refused query or a bad lake.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterable

from backend.config import configured_lake
from backend.export.csv_safe import safe_csv
from backend.plain_text import capped, visible
from backend.search.query import DEFAULT_LIMIT, MAX_LIMIT, MODES, QueryRefused
from backend.search.tables import KINDS
from backend.store.location import LAKE_HELP
from backend.views import search_views

TEXT_CHARS = 200


def add_search_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the search sub-command's arguments to parser."""
    parser.add_argument("text", help="what to look for (a topic name or id, group id, client id, broker host, ...)")
    parser.add_argument("--mode", choices=MODES, default="substring",
                        help="substring (default), prefix, or regex (RE2 syntax, stopped at its time limit)")
    parser.add_argument("--kind", action="append", choices=KINDS, default=None,
                        help="only this kind (repeat for several; default every kind)")
    parser.add_argument("--cluster", action="append", default=None, help="only this cluster (repeat for several)")
    parser.add_argument("--current-only", action="store_true", help="leave out deleted topics and groups")
    parser.add_argument("--limit", type=int, default=DEFAULT_LIMIT, help=f"hits returned (1-{MAX_LIMIT}, best first)")
    parser.add_argument("--format", choices=("json", "text", "csv"), default="text",
                        help="json: a list of hits; text: one per line; csv: the hits (or the --across rows)")
    parser.add_argument("--across", choices=("topic", "group"), default=None,
                        help="show TEXT as a topic name (with its MirrorMaker 2 copies) or a group id across the fleet")
    parser.add_argument("--mirror-alias", action="append", default=None,
                        help="--across topic: a MirrorMaker 2 source alias (repeat; default the fleet file's "
                             "mirror_aliases, else the cluster names)")
    parser.add_argument("--lake", default=None, help=LAKE_HELP)
    parser.add_argument("--config", default=None, help="fleet file (TOML) whose lake_path is the default lake")


def _line(*parts: object) -> str:
    return "  ".join(capped(visible(p), TEXT_CHARS) for p in parts if p not in (None, ""))


def _hits_text(result: search_views.SearchResult) -> Iterable[str]:
    for h in result.hits:
        why = f"{h.match} match on {h.field}" + (f": {h.value}" if h.value != h.name else "")
        yield _line(h.kind, h.cluster, h.name, why, f"id {h.id}" if h.id else None, h.detail,
                    f"deleted {h.deleted_at.isoformat()}" if h.deleted_at else None)
    shown = f"{len(result.hits):,} of {result.total:,}" if result.truncated else f"{result.total:,}"
    per_kind = ", ".join(f"{k} {n:,}" for k, n in result.counts.items() if n)
    yield f"{shown} matches in {result.clusters:,} cluster{'' if result.clusters == 1 else 's'}" + (f" ({per_kind})" if per_kind else "")


def _fleet_settings(config: str | None) -> tuple[list[str] | None, str]:
    from backend.config import FleetConfigError, default_fleet_file, load_fleet

    path = config or default_fleet_file()
    if not path:
        return None, search_views.DEFAULT_SEPARATOR
    try:
        settings = load_fleet(path, resolve_secrets=False).settings
    except (FleetConfigError, OSError):
        return None, search_views.DEFAULT_SEPARATOR
    return settings.mirror_aliases, settings.mirror_separator


def run_search_command(args: argparse.Namespace) -> int:
    """Run one search (or across view) and print it; 0, or 2 with a message."""
    try:
        return _run(args)
    except BrokenPipeError:  # `| head`: the reader has what it wanted (stdout to devnull, so the exit's flush is quiet)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _run(args: argparse.Namespace) -> int:
    try:
        location = configured_lake(args.lake, fleet_file=args.config)
        snapshot = search_views.IndexReader(location).snapshot()
        if args.across:
            return _across(args, location, snapshot)
        result = search_views.search(snapshot, args.text, mode=args.mode, kinds=args.kind, clusters=args.cluster,
                                     include_deleted=not args.current_only, limit=args.limit)
    except (QueryRefused, ValueError, OSError) as exc:  # a bad lake location or fleet file is a ValueError
        print(f"search: {exc}", file=sys.stderr)
        return 2
    for note in result.notes:
        print(f"search: {note}", file=sys.stderr)
    if args.format == "json":
        print(json.dumps([h.to_dict() for h in result.hits], indent=2))
    elif args.format == "csv":
        sys.stdout.write(safe_csv(search_views.hits_frame(result)))
    else:
        print("\n".join(_hits_text(result)))
    return 0


def _across(args: argparse.Namespace, location: str, snapshot: search_views.IndexSnapshot) -> int:
    view: search_views.TopicAcross | search_views.GroupAcross
    if args.across == "topic":
        aliases, separator = _fleet_settings(args.config)
        topic = search_views.topic_across(location, snapshot, args.text, aliases=args.mirror_alias or aliases,
                                          separator=separator)
        view, frame = topic, topic.copies_frame()
    else:
        group = search_views.group_across(location, snapshot, args.text)
        view, frame = group, group.frame()
    if args.format == "json":
        print(json.dumps(view.to_dict(), indent=2, default=str))
    elif args.format == "csv":
        sys.stdout.write(safe_csv(frame))
    else:
        for note in view.notes:
            print(visible(note))
        for row in frame.astype(object).where(frame.notna(), None).to_dict("records"):
            print(_line(*(f"{k}={v}" for k, v in row.items() if v not in (None, ""))))
    return 0
