"""Benchmarks of Eugo Lab against the engines users already know (``make bench``)."""
