"""Amber engine: reports, claims, verification, protocols, runs."""
