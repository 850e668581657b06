"""The REST API (django-ninja), mounted at ``/api/``: OpenAPI schema at ``/api/openapi.json``, docs at ``/api/docs``.

Not a Django app (no models): ``config/urls.py`` includes :mod:`unpooled.service.api.urls`.
"""
