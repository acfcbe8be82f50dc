"""The answers that are not JSON: the dashboard page (HTML), the labels' export (CSV), and
the interactive API docs served from the installed ``fastapi-offline`` package."""

from __future__ import annotations

import base64
import hashlib
import re
from importlib import resources

from fastapi import APIRouter, FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse, PlainTextResponse
from starlette.staticfiles import StaticFiles

from crowdbudget.service.dependencies import RequesterDep, ServiceDep

router = APIRouter()

DASHBOARD_HTML = resources.files("crowdbudget.service").joinpath("dashboard.html").read_text()


def _content_security_policy(html: str) -> str:
    """A CSP allowing exactly the page's own inline ``<script>`` and ``<style>`` blocks (by
    their SHA-256) and requests to this server; nothing may frame the page."""

    def hashes(tag: str) -> str:
        blocks = re.findall(rf"<{tag}>(.*?)</{tag}>", html, flags=re.DOTALL)
        return " ".join(
            "'sha256-" + base64.b64encode(hashlib.sha256(b.encode()).digest()).decode() + "'"
            for b in blocks
        )

    return (
        f"default-src 'none'; script-src {hashes('script')}; style-src {hashes('style')}; "
        "connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; "
        "frame-ancestors 'none'"
    )


DASHBOARD_CSP = _content_security_policy(DASHBOARD_HTML)


@router.get("/dashboard/{campaign_id}", response_class=HTMLResponse, include_in_schema=False)
def dashboard_page(campaign_id: str) -> HTMLResponse:
    """The live dashboard page; it holds no data, so it needs no key (the page reads the
    requester key from the URL fragment, ``#key=...``, keeps it in the tab's session
    storage and removes it from the address bar). Its Content-Security-Policy allows
    only its own inline script and style and requests to this server."""
    return HTMLResponse(
        DASHBOARD_HTML,
        headers={"content-security-policy": DASHBOARD_CSP, "cache-control": "no-store"},
    )


@router.get("/v1/campaigns/{campaign_id}/export", response_class=PlainTextResponse)
def export(campaign_id: str, _: RequesterDep, service: ServiceDep) -> str:
    """Every label received, as crowd-kit's CSV ``task,worker,label``."""
    frame = service.run(campaign_id, lambda c: c.export_labels(), read=True)
    return str(frame.to_csv(index=False))


#: Swagger UI and ReDoc with their assets from this server (FastAPI's defaults load them
#: from a CDN, so the pages were blank offline)
docs_router = APIRouter(include_in_schema=False)


@docs_router.get("/docs")
def swagger_ui() -> HTMLResponse:
    return get_swagger_ui_html(
        openapi_url="/openapi.json",
        title="crowdbudget API",
        swagger_js_url="/docs-static/swagger-ui-bundle.js",
        swagger_css_url="/docs-static/swagger-ui.css",
        swagger_favicon_url="/docs-static/favicon.png",
    )


@docs_router.get("/redoc")
def redoc() -> HTMLResponse:
    return get_redoc_html(
        openapi_url="/openapi.json",
        title="crowdbudget API",
        redoc_js_url="/docs-static/redoc.standalone.js",
        redoc_favicon_url="/docs-static/favicon.png",
        with_google_fonts=False,
    )


def mount_docs(app: FastAPI) -> None:
    """Swagger UI at ``/docs`` and ReDoc at ``/redoc``, their scripts and styles served
    from the installed ``fastapi-offline`` package (nothing, on an install without it)."""
    try:
        static = resources.files("fastapi_offline").joinpath("static")
    except ModuleNotFoundError:  # an install without the service extra's docs assets
        return
    app.mount("/docs-static", StaticFiles(directory=str(static)), name="docs-static")
    app.include_router(docs_router)
