"""The controller's request handlers, one module per API family.

Each module exposes ``handle_<api>(ctx, call, request) -> Outcome`` functions; the table
in :mod:`kraft_jbod.controller.state` maps an api key to its request class and handler.
To add an API: write one module here (or a function in the family's module) and add one
row to ``ROUTES`` in ``state.py``.
"""
