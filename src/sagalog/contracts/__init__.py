"""Event contracts: the schema catalog, event headers, validation and the wire codec."""
