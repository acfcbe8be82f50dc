"""``crowdbudget serve``: the HTTP service for live campaigns, with its operator key and limits.

Without an operator key anyone who reaches the server may create campaigns, so the server
then binds only to a loopback address (127.0.0.1, ::1, localhost) and says so; give one with
``--operator-key-file PATH`` (its first line) or ``$CROWDBUDGET_OPERATOR_KEY`` to serve on
another interface. A port already in use is one line and exit status 2, before anything
starts.
"""

from __future__ import annotations

import argparse
import errno
import ipaddress
import math
import socket
import sys
from typing import Any

from crowdbudget.cli.common import positive_float, positive_int
from crowdbudget.exceptions import InvalidParameterError

_LOOPBACK_NAMES = ("localhost",)


def _port(text: str) -> int:
    value = positive_int(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"expected a port in 1..65535, got {value}")
    return value


def is_loopback(host: str) -> bool:
    """Whether ``host`` names only this machine (127.0.0.0/8, ::1, localhost)."""
    if host.lower() in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_port_free(host: str, port: int) -> None:
    """Refuse, in one line, a port another process already listens on (uvicorn would print
    a banner first and then die with a traceback-like error and exit status 3)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as error:
            if error.errno == errno.EADDRINUSE:
                raise InvalidParameterError(
                    f"port {port} on {host} is already in use; choose another with --port"
                ) from None
            raise InvalidParameterError(
                f"cannot listen on {host}:{port}: {error.strerror}"
            ) from None


def add_serve_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``serve`` sub-command to ``subparsers`` (of ``build_parser``)."""
    from crowdbudget.service.settings import ServiceSettings

    defaults = ServiceSettings()
    srv: argparse.ArgumentParser = subparsers.add_parser(
        "serve",
        help="serve live campaigns over HTTP (API under /v1)",
        description="Serve live campaigns over HTTP: create campaigns, issue worker tokens, hand "
        "out assignments, accept labels. Every accepted event is stored before it is "
        "acknowledged. Creating campaigns needs the operator key when one is given; without "
        "one the server binds only to loopback. Every limit below is the server's: no client "
        "can raise it.",
        epilog="examples:\n"
        "  crowdbudget serve --db sqlite:///campaigns.db\n"
        "  CROWDBUDGET_OPERATOR_KEY=$(cat op.key) crowdbudget serve --host 0.0.0.0 --port 8080",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    srv.add_argument(
        "--db", default="sqlite:///crowdbudget.db", help="SQLAlchemy URL (sqlite:///PATH)"
    )
    srv.add_argument("--host", default="127.0.0.1", help="interface to bind (127.0.0.1)")
    srv.add_argument("--port", type=_port, default=8000, help="port (8000)")
    srv.add_argument(
        "--operator-key-file",
        default=None,
        metavar="PATH",
        help="file whose first line is the operator key (default: $CROWDBUDGET_OPERATOR_KEY)",
    )
    limits = srv.add_argument_group("limits")
    for flag, kind, value, text in [
        ("--max-body-bytes", positive_int, defaults.max_body_bytes, "request body size"),
        ("--max-items-per-request", positive_int, defaults.max_items_per_request, "items"),
        ("--max-id-length", positive_int, defaults.max_id_length, "id / label length"),
        (
            "--max-campaigns-in-memory",
            positive_int,
            defaults.max_campaigns_in_memory,
            "campaigns held in memory (least recently used evicted)",
        ),
        (
            "--max-items-in-memory",
            positive_int,
            defaults.max_items_in_memory,
            "items of the campaigns held in memory, in all",
        ),
        (
            "--max-pending-per-worker",
            positive_int,
            defaults.default_max_pending_per_worker,
            "unanswered assignments per worker unless the requester sets more",
        ),
        ("--default-ttl", positive_float, defaults.default_ttl, "seconds before expiry"),
        ("--setup-timeout", positive_float, defaults.setup_timeout, "seconds for a policy set-up"),
        ("--max-policy-cost", positive_float, defaults.max_policy_cost, "a policy's set-up cost"),
        ("--compute-timeout", positive_float, defaults.compute_timeout, "seconds for a verdict"),
        (
            "--compute-memory-bytes",
            positive_int,
            defaults.compute_memory_bytes,
            "address space of a set-up or verdict child process",
        ),
        ("--max-compute-jobs", positive_int, defaults.max_compute_jobs, "such children at once"),
        (
            "--shutdown-grace",
            positive_float,
            defaults.shutdown_grace,
            "seconds requests may finish after SIGTERM",
        ),
        (
            "--keep-alive-timeout",
            positive_float,
            defaults.keep_alive_timeout,
            "seconds an idle keep-alive connection stays open (above the balancer's)",
        ),
        (
            "--max-items-per-campaign",
            positive_int,
            defaults.max_items_per_campaign,
            "items of one campaign, at creation and after adding items",
        ),
        ("--max-campaigns", positive_int, defaults.max_campaigns, "campaigns on this server"),
        (
            "--max-campaigns-per-key",
            positive_int,
            defaults.max_campaigns_per_key,
            "campaigns created with one operator key",
        ),
        (
            "--requests-per-second-per-key",
            positive_float,
            defaults.requests_per_second_per_key,
            "sustained requests per second with one key (429 beyond it)",
        ),
        (
            "--request-burst-per-key",
            positive_int,
            defaults.request_burst_per_key,
            "requests one key may send at once before the rate applies",
        ),
        (
            "--read-cache-bytes",
            positive_int,
            defaults.read_cache_bytes,
            "bytes of cached results / status / calibration answers",
        ),
    ]:
        shown = "none" if value is None else int(value) if float(value).is_integer() else value
        limits.add_argument(flag, type=kind, default=None, help=f"{text} ({shown})")
    srv.add_argument(
        "--log-level", default="warning", choices=["critical", "error", "warning", "info", "debug"]
    )
    srv.set_defaults(func=cmd_serve)
    return srv


def _freeze_startup_heap() -> None:
    """Import what the first campaign would import (the policies pull in numba, scipy, …),
    then move every object alive so far out of the cyclic garbage collector's reach
    (``gc.freeze``). A full collection otherwise rescans these ~10^5 long-lived objects each
    time it runs — measured 90-140 ms per collection on the 2-core machine, a pause every
    request in flight waits out. Refcounting still frees them; only cycles among them would
    stay (module-level objects that live as long as the process anyway)."""
    import gc

    from crowdbudget.policies import builtin  # noqa: F401  (registers the policies)

    gc.collect()
    gc.freeze()


def cmd_serve(args: argparse.Namespace) -> int:
    try:
        import uvicorn

        from crowdbudget.service import create_app
        from crowdbudget.service.settings import ServiceSettings, read_operator_key
    except ImportError:
        raise InvalidParameterError(
            "the service needs its extras: in a clone, pip install -e '.[service]'; "
            "from the registry, pip install 'crowdbudget[service]'"
        ) from None
    operator_key = read_operator_key(args.operator_key_file)
    if operator_key is None and not is_loopback(args.host):
        raise InvalidParameterError(
            f"refusing to serve on {args.host} without an operator key (anyone could create "
            "campaigns): give --operator-key-file PATH or $CROWDBUDGET_OPERATOR_KEY, or bind "
            "to 127.0.0.1"
        )
    defaults = ServiceSettings()
    settings = defaults.with_changes(
        operator_key=operator_key,
        max_body_bytes=args.max_body_bytes,
        max_items_per_request=args.max_items_per_request,
        max_id_length=args.max_id_length,
        max_campaigns_in_memory=args.max_campaigns_in_memory,
        max_items_in_memory=args.max_items_in_memory,
        default_max_pending_per_worker=args.max_pending_per_worker,
        max_pending_per_worker=max(
            defaults.max_pending_per_worker, args.max_pending_per_worker or 0
        ),
        default_ttl=args.default_ttl,
        max_ttl=max(defaults.max_ttl, args.default_ttl or 0.0),
        setup_timeout=args.setup_timeout,
        max_policy_cost=args.max_policy_cost,
        compute_timeout=args.compute_timeout,
        compute_memory_bytes=args.compute_memory_bytes,
        max_compute_jobs=args.max_compute_jobs,
        shutdown_grace=args.shutdown_grace,
        keep_alive_timeout=args.keep_alive_timeout,
        max_items_per_campaign=args.max_items_per_campaign,
        max_campaigns=args.max_campaigns,
        max_campaigns_per_key=args.max_campaigns_per_key,
        requests_per_second_per_key=args.requests_per_second_per_key,
        request_burst_per_key=args.request_burst_per_key,
        read_cache_bytes=args.read_cache_bytes,
    )
    check_port_free(args.host, args.port)
    app = create_app(args.db, settings=settings)
    _freeze_startup_heap()
    who = (
        "campaigns need the operator key"
        if operator_key is not None
        else "no operator key: anyone on this machine may create campaigns"
    )
    print(
        f"crowdbudget service on http://{args.host}:{args.port}/v1 "
        f"(OpenAPI: /openapi.json, docs: /docs), database {args.db}; {who}",
        file=sys.stderr,
    )
    # access lines are logged at level info: below that, skip building them per request
    access_log = args.log_level in ("info", "debug")
    # after SIGTERM, requests in flight get shutdown_grace seconds, then are cancelled (a
    # cancelled request kills its child process): the server stops within a few seconds
    uvicorn.run(
        app,
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        access_log=access_log,
        timeout_graceful_shutdown=math.ceil(settings.shutdown_grace),  # uvicorn takes whole s
        timeout_keep_alive=math.ceil(settings.keep_alive_timeout),
    )
    return 0
