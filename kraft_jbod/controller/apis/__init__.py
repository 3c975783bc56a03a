"""The controller's request handlers, one module per API family.

Each module exposes ``handle_<api>(ctx, call, request) -> Outcome`` functions; the table
in :mod:`kraft_jbod.controller.routes` maps an api key to its request class, handler and
the rest of what the controller knows about the API.
To add an API: write one module here (or a function in the family's module) and add one
``Route`` to ``ROUTES`` in ``routes.py``.
"""
