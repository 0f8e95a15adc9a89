"""Topology as code: topics and the schemas they carry, declared in ``topology/*.yaml``."""
