"""The bundle as a file format: WARC records (:mod:`.warc`), the SQLite evidence index
(:mod:`.index`), the directory and its life cycle (:mod:`.store`), the WACZ manifest and
package (:mod:`.manifest`, :mod:`.wacz`), digests and cross-checks (:mod:`.verify`),
signatures (:mod:`.signing`) and statistics (:mod:`.stats`)."""
