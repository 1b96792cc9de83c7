"""Capturing evidence online: Serper searches, Jina Reader and direct page fetches, under
an address policy, written into a bundle (:mod:`.pipeline`); ``drift`` captures again and
compares. Import the modules themselves; this package exports nothing, so reading one
part does not load the HTTP clients and extractors of the others."""
