"""Shared test setup. Being here puts ``tests/`` on ``sys.path`` (pytest's prepend import
mode), so tests anywhere below can ``import certs`` (TLS certificates for loopback servers).
"""
