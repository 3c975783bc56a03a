"""Security for the controller's listeners: TLS contexts, SASL state machines, ACLs.

Everything except :mod:`kraft_jbod.security.tls` is pure (no sockets, no clocks).
"""
