"""The HTTP service for live campaigns (``crowdbudget serve``).

``create_app`` is imported on first use, so that :mod:`crowdbudget.service.settings` (read by
the command line to show the defaults) needs none of the service's extras installed.
"""

from typing import Any

__all__ = ["ServiceSettings", "create_app"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from crowdbudget.service.app import create_app

        return create_app
    if name == "ServiceSettings":
        from crowdbudget.service.settings import ServiceSettings

        return ServiceSettings
    raise AttributeError(f"module 'crowdbudget.service' has no attribute {name!r}")
