"""The latency lab: real servers (xrootd, nginx) on 127.0.0.1 behind toxiproxy, for tests and benchmarks."""

from cherenkov_lab.servers import Lab, NginxServer, Toxiproxy, XrootdFederation, XrootdServer, free_port

__all__ = ["Lab", "NginxServer", "Toxiproxy", "XrootdFederation", "XrootdServer", "free_port"]
