"""Model payloads by reference: a content-addressed blob store (``store``) and the
schema-driven walks that put payloads in it and find them again (``fields``)."""
