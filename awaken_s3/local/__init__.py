"""Local stand-ins for AWS: moto and SeaweedFS servers on 127.0.0.1 only.

Used by the tests, the benchmarks and the local demo. Every server is started
on loopback and stopped by its PID.
"""
