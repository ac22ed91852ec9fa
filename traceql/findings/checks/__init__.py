"""The checks, one module per checklist area; importing this package registers them all (registry.CHECKS)."""

from . import bandwidth, communication, compute, device, memory, overlap

__all__ = ["bandwidth", "communication", "compute", "device", "memory", "overlap"]
