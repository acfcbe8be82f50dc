"""The service's routes, one module per resource; :func:`crowdbudget.service.app.create_app`
includes their routers in a fixed order (routes are matched, and documented, in order)."""
