"""The HTTP service for live campaigns (``crowdbudget serve``)."""

from crowdbudget.service.app import create_app

__all__ = ["create_app"]
