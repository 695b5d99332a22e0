"""NVIDIA GPUs: ioctl request decoding (nvidia) and NVML readings through ctypes (nvml).
May import: tracer.events, tracer.linux."""
