"""iowhy: where did the elapsed time of an I/O-heavy workload go?"""

__version__ = "0.1.0"
