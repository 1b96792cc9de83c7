"""``amber serve``: the frozen web over HTTP. Bundles are indexed (:mod:`.index`), a
request is matched to a capture (:mod:`.match`) and answered in the service's own shape
(:mod:`.answer`) by a loopback server (:mod:`.server`), directly or behind an
intercepting proxy (:mod:`.proxy`, :mod:`.proxy_addon`, :mod:`.ca`); :mod:`.log` keeps
the request log and the misses."""
